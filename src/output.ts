/**
 * A job's output: the handler's return value checked against the job's
 * `output` schema, capped, turned into the text the settle stores (sealed
 * for an encrypted job), and read back for `queue.result()`.
 *
 * @internal
 * @module
 */
import { assertSealedIfEncrypted, isEncryptedPayload, type PayloadCipher } from "./encryption.ts";
import { PayloadIntegrityError, ValidationError } from "./errors.ts";
import type { JobDefinition } from "./job.ts";
import { jsonChange } from "./json_safe.ts";
import { dataDetail, schemaRefusal } from "./schema_issues.ts";

const encoder = new TextEncoder();
const ACTION = { action: "store the output of" } as const;

/** What the cipher binds an output to, so it cannot pass for the job's payload. */
function sealedAs(jobName: string): string {
  return `${jobName}#output`;
}

/**
 * The text to store for what a handler of `job` returned, or null when the
 * job has no `output` schema. Throws `ValidationError` naming the job when
 * the value fails the schema, is not JSON, or is over `maxOutputBytes`.
 */
export async function encodeOutput(
  job: JobDefinition,
  returned: unknown,
  cipher: PayloadCipher | null,
): Promise<string | null> {
  const schema = job.output as JobDefinition["output"] | undefined;
  if (schema === undefined) return null;
  const result = schema.safeParse(returned);
  if (!result.success) {
    const { detail, issues, options } = schemaRefusal(job, "output", result.error);
    throw new ValidationError(job.name, detail, issues, { ...ACTION, ...options });
  }
  const change = jsonChange(result.data, "output");
  if (change !== null) {
    const { detail } = dataDetail(job, change);
    throw new ValidationError(job.name, `output does not survive JSON: ${detail}`, [], ACTION);
  }
  let json: string;
  try {
    json = JSON.stringify(result.data);
  } catch (error) {
    const { detail, options } = dataDetail(job, (error as Error).message, error);
    throw new ValidationError(job.name, `output is not JSON: ${detail}`, [], {
      ...ACTION,
      ...options,
    });
  }
  const bytes = json.length * 3 <= job.maxOutputBytes ? json.length : encoder.encode(json).length;
  if (bytes > job.maxOutputBytes) {
    throw new ValidationError(
      job.name,
      `output is ${bytes} bytes of JSON: over the cap of ${job.maxOutputBytes} bytes (maxOutputBytes)`,
      [],
      ACTION,
    );
  }
  if (!job.encrypted) return json;
  if (cipher === null) {
    throw new PayloadIntegrityError(job.name, "it must be encrypted, and there is no APP_KEY", {
      of: "output",
    });
  }
  return await cipher.encrypt(sealedAs(job.name), json);
}

/** Whether a stored output is encrypted. */
export function isEncryptedOutput(stored: string): boolean {
  return isEncryptedPayload(stored);
}

/** Why `queue.result()` gives no output for a completed encrypted job read without a key. */
export const OUTPUT_WITHHELD_NO_KEY = "encrypted, and this process has no APP_KEY to open it";

/**
 * A stored output of job `job` as a value: decrypted (with `cipher`) when
 * it is sealed, then parsed. Throws `PayloadIntegrityError` when it cannot
 * be opened, or is plaintext while `job.encrypted` (the job's definition in
 * this process; false for a job it does not define).
 */
export async function decodeOutput(
  job: { readonly name: string; readonly encrypted: boolean },
  stored: string,
  cipher: PayloadCipher | null,
): Promise<unknown> {
  const jobName = job.name;
  assertSealedIfEncrypted(job, stored, "output");
  let json = stored;
  const sealed = isEncryptedPayload(stored);
  if (sealed) {
    if (cipher === null) {
      throw new PayloadIntegrityError(jobName, `it is ${OUTPUT_WITHHELD_NO_KEY}`, {
        of: "output",
      });
    }
    json = await cipher.decrypt(sealedAs(jobName), stored, { job: jobName, what: "output" });
  }
  try {
    return JSON.parse(json);
  } catch (error) {
    const { detail, options } = dataDetail({ encrypted: sealed }, (error as Error).message, error);
    throw new PayloadIntegrityError(jobName, `not JSON: ${detail}`, { of: "output", ...options });
  }
}
