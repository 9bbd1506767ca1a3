/**
 * Encrypted payloads: AES-256-GCM through WebCrypto. Each stored payload
 * names its format version and the id of the key that sealed it, carries a
 * fresh random 96-bit IV, and binds the job's name as additional
 * authenticated data, so a ciphertext moved to another job does not open.
 *
 * @module
 */
import { PayloadIntegrityError } from "./errors.ts";

/** What every encrypted payload starts with: the format, version 1. */
const PREFIX = "enc1:";
const IV_BYTES = 12;
const KEY_BYTES = 32;
const KEY_ID_BYTES = 8;

const encoder = new TextEncoder();
const decoder = new TextDecoder("utf-8", { fatal: true });

interface Key {
  readonly id: string;
  readonly key: CryptoKey;
}

/** The app's keys as text: base64 of 32 bytes each. */
export interface AppKeys {
  /**
   * Encrypts, and decrypts what it encrypted (`APP_KEY`); null when only
   * previous keys are set: they open what they sealed, and nothing is sealed.
   */
  readonly current: string | null;
  /** Still decrypt what they encrypted (`APP_PREVIOUS_KEYS`). */
  readonly previous: readonly string[];
  /** Where each key was set, as an error about it names it. */
  readonly names: AppKeyNames;
}

/** Where the app's keys were set, named as the user wrote them, for errors. */
export interface AppKeyNames {
  /** The current key's: `APP_KEY` or `appKey`. */
  readonly current: string;
  /** The previous keys' list: `APP_PREVIOUS_KEYS` or `previousAppKeys`. */
  readonly previousList: string;
  /**
   * Each previous key's, by its position where it was set:
   * `APP_PREVIOUS_KEYS[2]` (empty entries of the list count), `previousAppKeys[0]`.
   */
  readonly previous: readonly string[];
}

/** Whether a stored payload is an encrypted one (its plaintext stays hidden). */
export function isEncryptedPayload(stored: string): boolean {
  return stored.startsWith(PREFIX);
}

/**
 * Throws `PayloadIntegrityError` when `stored` is plaintext and `job` is
 * defined `encrypted` in this process: the one rule every value an
 * encrypted job stores (its payload, output, step outputs, signals) is read
 * by, so a value swapped for plaintext at rest does not pass for the job's
 * own. A job this process does not define is judged by nothing: pass
 * `encrypted: false`.
 */
export function assertSealedIfEncrypted(
  job: { readonly name: string; readonly encrypted: boolean },
  stored: string,
  what: "payload" | "output" | "step output" | "signal",
): void {
  if (job.encrypted && !isEncryptedPayload(stored)) {
    throw new PayloadIntegrityError(job.name, `expected an encrypted ${what}`, { of: what });
  }
}

/**
 * A fresh key for `APP_KEY`: 32 random bytes, base64.
 *
 * @example Print a key
 * ```ts
 * import { generateAppKey } from "@renox/queue";
 * console.log(generateAppKey().length); // 44
 * ```
 */
export function generateAppKey(): string {
  return crypto.getRandomValues(new Uint8Array(KEY_BYTES)).toBase64();
}

/**
 * Seals and opens payloads with the app's keys: the current key encrypts,
 * it and the previous keys decrypt, the one named by the payload's key id.
 * Without a current key it only opens.
 */
export class PayloadCipher {
  readonly #current: Key | null;
  readonly #byId: ReadonlyMap<string, Key>;
  readonly #names: AppKeyNames;

  private constructor(current: Key | null, all: readonly Key[], names: AppKeyNames) {
    this.#current = current;
    this.#byId = new Map(all.map((key) => [key.id, key]));
    this.#names = names;
  }

  /**
   * Imports the current key (base64 of 32 bytes, `base64:` prefix allowed,
   * as `APP_KEY` holds it) and the previous keys still accepted for
   * decryption (`APP_PREVIOUS_KEYS`). A malformed key throws a `TypeError`
   * naming where it was set (`keys.names`), never showing it.
   */
  static async fromKeys(keys: AppKeys): Promise<PayloadCipher> {
    const { names } = keys;
    const currentKey = keys.current === null ? null : await importKey(keys.current, names.current);
    const previousKeys = await Promise.all(
      keys.previous.map((text, index) => importKey(text, names.previous[index]!)),
    );
    return new PayloadCipher(
      currentKey,
      currentKey === null ? previousKeys : [...previousKeys, currentKey],
      names,
    );
  }

  /** Whether it holds a current key, so it can seal (encrypt). */
  get canSeal(): boolean {
    return this.#current !== null;
  }

  /** Whether `stored` (sealed text) names a key this cipher holds: the current or a previous one. */
  holdsKeyOf(stored: string): boolean {
    if (!isEncryptedPayload(stored)) return false;
    return this.#byId.has(stored.slice(PREFIX.length).split(":")[0]!);
  }

  /** Where its keys were set, as an error about them names them (`APP_KEY` or `appKey`, …). */
  get keyNames(): AppKeyNames {
    return this.#names;
  }

  /** The id of the key that encrypts, as stored payloads name it; null when it cannot seal. */
  get keyId(): string | null {
    return this.#current?.id ?? null;
  }

  /**
   * Encrypts the payload text of job `jobName` with the current key and a
   * fresh IV. Throws a `TypeError` when there is no current key ({@linkcode canSeal}).
   */
  async encrypt(jobName: string, plaintext: string): Promise<string> {
    const current = this.#current;
    if (current === null) {
      const { current, previousList } = this.#names;
      throw new TypeError(
        `Cannot seal for "${jobName}": ${current} is not set, only ${previousList}`,
      );
    }
    const iv = crypto.getRandomValues(new Uint8Array(IV_BYTES));
    const sealed = await crypto.subtle.encrypt(
      { name: "AES-GCM", iv, additionalData: additionalData(jobName) },
      current.key,
      encoder.encode(plaintext),
    );
    return `${PREFIX}${current.id}:${iv.toBase64()}:${new Uint8Array(sealed).toBase64()}`;
  }

  /**
   * Opens text sealed for `boundTo` (a job's name for its payload). Throws
   * `PayloadIntegrityError` naming `of` (by default the payload of job
   * `boundTo`) when it is malformed, names an unknown key, or fails
   * authentication (changed, truncated, or sealed for another job).
   */
  async decrypt(
    boundTo: string,
    stored: string,
    of: { readonly job: string; readonly what: "payload" | "output" | "step output" | "signal" } = {
      job: boundTo,
      what: "payload",
    },
  ): Promise<string> {
    const { job, what } = of;
    const fail = (detail: string) => new PayloadIntegrityError(job, detail, { of: what });
    if (!isEncryptedPayload(stored)) throw fail(`expected an encrypted ${what}`);
    const [keyId, ivText, sealedText, ...extra] = stored.slice(PREFIX.length).split(":");
    if (keyId === undefined || ivText === undefined || sealedText === undefined || extra.length) {
      throw fail(`the encrypted ${what} is malformed`);
    }
    const key = this.#byId.get(keyId);
    if (key === undefined) {
      const { current, previousList } = this.#names;
      throw fail(
        `it was encrypted with key ${keyId}, which is neither ${current} nor in ${previousList}`,
      );
    }
    const iv = fromBase64(ivText);
    const sealed = fromBase64(sealedText);
    if (iv === null || iv.length !== IV_BYTES || sealed === null || sealed.length < 16) {
      throw fail(`the encrypted ${what} is malformed`);
    }
    let opened: ArrayBuffer;
    try {
      opened = await crypto.subtle.decrypt(
        { name: "AES-GCM", iv, additionalData: additionalData(boundTo) },
        key.key,
        sealed,
      );
    } catch {
      throw fail(
        `the encrypted ${what} failed authentication (changed, or not sealed for this job)`,
      );
    }
    try {
      return decoder.decode(opened);
    } catch {
      throw fail(`the decrypted ${what} is not UTF-8 text`);
    }
  }
}

/** The additional authenticated data: the format and the job's name. */
function additionalData(jobName: string): Uint8Array<ArrayBuffer> {
  return encoder.encode(`@renox/queue payload v1\0${jobName}`);
}

function fromBase64(text: string): Uint8Array<ArrayBuffer> | null {
  try {
    return Uint8Array.fromBase64(text);
  } catch {
    return null;
  }
}

/** The bytes of a key as `APP_KEY` holds it (base64, `base64:` prefix allowed), or null when not base64. */
function keyBytes(text: string): Uint8Array<ArrayBuffer> | null {
  return typeof text === "string" ? fromBase64(text.trim().replace(/^base64:/, "")) : null;
}

/** Whether `text` is a key ({@linkcode PayloadCipher.fromKeys} imports it): the base64 of 32 bytes. */
export function isAppKey(text: string): boolean {
  return keyBytes(text)?.length === KEY_BYTES;
}

async function importKey(text: string, name: string): Promise<Key> {
  const raw = keyBytes(text);
  if (raw === null || raw.length !== KEY_BYTES) {
    throw new TypeError(
      `${name} must be the base64 of 32 random bytes (generate one with the CLI's key:generate)${
        raw === null ? "" : `: it decodes to ${raw.length} bytes`
      }`,
    );
  }
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", raw));
  const id = [...digest.subarray(0, KEY_ID_BYTES)].map((b) => b.toString(16).padStart(2, "0"))
    .join("");
  const key = await crypto.subtle.importKey("raw", raw, "AES-GCM", false, ["encrypt", "decrypt"]);
  return { id, key };
}
