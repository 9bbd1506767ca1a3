/**
 * Turning a payload into the text that is stored, and back, with the checks
 * that keep bad payloads out of the store.
 *
 * @internal
 * @module
 */
import { assertSealedIfEncrypted, isEncryptedPayload, type PayloadCipher } from "./encryption.ts";
import { PayloadIntegrityError, ValidationError, type ValidationIssue } from "./errors.ts";
import type { JobDefinition } from "./job.ts";

/** The default cap on a stored payload: 256 KiB of UTF-8. */
export const DEFAULT_MAX_PAYLOAD_BYTES = 256 * 1024;

const encoder = new TextEncoder();

/**
 * Checks `payload` against the job's schema, as the worker will see it after
 * a JSON round trip, and returns the JSON text to store. `role` places the
 * job in error messages (` as link 2 of a chain`).
 */
export function encodePayload(
  job: JobDefinition,
  payload: unknown,
  maxBytes: number,
  role = "",
): string {
  let json: string | undefined;
  try {
    json = JSON.stringify(payload);
  } catch (error) {
    throw new ValidationError(job.name, `payload is not JSON: ${describe(error)}`, [], {
      cause: error,
      role,
    });
  }
  if (json === undefined) {
    throw new ValidationError(job.name, `payload is not JSON: got ${typeof payload}`, [], { role });
  }
  // A UTF-8 byte is at most 3 per UTF-16 unit, so short text needs no count.
  const bytes = json.length * 3 <= maxBytes ? json.length : encoder.encode(json).length;
  if (bytes > maxBytes) {
    throw new ValidationError(
      job.name,
      `payload is ${bytes} bytes of JSON: over the cap of ${maxBytes} bytes`,
      [],
      { role },
    );
  }
  const result = job.schema.safeParse(JSON.parse(json));
  if (!result.success) {
    const issues = toIssues(result.error.issues);
    throw new ValidationError(job.name, formatIssues(issues), issues, {
      cause: result.error,
      role,
    });
  }
  return json;
}

/**
 * Opens a stored payload for a handler: decrypts it when it is encrypted,
 * then parses it and checks it against the job's schema. Throws
 * `PayloadIntegrityError` when any step fails, or when an encrypted job's
 * payload is not encrypted.
 */
export async function openPayload(
  job: JobDefinition,
  stored: string,
  cipher: PayloadCipher | null,
): Promise<unknown> {
  if (isEncryptedPayload(stored)) {
    if (cipher === null) {
      throw new PayloadIntegrityError(job.name, "it is encrypted, and this process has no APP_KEY");
    }
    return decodePayload(job, await cipher.decrypt(job.name, stored));
  }
  assertSealedIfEncrypted(job, stored, "payload");
  return decodePayload(job, stored);
}

/** Parses a stored payload's JSON text and checks it against the job's current schema. */
export function decodePayload(job: JobDefinition, stored: string): unknown {
  let value: unknown;
  try {
    value = JSON.parse(stored);
  } catch (error) {
    throw new PayloadIntegrityError(job.name, `not JSON: ${describe(error)}`, { cause: error });
  }
  const result = job.schema.safeParse(value);
  if (!result.success) {
    const detail = formatIssues(toIssues(result.error.issues));
    throw new PayloadIntegrityError(job.name, `no longer matches its schema: ${detail}`, {
      cause: result.error,
    });
  }
  return result.data;
}

function toIssues(
  issues: readonly { path: readonly PropertyKey[]; message: string }[],
): ValidationIssue[] {
  return issues.map(({ path, message }) => ({ path: [...path], message }));
}

function formatIssues(issues: readonly ValidationIssue[]): string {
  return issues.map(({ path, message }) => {
    const where = ["payload", ...path.map(String)].join(".");
    return `${where}: ${message}`;
  }).join("; ");
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
