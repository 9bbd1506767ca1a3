/**
 * A job's group at dispatch: `defineJob({ group })` run on each payload,
 * checked, and stored with the job beside the definition's
 * `groupConcurrency` and `ordered` (a store's claim reads them from the
 * row, so a process that does not know the job still claims it fairly).
 *
 * A group key is a non-empty string of at most {@linkcode MAX_GROUP_KEY_LENGTH}
 * characters; anything else refuses the dispatch, naming the job and what
 * `group` returned, before anything is stored.
 *
 * @internal
 * @module
 */
import type { JobDefinition } from "../job.ts";
import { assertName } from "../names.ts";
import { shown } from "../shown.ts";
import type { JobGroup } from "../stores/store.ts";

/** Longest group key, in UTF-16 code units (the limit unique ids have too). */
export const MAX_GROUP_KEY_LENGTH = 255;

/**
 * The group `job` puts `payload` in, or null when the job has no `group`.
 * `where` starts the error (`Cannot dispatch "sync-mailbox"`).
 */
export function groupOf(job: JobDefinition, payload: unknown, where: string): JobGroup | null {
  if (job.group === undefined) return null;
  let key: unknown;
  try {
    key = job.group(payload);
  } catch (error) {
    throw new TypeError(`${where}: its group threw: ${(error as Error)?.message ?? error}`, {
      cause: error,
    });
  }
  if (typeof (key as { then?: unknown } | null)?.then === "function") {
    // Its rejection is no one's: the error below says what was wrong.
    Promise.resolve(key).catch(() => {});
    throw new TypeError(
      `${where}: group must return the key itself, not a Promise: it is called at dispatch, synchronously`,
    );
  }
  return {
    key: checkedGroupKey(key, `${where}: group must return`),
    limit: job.groupConcurrency ?? null,
    ordered: job.ordered,
  };
}

/**
 * The job name and group key `Queue.pauseGroup()` and `resumeGroup()` take,
 * checked; `method` starts their errors.
 */
export function groupTarget(
  job: JobDefinition | string,
  key: unknown,
  method: string,
): [name: string, key: string] {
  const name = assertName(typeof job === "string" ? job : job?.name, method, "the job name");
  // A name alone is taken as given (the CLI may not load the jobs module); a definition says more.
  if (typeof job === "object" && job !== null && job.group === undefined) {
    throw new TypeError(
      `${method}: job "${name}" has no group (defineJob({ group })): none of its jobs is in one`,
    );
  }
  return [name, checkedGroupKey(key, `${method}: the group key must be`)];
}

/**
 * `key`, unless it is not a group key: then a `TypeError` that starts with
 * `what` (`… must return` or `… must be`) and says what it got.
 */
function checkedGroupKey(key: unknown, what: string): string {
  if (
    typeof key !== "string" || key.length === 0 || key.length > MAX_GROUP_KEY_LENGTH ||
    key.includes("\0") || !key.isWellFormed()
  ) {
    const got = typeof key === "string"
      ? `${key.length} characters${key.length <= 64 ? ` (${JSON.stringify(key)})` : ""}`
      : shown(key);
    throw new TypeError(
      `${what} a non-empty string of at most ${MAX_GROUP_KEY_LENGTH} characters, without NUL or lone surrogates: got ${got}`,
    );
  }
  return key;
}
