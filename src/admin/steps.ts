/**
 * Durable steps seen from outside a handler: the steps a job recorded
 * (`queue.steps(id)`), and the signals sent to it (`queue.signal()`).
 *
 * @module
 */
import type { Clock } from "../clock.ts";
import { isEncryptedPayload, type PayloadCipher } from "../encryption.ts";
import { jsonChange } from "../json_safe.ts";
import { assertName } from "../names.ts";
import { DEFAULT_MAX_PAYLOAD_BYTES } from "../payload.ts";
import type { JobStep } from "../steps.ts";
import type { AdminStore, SignalOutcome, StepStore } from "../stores/store.ts";
import { assertId } from "./listing.ts";

/** What a signal's payload is sealed for: its job and its name, so it cannot pass for another. */
export function signalSealedAs(jobId: number, name: string): string {
  return `${jobId}#signal:${name}`;
}

/** What a step's output is sealed for: its job and its key. */
export function stepSealedAs(jobId: number, key: string): string {
  return `${jobId}#step:${key}`;
}

/**
 * Checks a step or signal name: 1 to 255 characters, no NUL, and no `#`
 * (reserved for the numbering of a name used again in one run).
 */
export function assertStepName(name: unknown, where: string, what: string): string {
  assertName(name, where, what);
  if ((name as string).includes("#")) {
    throw new TypeError(
      `${where}: ${what} must not contain "#" (it numbers a name used again in one run): got ${
        JSON.stringify(name)
      }`,
    );
  }
  return name as string;
}

/**
 * A step's state in words, its times shown by `shown`: `done`; a wait still
 * parked for its signal `parked` (`parked until …` its timeout); a sleep
 * whose wake time is still ahead of `now` `sleeping until …`.
 */
export function stepStateText(step: JobStep, now: number, shown: (time: Date) => string): string {
  if (step.state === "parked") {
    return step.until === null ? "parked" : `parked until ${shown(step.until)}`;
  }
  if (step.kind === "sleep" && step.until !== null && step.until.getTime() > now) {
    return `sleeping until ${shown(step.until)}`;
  }
  return "done";
}

/** The steps job `id` recorded, by call position. */
export async function readSteps(store: StepStore, id: number): Promise<JobStep[]> {
  const { steps } = await store.jobSteps(assertId(id));
  return steps.map((row) => {
    const encrypted = row.output !== null && isEncryptedPayload(row.output);
    return {
      seq: row.seq,
      key: row.key,
      kind: row.kind,
      state: row.done ? "done" : "parked",
      ...(row.output !== null && !encrypted && { output: JSON.parse(row.output) }),
      encrypted,
      until: row.until === null ? null : new Date(row.until),
      attempt: row.attempt,
      durationMs: row.durationMs,
      at: new Date(row.at),
    };
  });
}

/**
 * A signal's payload as the JSON text to store (undefined is null). Throws
 * a `TypeError` starting `where: what` when it does not survive JSON or
 * its JSON is over 256 KiB.
 */
export function signalPayloadJson(payload: unknown, where: string, what: string): string {
  const value = payload === undefined ? null : payload;
  const change = jsonChange(value, "payload");
  if (change !== null) {
    throw new TypeError(`${where}: ${what} does not survive JSON: ${change}`);
  }
  let json: string;
  try {
    json = JSON.stringify(value);
  } catch (error) {
    throw new TypeError(`${where}: ${what} is not JSON: ${(error as Error).message}`);
  }
  const bytes = new TextEncoder().encode(json).length;
  if (bytes > DEFAULT_MAX_PAYLOAD_BYTES) {
    throw new TypeError(
      `${where}: ${what} is ${bytes} bytes of JSON: over the cap of ${DEFAULT_MAX_PAYLOAD_BYTES} bytes`,
    );
  }
  return json;
}

/**
 * What to do when `cipher` cannot seal a signal to an encrypted job (it
 * holds no key, only previous keys, or not the job's), naming the keys
 * where they were set: the option or the variable.
 */
function unsealableWhy(cipher: PayloadCipher | null): string {
  const fix = "to the key it was dispatched with";
  if (cipher === null) return `set APP_KEY (or Queue.open's appKey) ${fix} (this queue has none)`;
  const { current, previousList } = cipher.keyNames;
  if (!cipher.canSeal) {
    return `set ${current} ${fix} (this queue has only ${previousList}, which never seal)`;
  }
  return `set ${current} ${fix} (its key is neither ${current} nor in ${previousList})`;
}

/**
 * Sends signal `name` to job `id`: its payload (JSON) goes to the job's
 * mailbox, sealed with the app key (bound to the job and the name) when the
 * job is encrypted (its stored payload is), as its handler takes only sealed
 * signals then; as it is to any other job, so that workers without the key
 * read it. Throws `TypeError` for a bad name or a payload that is not JSON
 * or over 256 KiB, and an error naming the job when it is encrypted and
 * there is no app key, storing nothing.
 */
export async function sendSignal(
  store: StepStore & Pick<AdminStore, "unfinishedJob">,
  cipher: PayloadCipher | null,
  clock: Clock,
  id: number,
  name: string,
  payload: unknown,
): Promise<SignalOutcome> {
  const where = "queue.signal";
  assertId(id);
  assertStepName(name, where, "the signal's name");
  const json = signalPayloadJson(payload, where, "the payload");
  const job = await store.unfinishedJob(id);
  let stored = json;
  if (job !== null && isEncryptedPayload(job.payload)) {
    if (cipher === null || !cipher.canSeal || !cipher.holdsKeyOf(job.payload)) {
      throw new Error(
        `${where}: job ${id} is encrypted, and so must its signals be: ${unsealableWhy(cipher)}`,
      );
    }
    stored = await cipher.encrypt(signalSealedAs(id, name), json);
  }
  return await store.signal({ jobId: id, name, payload: stored, now: clock.now() });
}
