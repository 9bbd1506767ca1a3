/**
 * Turning a payload into the text that is stored, and back, with the checks
 * that keep bad payloads out of the store.
 *
 * @internal
 * @module
 */
import { previousOutput } from "./chain.ts";
import { assertSealedIfEncrypted, isEncryptedPayload, type PayloadCipher } from "./encryption.ts";
import { PayloadIntegrityError, ValidationError } from "./errors.ts";
import type { JobDefinition } from "./job.ts";
import { jsonTooDeep, MAX_JSON_DEPTH } from "./json_safe.ts";
import { dataDetail, schemaRefusal } from "./schema_issues.ts";

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
  if (payload === previousOutput) {
    throw new TypeError(
      `Cannot dispatch "${job.name}"${role}: previousOutput stands for the output of the chain link before, so only a later link of a chain takes it (.then(job, previousOutput)): give a payload`,
    );
  }
  let json: string | undefined;
  try {
    json = JSON.stringify(payload);
  } catch (error) {
    const { detail, options } = dataDetail(job, describe(error), error);
    throw new ValidationError(job.name, `payload is not JSON: ${detail}`, [], { ...options, role });
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
  if (jsonTooDeep(json)) {
    throw new ValidationError(
      job.name,
      `payload is nested deeper than ${MAX_JSON_DEPTH} arrays and objects, the most a stored value may hold`,
      [],
      { role },
    );
  }
  const result = job.schema.safeParse(JSON.parse(json));
  if (!result.success) {
    const { detail, issues, options } = schemaRefusal(job, "payload", result.error);
    const notes = job.encrypted ? [] : roundTripNotes(payload, issues.map(({ path }) => path));
    const noted = notes.length === 0 ? detail : `${detail} (${notes.join("; ")})`;
    throw new ValidationError(job.name, noted, issues, { ...options, role });
  }
  return json;
}

/**
 * For each refused path where `payload`, as given, held a value its JSON
 * text changes (NaN stored as null, a Date as a string), a note saying so:
 * the schema saw the value after the round trip, not the one passed.
 */
function roundTripNotes(payload: unknown, paths: readonly (readonly PropertyKey[])[]): string[] {
  const notes: string[] = [];
  for (const path of paths) {
    let value = payload;
    let inArray = false;
    for (const key of path) {
      if (typeof value !== "object" || value === null) {
        value = undefined;
        inArray = false;
        break;
      }
      inArray = Array.isArray(value);
      value = (value as Record<PropertyKey, unknown>)[key];
    }
    const where = ["payload", ...path.map(String)].join(".");
    const stored = typeof value === "number" && !Number.isFinite(value)
      ? `was ${value}, which JSON stores as null`
      : value instanceof Date
      ? "was a Date, which JSON stores as its ISO string"
      : value instanceof Map || value instanceof Set
      ? `was a ${value.constructor.name}, which JSON stores as {}`
      : value === undefined && inArray && path.length > 0
      ? "was undefined, which JSON stores as null in an array"
      : null;
    if (stored !== null) notes.push(`${where} ${stored}`);
  }
  return notes;
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
    return decodePayload(job, await cipher.decrypt(job.name, stored), true);
  }
  assertSealedIfEncrypted(job, stored, "payload");
  return decodePayload(job, stored, false);
}

/**
 * Parses a stored payload's JSON text and checks it against the job's
 * current schema. Of a payload that was `sealed`, an error says nothing
 * taken from it, whatever the job's definition says now.
 */
function decodePayload(job: JobDefinition, stored: string, sealed: boolean): unknown {
  const secret = { encrypted: sealed };
  let value: unknown;
  try {
    value = JSON.parse(stored);
  } catch (error) {
    const { detail, options } = dataDetail(secret, describe(error), error);
    throw new PayloadIntegrityError(job.name, `not JSON: ${detail}`, options);
  }
  const result = job.schema.safeParse(value);
  if (!result.success) {
    const { detail, options } = schemaRefusal(secret, "payload", result.error);
    throw new PayloadIntegrityError(job.name, `no longer matches its schema: ${detail}`, options);
  }
  return result.data;
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
