/**
 * Helpers for testing an app that uses the queue: run it until nothing is
 * due, or record dispatches without storing them.
 *
 * @example Asserting that code dispatched a job
 * ```ts
 * import { defineJob } from "@renox/queue";
 * import { QueueFake } from "@renox/queue/testing";
 * import { z } from "zod";
 *
 * const welcome = defineJob({ name: "welcome", schema: z.object({ userId: z.number() }), handle() {} });
 * const queue = new QueueFake();
 * await queue.dispatch(welcome, { userId: 7 });
 * queue.assertDispatched(welcome, (payload) => payload.userId === 7);
 * queue.assertNotDispatched(defineJob({ name: "other", schema: z.null(), handle() {} }));
 * ```
 *
 * @module
 */
import {
  type Dispatcher,
  type DispatchOptions,
  type JobDefinition,
  type PayloadOf,
  resolveDispatch,
} from "./job.ts";
import { DEFAULT_MAX_PAYLOAD_BYTES, encodePayload } from "./payload.ts";
import type { Queue } from "./queue.ts";
import type { RunnerStats } from "./runner.ts";
import type { WorkOptions } from "./work_options.ts";

/** Options for {@linkcode drain}. */
export interface DrainOptions extends Omit<WorkOptions, "stopWhenEmpty"> {
  /**
   * Give up (stopping the worker) and throw if the queue is not empty by then.
   * @default {10_000}
   */
  timeoutMs?: number;
}

/**
 * Works `queue` until nothing is due now, then stops. Delayed jobs and
 * retries waiting for their backoff stay queued: move an injected clock
 * forward and drain again.
 *
 * @example Drain after dispatching
 * ```ts
 * import { defineJob, Queue } from "@renox/queue";
 * import { drain } from "@renox/queue/testing";
 * import { z } from "zod";
 *
 * const job = defineJob({ name: "job", schema: z.number(), handle() {} });
 * await using queue = await Queue.open({ path: ":memory:", jobs: [job] });
 * await queue.dispatchMany(job, [1, 2, 3]);
 * const stats = await drain(queue);
 * console.log(stats.completed); // 3
 * ```
 */
export async function drain(queue: Queue, options: DrainOptions = {}): Promise<RunnerStats> {
  const { timeoutMs = 10_000, ...work } = options;
  const runner = queue.work({ pollMs: 10, ...work, stopWhenEmpty: true });
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timedOut = new Promise<"timeout">((resolve) => {
    timer = setTimeout(() => resolve("timeout"), timeoutMs);
  });
  try {
    if (await Promise.race([runner.done, timedOut]) === "timeout") {
      await runner.stop({ graceMs: 0 });
      throw new Error(`drain: the queue still had due jobs after ${timeoutMs} ms`);
    }
  } finally {
    clearTimeout(timer);
  }
  return runner.stats;
}

/** Options for {@linkcode QueueFake}. */
export interface QueueFakeOptions {
  /**
   * Largest payload accepted, in bytes of JSON, as `QueueOptions.maxPayloadBytes`.
   * @default {262_144}
   */
  maxPayloadBytes?: number;
}

/** One dispatch a {@linkcode QueueFake} recorded. */
export interface RecordedDispatch {
  /** The job dispatched. */
  readonly job: JobDefinition;
  /** Its payload, after a JSON round trip, as a worker would see it. */
  readonly payload: unknown;
  /** The options given. */
  readonly options: DispatchOptions;
}

/**
 * Stands in for a {@linkcode Queue} in tests, like Laravel's `Queue::fake()`:
 * it checks each payload against its schema exactly as `dispatch` does, records
 * it, and stores nothing. Pass it wherever the app takes a `Dispatcher`.
 */
export class QueueFake implements Dispatcher {
  readonly #recorded: RecordedDispatch[] = [];
  readonly #maxPayloadBytes: number;
  #nextId = 1;

  /** Checks payloads against the same cap as the real queue. */
  constructor(options: QueueFakeOptions = {}) {
    this.#maxPayloadBytes = options.maxPayloadBytes ?? DEFAULT_MAX_PAYLOAD_BYTES;
  }

  /** Every dispatch so far, oldest first. */
  get dispatched(): readonly RecordedDispatch[] {
    return this.#recorded;
  }

  /** Checks and records one dispatch; returns a made-up id. */
  async dispatch<J extends JobDefinition>(
    job: J,
    payload: PayloadOf<J>,
    options: DispatchOptions = {},
  ): Promise<number> {
    const [id] = await this.dispatchMany(job, [payload], options);
    return id!;
  }

  /** Checks every payload, then records them all (or none). */
  dispatchMany<J extends JobDefinition>(
    job: J,
    payloads: readonly PayloadOf<J>[],
    options: DispatchOptions = {},
  ): Promise<number[]> {
    try {
      resolveDispatch(job, options, `Cannot dispatch "${job.name}"`, Date.now());
      const encoded = payloads.map((payload) => encodePayload(job, payload, this.#maxPayloadBytes));
      for (const text of encoded) {
        this.#recorded.push({ job, payload: JSON.parse(text), options });
      }
      return Promise.resolve(encoded.map(() => this.#nextId++));
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /** Throws unless `job` was dispatched (with a payload `predicate` accepts, when given). */
  assertDispatched<S extends JobDefinition>(
    job: S,
    predicate?: (payload: PayloadOf<S>, options: DispatchOptions) => boolean,
  ): void {
    if (this.#matching(job, predicate).length === 0) {
      throw new Error(
        `Expected "${job.name}" to be dispatched${predicate ? " with a matching payload" : ""}: ${
          this.#summary(job)
        }`,
      );
    }
  }

  /** Throws if `job` was dispatched (with a payload `predicate` accepts, when given). */
  assertNotDispatched<S extends JobDefinition>(
    job: S,
    predicate?: (payload: PayloadOf<S>, options: DispatchOptions) => boolean,
  ): void {
    const count = this.#matching(job, predicate).length;
    if (count > 0) {
      throw new Error(`Expected "${job.name}" not to be dispatched: it was, ${count} times`);
    }
  }

  /** Throws unless `job` was dispatched exactly `times` times. */
  assertDispatchedTimes(job: JobDefinition, times: number): void {
    const count = this.#matching(job).length;
    if (count !== times) {
      throw new Error(`Expected "${job.name}" dispatched ${times} times: it was ${count} times`);
    }
  }

  /** Throws if anything at all was dispatched. */
  assertNothingDispatched(): void {
    if (this.#recorded.length > 0) {
      const names = [...new Set(this.#recorded.map(({ job }) => job.name))].join(", ");
      throw new Error(`Expected nothing dispatched: got ${this.#recorded.length} (${names})`);
    }
  }

  #matching(
    job: JobDefinition,
    predicate?: (payload: never, options: DispatchOptions) => boolean,
  ): RecordedDispatch[] {
    return this.#recorded.filter((entry) =>
      entry.job === job &&
      (predicate === undefined || predicate(entry.payload as never, entry.options))
    );
  }

  #summary(job: JobDefinition): string {
    const same = this.#recorded.filter((entry) => entry.job === job).length;
    return same === 0 ? "it was not dispatched" : `it was dispatched ${same} times, none matching`;
  }
}
