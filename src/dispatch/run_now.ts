/**
 * Running a job now, in this isolate, without storing it (`dispatchSync`):
 * one attempt, no retries, time-boxed by the job's `timeoutMs`.
 *
 * @internal
 * @module
 */
import { JobTimeoutError } from "../errors.ts";
import type { Executor } from "../executors/executor.ts";
import type { JobDefinition } from "../job.ts";
import type { NewJobRow } from "../stores/store.ts";

/**
 * Runs `row`, a checked row of `job` that is never stored, on `executor`.
 * Resolves with its stored output text (null without an `output` schema);
 * rejects with the handler's error, or `JobTimeoutError` past the job's
 * `timeoutMs` (the handler is aborted but, in this isolate, may keep running).
 * `scheduled` is the schedule slot the handler sees as `ctx.scheduled`, and
 * `flowParents` what it sees as `ctx.parents` (JSON of `FlowParentsRow`).
 */
export async function runNow(
  executor: Pick<Executor, "run">,
  job: JobDefinition,
  row: Pick<NewJobRow, "queue" | "payload">,
  scheduled: { readonly name: string; readonly slot: number } | null = null,
  flowParents: string | null = null,
): Promise<string | null> {
  const controller = new AbortController();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const overtime = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const error = new JobTimeoutError(job.name, job.timeoutMs);
      controller.abort(error);
      reject(error);
    }, job.timeoutMs);
  });
  try {
    const result = await Promise.race([
      executor.run({
        id: 0,
        name: job.name,
        queueName: row.queue,
        payload: row.payload,
        attempt: 1,
        batchId: null,
        scheduled,
        flowParents,
        signal: controller.signal,
        onProgress: () => {}, // nothing stored to show it on, nor its ctx.log() lines
      }),
      overtime,
    ]);
    if (result.kind === "release") {
      const what = result.holdsGroup === true
        ? "held back its group (ctx.rateLimitGroup)"
        : "released the job";
      throw new Error(
        `dispatchSync "${job.name}": the handler ${what}, but a job run now cannot be put back`,
      );
    }
    if (result.kind === "park") {
      // Not reached: without a step port a sleep or a wait throws before it parks.
      throw new Error(`dispatchSync "${job.name}": a job run now cannot sleep or wait`);
    }
    if (result.kind !== "success") throw result.error;
    return result.output ?? null;
  } finally {
    clearTimeout(timer);
  }
}
