/**
 * What the queue says about a job's value it refused or could not use: the
 * issues a schema found, and any other detail taken from the value (where
 * it does not survive JSON, what `JSON.parse` said of its text). Such an
 * error's message is stored in plaintext (the job's last error, the failed
 * jobs, `result()`) and its fields travel with the job's events, so for an
 * encrypted job nothing taken from the value is said: an issue's path may
 * be a key of the data (a record's key, an unrecognized key), and its
 * message may quote a value (`received Infinity`).
 *
 * @internal
 * @module
 */
import type { ValidationIssue } from "./errors.ts";

/** What stands in an encrypted job's error for what was taken from its data. */
export const WITHHELD = "withheld: the job is encrypted";

/** One issue as zod 4 reports it, as far as this reads it. */
interface SchemaIssue {
  readonly code?: string;
  readonly path: readonly PropertyKey[];
  readonly message: string;
}

/** A schema's refusal, ready for a `ValidationError` or a `PayloadIntegrityError`. */
export interface SchemaRefusal {
  /** The issues as text, each after `root` and its path (`payload.orderId: expected number`). */
  readonly detail: string;
  /** The issues as {@linkcode ValidationIssue}s. */
  readonly issues: ValidationIssue[];
  /** The error's options: zod's error as its `cause`, unless the job is encrypted. */
  readonly options: ErrorOptions;
}

/**
 * What to say of `error`, the issues a schema found in a value of `job`
 * that `root` names (`"payload"`, `"output"`). Of an encrypted job it says
 * how many issues there are and of which kinds (zod's codes, which come
 * from the schema), with no path, message or cause.
 */
export function schemaRefusal(
  job: { readonly encrypted: boolean },
  root: string,
  error: { readonly issues: readonly SchemaIssue[] },
): SchemaRefusal {
  if (job.encrypted) {
    const codes = error.issues.map(({ code }) => code ?? "invalid");
    const count = codes.length === 1 ? "1 issue" : `${codes.length} issues`;
    return {
      detail: `${root}: ${count} (${codes.join(", ")}), paths and messages ${WITHHELD}`,
      issues: codes.map((code) => ({ path: [], message: `${code}: ${WITHHELD}` })),
      options: {},
    };
  }
  const issues = error.issues.map(({ path, message }) => ({ path: [...path], message }));
  const detail = issues.map(({ path, message }) =>
    `${[root, ...path.map(String)].join(".")}: ${message}`
  ).join("; ");
  return { detail, issues, options: { cause: error } };
}

/**
 * `detail`, taken from a value of `job` (where it does not survive JSON,
 * what `JSON.parse` said of its text), and `cause`, as an error may carry
 * them: for an encrypted job neither, only {@linkcode WITHHELD}.
 */
export function dataDetail(
  job: { readonly encrypted: boolean },
  detail: string,
  cause?: unknown,
): { detail: string; options: ErrorOptions } {
  if (job.encrypted) return { detail: WITHHELD, options: {} };
  return { detail, options: cause === undefined ? {} : { cause } };
}
