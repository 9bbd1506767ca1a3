/**
 * The options of {@linkcode Queue.open} beyond its store: the jobs, the
 * clock, the payload cap and the app's keys, with the rules that read them.
 *
 * @module
 */
import { optionNames } from "./option_bags.ts";
import { shown } from "./shown.ts";
import type { Clock } from "./clock.ts";
import { type AppKeys, isAppKey, PayloadCipher } from "./encryption.ts";
import { DEFAULT_MAX_PAYLOAD_BYTES } from "./payload.ts";
import type { JobsSource } from "./registry.ts";
import type { StoreOptions } from "./store_options.ts";
import { readableEnv } from "./readable_env.ts";

/** Options for {@linkcode Queue.open}: where its store is, and the rest. */
export interface QueueOptions extends StoreOptions {
  /**
   * The jobs module: its URL (`import.meta.resolve("./jobs.ts")`), or a path relative to the
   * current folder; or the job definitions.
   */
  jobs: JobsSource;
  /**
   * Source of stored times; tests inject one to move time without sleeping.
   *
   * On SQLite it is the clock of every due time. On PostgreSQL and Redis due times, leases and the
   * times the store records follow the database's clock (docs/stores.md, clocks), so an injected
   * clock moves none of them there, and a job delayed by a minute stays delayed however far the
   * clock is moved: open the store yourself with `clock: "caller"`
   * (`PostgresStore.open(url, { clock: "caller" })`, `RedisStore.open(url, { clock: "caller" })`)
   * and pass it as `store` to make those times follow this clock.
   * @default {the wall clock}
   */
  clock?: Clock;
  /**
   * Largest payload accepted at dispatch, in bytes of JSON.
   * @default {262_144}
   */
  maxPayloadBytes?: number;
  /**
   * The key that encrypts the payloads of jobs defined with `encrypted: true`
   * (base64 of 32 bytes), and opens what they stored (outputs, log lines, signals) in any
   * process: required when such a job is registered.
   * @default {the APP_KEY environment variable, when this process may read it}
   */
  appKey?: string;
  /**
   * Earlier keys that still decrypt the payloads they encrypted, after a rotation.
   * Without `appKey` (and no encrypted job registered) they still open what
   * they sealed, and nothing is sealed.
   * @default {the APP_PREVIOUS_KEYS environment variable, comma-separated}
   */
  previousAppKeys?: readonly string[];
  /**
   * How long finished jobs (succeeded or cancelled) are kept in the completed
   * jobs with their output, in ms, for jobs that do not set their own; 0
   * deletes a job at its settle and keeps nothing.
   * @default {86_400_000 (24 hours)}
   */
  keepFinishedMs?: number;
  /** @deprecated Use `keepFinishedMs`; still accepted (`keepFinishedMs` wins when both are given). */
  keepCompletedMs?: number;
  /**
   * What this process does with jobs: `"worker"` stores them and may work
   * them; `"external"` only dispatches (another process works them:
   * `work()` refuses); `"inline"` needs no store (a given `store` is
   * refused) and runs each job at dispatch, here and now (for tests and
   * tools): the settings of a database (`path`, `url`, `migrate`,
   * `durability`, `busyTimeoutMs`) are not read, so that one config can
   * open both kinds of queue.
   * @default {"worker"}
   */
  mode?: QueueMode;
}

/** Every option `Queue.open` takes ({@linkcode QueueOptions}): any other is refused by name. @internal */
export const QUEUE_OPTIONS = optionNames<QueueOptions>()([
  "path",
  "url",
  "store",
  "durability",
  "busyTimeoutMs",
  "migrate",
  "jobs",
  "clock",
  "maxPayloadBytes",
  "appKey",
  "previousAppKeys",
  "keepFinishedMs",
  "keepCompletedMs",
  "mode",
]);

/** What a process does with jobs: see {@linkcode QueueOptions.mode}. */
export type QueueMode = "worker" | "external" | "inline";

/**
 * The mode from the options, checked; an inline queue given a `store` is
 * refused, as it would neither use nor close it. @internal
 */
export function modeOf(options: QueueOptions): QueueMode {
  const mode = options.mode ?? "worker";
  if (mode !== "worker" && mode !== "external" && mode !== "inline") {
    throw new TypeError(
      `Queue.open: mode must be "worker", "external" or "inline": got ${shown(mode)}`,
    );
  }
  if (mode === "inline" && options.store !== undefined) {
    throw new TypeError(
      'Queue.open: mode "inline" takes no store: an inline queue runs each job at dispatch and stores nothing, ' +
        'so it would neither use nor close the store: drop store (and close it yourself), or drop mode "inline" to keep the jobs in it',
    );
  }
  return mode;
}

/** The payload cap from the options, checked; throws `RangeError` for one below 2 bytes. @internal */
export function maxPayloadBytesOf(options: Pick<QueueOptions, "maxPayloadBytes">): number {
  const maxPayloadBytes = options.maxPayloadBytes ?? DEFAULT_MAX_PAYLOAD_BYTES;
  if (!Number.isSafeInteger(maxPayloadBytes) || maxPayloadBytes < 2) {
    throw new RangeError(`maxPayloadBytes must be an integer >= 2: got ${shown(maxPayloadBytes)}`);
  }
  return maxPayloadBytes;
}

/**
 * The app's keys from the options, else from `APP_KEY` and
 * `APP_PREVIOUS_KEYS`; null when no key is set, and a ring that only opens
 * (no current key) when only previous keys are. Throws naming the jobs that
 * need a current key when `encrypted` lists any and there is none. @internal
 *
 * The environment is read whenever this process may read it, encrypted jobs
 * registered or not: a process that only dispatches plain jobs, sends
 * signals or reads results still opens what an encrypted job stored. Without
 * an encrypted job or `appKey`, a variable this process may not read
 * (`--allow-env` without it) counts as unset, asked without a prompt.
 */
export function readAppKeys(options: QueueOptions, encrypted: readonly string[]): AppKeys | null {
  const required = encrypted.length > 0 || options.appKey !== undefined;
  const fromEnv = (name: string) => required ? Deno.env.get(name) : readableEnv(name);
  const currentName = options.appKey === undefined ? "APP_KEY" : "appKey";
  const current = options.appKey ?? fromEnv("APP_KEY");
  const { previous, names, list } = options.previousAppKeys === undefined
    ? previousKeysOf(fromEnv("APP_PREVIOUS_KEYS") ?? "")
    : previousKeysGiven(options.previousAppKeys);
  const keyNames = { current: currentName, previousList: list, previous: names };
  if (current === undefined || current === "") {
    if (encrypted.length === 0) {
      return previous.length === 0 ? null : { current: null, previous, names: keyNames };
    }
    throw new TypeError(
      `${currentName} is not set, and the encrypted jobs ${
        encrypted.map((name) => `"${name}"`).join(", ")
      } need it: set it to the base64 of 32 random bytes (the CLI's key:generate prints one)`,
    );
  }
  return { current, previous, names: keyNames };
}

/** The previous keys, each named by its position where it was set, and that list's name. */
interface PreviousKeys {
  readonly previous: readonly string[];
  readonly names: string[];
  readonly list: "APP_PREVIOUS_KEYS" | "previousAppKeys";
}

/** The keys of `APP_PREVIOUS_KEYS` (comma-separated), each named by its position in the list. */
function previousKeysOf(list: string): PreviousKeys {
  const previous: string[] = [];
  const names: string[] = [];
  list.split(",").forEach((entry, index) => {
    const key = entry.trim();
    if (key === "") return;
    previous.push(key);
    names.push(`APP_PREVIOUS_KEYS[${index}]`);
  });
  return { previous, names, list: "APP_PREVIOUS_KEYS" };
}

/** The `previousAppKeys` option, checked to be an array, each key named by its index. */
function previousKeysGiven(keys: readonly string[]): PreviousKeys {
  if (!Array.isArray(keys)) {
    throw new TypeError(`previousAppKeys must be an array of keys: got ${typeof keys}`);
  }
  return {
    previous: keys,
    names: keys.map((_, index) => `previousAppKeys[${index}]`),
    list: "previousAppKeys",
  };
}

/**
 * The app's keys ({@linkcode readAppKeys}) and the cipher made of them. In a
 * process with no encrypted job and no `appKey`, a value that is not a key
 * at all (not the base64 of 32 bytes) is left unused rather than refused:
 * that process needs none. The well-formed keys beside it are still used. @internal
 */
export async function openAppKeys(
  options: QueueOptions,
  encrypted: readonly string[],
): Promise<{ readonly appKeys: AppKeys | null; readonly cipher: PayloadCipher | null }> {
  const read = readAppKeys(options, encrypted);
  const required = encrypted.length > 0 || options.appKey !== undefined;
  const appKeys = read === null || required ? read : wellFormedKeys(read);
  return { appKeys, cipher: appKeys === null ? null : await PayloadCipher.fromKeys(appKeys) };
}

/** `keys` without the values that are not keys, each kept key with its name; null when none is left. */
function wellFormedKeys(keys: AppKeys): AppKeys | null {
  const current = keys.current !== null && isAppKey(keys.current) ? keys.current : null;
  const kept = keys.previous.flatMap((key, index) =>
    isAppKey(key) ? [{ key, name: keys.names.previous[index]! }] : []
  );
  if (current === null && kept.length === 0) return null;
  return {
    current,
    previous: kept.map(({ key }) => key),
    names: { ...keys.names, previous: kept.map(({ name }) => name) },
  };
}
