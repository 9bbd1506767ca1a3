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
 * @example Asserting that code dispatched a chain and a batch
 * ```ts
 * import { defineJob } from "@renox/queue";
 * import { QueueFake } from "@renox/queue/testing";
 * import { z } from "zod";
 *
 * const fetchRates = defineJob({ name: "fetch-rates", schema: z.string(), handle() {} });
 * const price = defineJob({ name: "price", schema: z.number(), handle() {} });
 * const queue = new QueueFake();
 * await queue.chain().then(fetchRates, "EUR").then(price, 7).dispatch();
 * await queue.batch("import").push(price, 1).push(price, 2).finally(fetchRates, "USD").dispatch();
 * queue.assertChained([fetchRates, price]);
 * queue.assertBatched((batch) => batch.name === "import" && batch.jobs.length === 2);
 * queue.assertBatchCount(1);
 * ```
 *
 * @module
 */
import { BatchBuilder, type BatchPlan } from "./batch.ts";
import {
  ChainBuilder,
  type ChainOptions,
  chainOptions,
  type ChainPlan,
  previousOutput,
} from "./chain.ts";
import { systemClock } from "./clock.ts";
import { JobRows, type PayloadSealer } from "./dispatch/job_rows.ts";
import { PlanRows } from "./dispatch/plan_rows.ts";
import { FlowBuilder, type FlowPlan } from "./flow.ts";
import type { Dispatcher, DispatchOptions, JobDefinition, PayloadOf, PlannedJobs } from "./job.ts";
import { assertName } from "./names.ts";
import { optionBag, optionNames } from "./option_bags.ts";
import { shown } from "./shown.ts";
import type { Queue } from "./queue.ts";
import { maxPayloadBytesOf } from "./queue_options.ts";
import type { WorkerStats } from "./events.ts";
import { timeLimitMs, type WorkOptions } from "./runner/work_options.ts";
import type { KeyedJobRow, NewJobRow, WaitingJobRow } from "./stores/store.ts";

/** Options for {@linkcode workUntilEmpty}. */
export interface WorkUntilEmptyOptions extends Omit<WorkOptions, "stopWhenEmpty" | "maxTimeMs"> {
  /**
   * Give up (stopping the worker) and throw if the queue is not empty by
   * then: a number of ms up to 2147483647, or `Infinity` for no limit, as
   * `work({ maxTimeMs })` takes it.
   * @default {10_000}
   */
  maxTimeMs?: number;
  /** @deprecated Use `maxTimeMs`; still accepted (`maxTimeMs` wins when both are given). */
  timeoutMs?: number;
}

/** @deprecated Use {@linkcode WorkUntilEmptyOptions}. */
export type DrainOptions = WorkUntilEmptyOptions;

/**
 * Works `queue` until nothing is due now, then stops. Delayed jobs and
 * retries waiting for their backoff stay queued: move an injected clock
 * forward and call it again (on PostgreSQL and Redis, only a store opened
 * with `clock: "caller"` goes by that clock; a retry's backoff is spread by
 * the job's `jitter` unless it is 0: docs/testing.md).
 *
 * @example Work until empty after dispatching
 * ```ts
 * import { defineJob, Queue } from "@renox/queue";
 * import { workUntilEmpty } from "@renox/queue/testing";
 * import { z } from "zod";
 *
 * const job = defineJob({ name: "job", schema: z.number(), handle() {} });
 * await using queue = await Queue.open({ path: ":memory:", jobs: [job] });
 * await queue.dispatchMany(job, [1, 2, 3]);
 * const stats = await workUntilEmpty(queue);
 * console.log(stats.completed); // 3
 * ```
 */
export async function workUntilEmpty(
  queue: Queue,
  given: WorkUntilEmptyOptions = {},
): Promise<WorkerStats> {
  // Its own keys are read here and the rest go to work(), which names any it does not take.
  const options = optionBag(given, "workUntilEmpty") ?? {};
  const { maxTimeMs, timeoutMs, ...work } = options;
  // Checked as work() checks its own maxTimeMs, before anything runs: a value a timer cannot
  // wait for (NaN, a negative, over 2^31 - 1 ms, a string) would fire at once.
  const budgetMs = maxTimeMs != null
    ? timeLimitMs("maxTimeMs", maxTimeMs, "workUntilEmpty")
    : timeoutMs != null
    ? timeLimitMs("timeoutMs", timeoutMs, "workUntilEmpty")
    : 10_000;
  const worker = queue.work({ pollMs: 10, ...work, stopWhenEmpty: true });
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timedOut = new Promise<"timeout">((resolve) => {
    if (budgetMs !== Infinity) timer = setTimeout(() => resolve("timeout"), budgetMs);
  });
  try {
    if (await Promise.race([worker.done, timedOut]) === "timeout") {
      await worker.stop({ graceMs: 0 });
      throw new Error(`workUntilEmpty: the queue still had due jobs after ${budgetMs} ms`);
    }
  } finally {
    clearTimeout(timer);
  }
  return worker.stats;
}

/** @deprecated Use {@linkcode workUntilEmpty}. */
export function drain(queue: Queue, options: WorkUntilEmptyOptions = {}): Promise<WorkerStats> {
  return workUntilEmpty(queue, options);
}

/** Options for {@linkcode QueueFake}. */
export interface QueueFakeOptions {
  /**
   * Largest payload accepted, in bytes of JSON, as `QueueOptions.maxPayloadBytes`.
   * @default {262_144}
   */
  maxPayloadBytes?: number;
}

const QUEUE_FAKE_OPTIONS = optionNames<QueueFakeOptions>()(["maxPayloadBytes"]);

/** One dispatch a {@linkcode QueueFake} recorded. */
export interface RecordedDispatch {
  /** The job dispatched. */
  readonly job: JobDefinition;
  /**
   * Its payload as the queue would store it: what the app dispatched, after
   * the JSON round trip every stored payload makes (a `Date` becomes its
   * ISO text, an `undefined` field is gone), typed as the schema's input.
   * Not the value the handler gets: the worker parses the stored payload
   * with the job's schema, so defaults and transforms apply there, not here.
   */
  readonly payload: unknown;
  /** The options given (a copy, so a later change to the caller's object does not show). */
  readonly options: DispatchOptions;
  /**
   * The queue the job would go on: the options' `queue`, else the chain's,
   * else the job's own.
   */
  readonly queue: string;
}

/** One chain a {@linkcode QueueFake} recorded. */
export interface RecordedChain {
  /** The id `dispatch()` returned (the made-up id of its first link). */
  readonly id: number;
  /**
   * Its links in order; a link given {@linkcode previousOutput} has that
   * symbol as its payload. Each link's options include the chain's `queue`.
   */
  readonly links: readonly RecordedDispatch[];
  /** The jobs its `.catch()` added. */
  readonly catch: readonly RecordedDispatch[];
}

/** One flow a {@linkcode QueueFake} recorded. */
export interface RecordedFlow {
  /** The id `dispatch()` returned. */
  readonly id: number;
  /** The flow's name. */
  readonly name: string;
  /** Its nodes, each after its parents: key, parents' keys, and the dispatch. */
  readonly nodes: readonly {
    readonly key: string;
    readonly after: readonly string[];
    readonly continueOnFailure: boolean;
    readonly dispatch: RecordedDispatch;
  }[];
  /** The jobs its `.catch()` added. */
  readonly catch: readonly RecordedDispatch[];
}

/** One batch a {@linkcode QueueFake} recorded. */
export interface RecordedBatch {
  /** The id `dispatch()` returned. */
  readonly id: number;
  /** The batch's name. */
  readonly name: string;
  /** Its jobs, one entry per payload, in the order they were pushed. */
  readonly jobs: readonly RecordedDispatch[];
  /** The jobs its `.then()` added. */
  readonly then: readonly RecordedDispatch[];
  /** The jobs its `.catch()` added. */
  readonly catch: readonly RecordedDispatch[];
  /** The jobs its `.finally()` added. */
  readonly finally: readonly RecordedDispatch[];
  /** Whether `.allowFailures()` was called. */
  readonly allowFailures: boolean;
}

/**
 * Stands in for a {@linkcode Queue} in tests, like Laravel's `Queue::fake()`
 * and `Bus::fake()`: it checks each payload against its schema exactly as
 * `dispatch` does, records it, and stores nothing. Plain dispatches are
 * recorded in {@linkcode QueueFake.dispatched}, chains in
 * {@linkcode QueueFake.chains}, batches in {@linkcode QueueFake.batches}
 * and flows in {@linkcode QueueFake.flows} (with their callbacks), each
 * refused whole, as the real queue does, when
 * one payload is. Pass it wherever the app takes a `Dispatcher`.
 *
 * The per-job assertions ({@linkcode QueueFake.assertDispatched},
 * {@linkcode QueueFake.assertNotDispatched},
 * {@linkcode QueueFake.assertDispatchedTimes}) count every job the app sent
 * to be run: each plain dispatch (one per payload of `dispatchMany`), each
 * link of a chain, each job of a batch (one per payload of `pushMany`) and
 * each node of a flow. They do not count the jobs queued only on an outcome:
 * a chain's or flow's `catch`, a batch's `then`, `catch` and `finally`
 * (assert those with {@linkcode QueueFake.assertChained},
 * {@linkcode QueueFake.assertBatched} or the recorded
 * {@linkcode QueueFake.chains}, {@linkcode QueueFake.batches} and
 * {@linkcode QueueFake.flows}).
 */
export class QueueFake implements Dispatcher {
  readonly #recorded: RecordedDispatch[] = [];
  /** Every dispatch the per-job assertions count, in order, with where it went. */
  readonly #counted: CountedDispatch[] = [];
  readonly #chains: RecordedChain[] = [];
  readonly #batches: RecordedBatch[] = [];
  readonly #flows: RecordedFlow[] = [];
  /** The unique and debounce keys held, by key: as a store keeps them, for plain dispatches. */
  readonly #keys = new Map<string, HeldKey>();
  readonly #plans: PlanRows;
  #nextId = 1;

  /** Checks payloads against the same cap as the real queue. */
  constructor(given: QueueFakeOptions = {}) {
    const options = optionBag(given, "QueueFake", QUEUE_FAKE_OPTIONS) ?? {};
    // The queue's own checks, by the queue's own code: any job definition counts as registered
    // (the fake has no jobs module), and nothing is sealed, since nothing is stored.
    const jobRows = new JobRows(ANY_JOB, systemClock, maxPayloadBytesOf(options), NO_SEALING);
    this.#plans = new PlanRows(jobRows, systemClock, () => {});
  }

  /**
   * Every plain dispatch so far (`dispatch`, `dispatchMany`), oldest first;
   * the jobs of chains, batches and flows are in {@linkcode QueueFake.chains},
   * {@linkcode QueueFake.batches} and {@linkcode QueueFake.flows}.
   */
  get dispatched(): readonly RecordedDispatch[] {
    return this.#recorded;
  }

  /** Every chain dispatched so far, oldest first. */
  get chains(): readonly RecordedChain[] {
    return this.#chains;
  }

  /** Every batch dispatched so far, oldest first. */
  get batches(): readonly RecordedBatch[] {
    return this.#batches;
  }

  /** Every flow dispatched so far, oldest first. */
  get flows(): readonly RecordedFlow[] {
    return this.#flows;
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

  /**
   * Checks every payload as the real queue does, then records them all (or
   * none). A unique or debounced job whose key is held answers as a queue's
   * store does: a duplicate of a unique job records nothing and returns the
   * holder's id (until its `uniqueForMs` has passed: the fake runs no job,
   * so nothing else releases it); a debounced one gives the recorded job its
   * payload and its due time (`delayMs` or `at`, or neither), as the store
   * gives the waiting job; its other options stay the first dispatch's. It
   * returns the recorded job's id.
   */
  async dispatchMany<J extends JobDefinition>(
    job: J,
    payloads: readonly PayloadOf<J>[],
    options?: DispatchOptions,
  ): Promise<number[]> {
    const { rows, keyed } = await this.#plans.jobs(job, payloads, options);
    const recorded = recordAll([{ job, payloads, options }], rows);
    return recorded.map((dispatch, index) => this.#store(dispatch, keyed?.[index] ?? null));
  }

  /** Records one plain dispatch, by its key when `keyed` has one (see `dispatchMany`); its id. */
  #store(dispatch: RecordedDispatch, keyed: KeyedJobRow | null): number {
    const holder = keyed === null ? undefined : this.#keys.get(keyed.key.key);
    if (keyed?.key.kind === "unique" && holder !== undefined && holder.until > keyed.createdAt) {
      return holder.id;
    }
    if (keyed?.key.kind === "debounce" && holder !== undefined) {
      const { delayMs: _delayMs, at: _at, ...kept } = holder.dispatch.options;
      const due = dispatch.options;
      const options = {
        ...kept,
        ...(due.delayMs !== undefined && { delayMs: due.delayMs }),
        ...(due.at !== undefined && { at: due.at }),
      };
      const latest = { ...holder.dispatch, payload: dispatch.payload, options };
      this.#recorded[this.#recorded.indexOf(holder.dispatch)] = latest;
      const at = this.#counted.findIndex((entry) => entry.dispatch === holder.dispatch);
      this.#counted[at] = { ...this.#counted[at]!, dispatch: latest };
      holder.dispatch = latest;
      return holder.id;
    }
    const id = this.#nextId++;
    this.#recorded.push(dispatch);
    this.#count([dispatch], () => "");
    if (keyed !== null) {
      const until = keyed.key.kind === "unique" ? keyed.key.expiresAt : Infinity;
      this.#keys.set(keyed.key.key, { id, until, dispatch });
    }
    return id;
  }

  /**
   * Starts a chain, as `queue.chain()` does: its `dispatch()` checks every
   * link as the real queue does and records it in
   * {@linkcode QueueFake.chains}, or throws and records nothing.
   */
  chain(options?: ChainOptions): ChainBuilder {
    return new ChainBuilder(chainOptions(options), async (plan: ChainPlan) => {
      const rows = await this.#plans.chain(plan);
      const links = recordAll(plan.links, [rows.first, ...rows.next]);
      const onFailure = recordAll(plan.onFailure, rows.onFailure);
      const id = this.#nextId++;
      this.#chains.push({ id, links, catch: onFailure });
      this.#count(links, (index) => ` as link ${index + 1} of chain ${id}`);
      return id;
    });
  }

  /**
   * Starts a batch, as `queue.batch(name)` does: its `dispatch()` checks
   * every job and callback as the real queue does and records the batch in
   * {@linkcode QueueFake.batches}, or throws and records nothing.
   */
  batch(name: string): BatchBuilder {
    assertName(name, "batch", "name");
    return new BatchBuilder(name, async (plan: BatchPlan) => {
      const rows = await this.#plans.batch(plan);
      const batch = {
        name: plan.name,
        jobs: recordAll(plan.jobs, rows.jobs),
        then: recordAll(plan.then, rows.then),
        catch: recordAll(plan.catch, rows.catch),
        finally: recordAll(plan.finally, rows.finally),
        allowFailures: plan.allowFailures,
      };
      const id = this.#nextId++;
      this.#batches.push({ id, ...batch });
      this.#count(batch.jobs, () => ` in batch "${plan.name}"`);
      return id;
    });
  }

  /**
   * Starts a flow, as `queue.flow(name)` does: its `dispatch()` checks the
   * graph and every payload as the real queue does and records the flow in
   * {@linkcode QueueFake.flows}, or throws and records nothing.
   */
  flow(name: string): FlowBuilder {
    assertName(name, "flow", "name");
    return new FlowBuilder(name, async (plan: FlowPlan) => {
      const rows = await this.#plans.flow(plan);
      const nodes = plan.nodes.map((node, index) => ({
        key: node.key,
        after: node.parents,
        continueOnFailure: node.continueOnFailure,
        dispatch: recordAll([node.planned], [rows.nodes[index]!.job])[0]!,
      }));
      const onFailure = recordAll(plan.onFailure, rows.onFailure);
      const id = this.#nextId++;
      this.#flows.push({ id, name: plan.name, nodes, catch: onFailure });
      this.#count(
        nodes.map((node) => node.dispatch),
        (index) => ` as node "${nodes[index]!.key}" of flow "${plan.name}"`,
      );
      return id;
    });
  }

  /**
   * Throws unless `job` was dispatched (with a payload `predicate` accepts,
   * when given): on its own, as a chain's link, a batch's job or a flow's
   * node. A link given `previousOutput` has no payload yet: it counts only
   * without a predicate.
   */
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

  /**
   * Throws unless `job` was dispatched on `queue` (with a payload
   * `predicate` accepts, when given), as Laravel's `Queue::assertPushedOn()`:
   * the queue the job would go on, from its options, its chain's `queue` or
   * its definition. Counts as {@linkcode QueueFake.assertDispatched} does.
   */
  assertDispatchedOn<S extends JobDefinition>(
    job: S,
    queue: string,
    predicate?: (payload: PayloadOf<S>, options: DispatchOptions) => boolean,
  ): void {
    const all = this.#matching(job, predicate);
    if (all.some(({ dispatch }) => dispatch.queue === queue)) return;
    const seen = all.length === 0
      ? this.#summary(job)
      : `it was dispatched ${timesText(all.length)}, none on it: ${listed(all)}`;
    throw new Error(
      `Expected "${job.name}" to be dispatched on queue ${JSON.stringify(queue)}${
        predicate ? " with a matching payload" : ""
      }: ${seen}`,
    );
  }

  /**
   * Throws if `job` was dispatched (with a payload `predicate` accepts, when
   * given): on its own, as a chain's link, a batch's job or a flow's node.
   */
  assertNotDispatched<S extends JobDefinition>(
    job: S,
    predicate?: (payload: PayloadOf<S>, options: DispatchOptions) => boolean,
  ): void {
    const found = this.#matching(job, predicate);
    if (found.length > 0) {
      throw new Error(
        `Expected "${job.name}" not to be dispatched: it was, ${timesText(found.length)}: ${
          listed(found)
        }`,
      );
    }
  }

  /**
   * Throws unless `job` was dispatched exactly `times` times, counting each
   * payload dispatched on its own, each chain link, batch job and flow node;
   * `times` must be a whole number, 0 or more.
   */
  assertDispatchedTimes(job: JobDefinition, times: number): void {
    assertCount(times, "assertDispatchedTimes", "times");
    const found = this.#matching(job);
    if (found.length !== times) {
      throw new Error(
        `Expected "${job.name}" dispatched ${timesText(times)}: it was ${
          found.length === 0 ? "0 times" : `${timesText(found.length)}: ${listed(found)}`
        }`,
      );
    }
  }

  /** Throws if anything at all was dispatched: a job, a chain, a batch or a flow. */
  assertNothingDispatched(): void {
    const what = [
      ...(this.#recorded.length > 0
        ? [
          `${this.#recorded.length} (${
            [...new Set(this.#recorded.map(({ job }) => job.name))].join(", ")
          })`,
        ]
        : []),
      ...(this.#chains.length > 0 ? [`${this.#chains.length} chain(s)`] : []),
      ...(this.#batches.length > 0 ? [`${this.#batches.length} batch(es)`] : []),
      ...(this.#flows.length > 0 ? [`${this.#flows.length} flow(s)`] : []),
    ];
    if (what.length > 0) throw new Error(`Expected nothing dispatched: got ${what.join(", ")}`);
  }

  /**
   * Throws unless a chain was dispatched whose links are `jobs`, in that
   * order (and which `predicate` accepts, when given), as Laravel's
   * `Bus::assertChained()`.
   */
  assertChained(
    jobs: readonly JobDefinition[],
    predicate?: (chain: RecordedChain) => boolean,
  ): void {
    const names = (list: readonly JobDefinition[]) =>
      `[${list.map((job) => JSON.stringify(job.name)).join(", ")}]`;
    const linksOf = (chain: RecordedChain) => chain.links.map((link) => link.job);
    const same = this.#chains.filter((chain) =>
      chain.links.length === jobs.length &&
      chain.links.every((link, index) => link.job === jobs[index])
    );
    if (same.length > 0 && (predicate === undefined || same.some(predicate))) return;
    const seen = this.#chains.length === 0
      ? "no chain was dispatched"
      : same.length > 0
      ? `${same.length} such chain(s) were dispatched, none matching: ${
        same.map((chain) =>
          `chain ${chain.id} (${chain.links.map((link) => shownDispatch(link)).join(", ")})`
        ).join("; ")
      }`
      : `the chains dispatched were ${
        this.#chains.map((chain) => names(linksOf(chain))).join(", ")
      }`;
    throw new Error(
      `Expected a chain of ${names(jobs)}${predicate ? " matching" : ""} to be dispatched: ${seen}`,
    );
  }

  /** Throws if any chain was dispatched. */
  assertNothingChained(): void {
    if (this.#chains.length > 0) {
      throw new Error(`Expected no chain dispatched: got ${this.#chains.length}`);
    }
  }

  /**
   * Throws unless a batch was dispatched that `predicate` accepts, as
   * Laravel's `Bus::assertBatched()`.
   */
  assertBatched(predicate: (batch: RecordedBatch) => boolean): void {
    if (!this.#batches.some(predicate)) {
      const seen = this.#batches.length === 0
        ? "no batch was dispatched"
        : `none of the ${this.#batches.length} batch(es) dispatched matches: ${
          this.#batches.map((batch) =>
            `${JSON.stringify(batch.name)} with ${batch.jobs.length} job(s) [${
              listed(batch.jobs.map((dispatch) => ({ dispatch, as: "" })), ", ", true)
            }]`
          ).join("; ")
        }`;
      throw new Error(`Expected a matching batch to be dispatched: ${seen}`);
    }
  }

  /** Throws unless exactly `count` batches were dispatched; `count` must be a whole number, 0 or more. */
  assertBatchCount(count: number): void {
    assertCount(count, "assertBatchCount", "count");
    if (this.#batches.length !== count) {
      throw new Error(
        `Expected ${count} batch(es) dispatched: ${this.#batches.length} were`,
      );
    }
  }

  /** Throws if any batch was dispatched. */
  assertNothingBatched(): void {
    if (this.#batches.length > 0) {
      throw new Error(`Expected no batch dispatched: got ${this.#batches.length}`);
    }
  }

  #count(dispatches: readonly RecordedDispatch[], as: (index: number) => string): void {
    this.#counted.push(...dispatches.map((dispatch, index) => ({ dispatch, as: as(index) })));
  }

  /**
   * The counted dispatches of `job` that `predicate` accepts; a chain link
   * given `previousOutput` has no payload yet, so no predicate accepts it.
   */
  #matching(
    job: JobDefinition,
    predicate?: (payload: never, options: DispatchOptions) => boolean,
  ): CountedDispatch[] {
    return this.#counted.filter(({ dispatch }) =>
      dispatch.job === job &&
      (predicate === undefined ||
        (dispatch.payload !== previousOutput &&
          predicate(dispatch.payload as never, dispatch.options)))
    );
  }

  /** Why no dispatch of `job` matched: the dispatches it had, else what else was dispatched. */
  #summary(job: JobDefinition): string {
    const same = this.#matching(job);
    if (same.length > 0) {
      return `it was dispatched ${timesText(same.length)}, none matching: ${listed(same)}`;
    }
    const others = new Map<JobDefinition, number>();
    for (const { dispatch } of this.#counted) {
      others.set(dispatch.job, (others.get(dispatch.job) ?? 0) + 1);
    }
    if (others.size === 0) return "it was not dispatched";
    return `it was not dispatched (dispatched: ${
      [...others].map(([other, count]) =>
        `${JSON.stringify(other.name)} ${timesText(count)}${
          other.name === job.name ? " (another definition of that name)" : ""
        }`
      ).join(", ")
    })`;
  }
}

/** The most dispatches a failure message lists. */
const LISTED = 10;

/** Dispatches for a failure message: each payload, queue, options and where it went; the first few. */
function listed(counted: readonly CountedDispatch[], separator = "; ", withNames = false): string {
  const shownOnes = counted.slice(0, LISTED).map(({ dispatch, as }) =>
    `${withNames ? `${JSON.stringify(dispatch.job.name)} ` : ""}${shownDispatch(dispatch)}${as}`
  );
  const more = counted.length - LISTED;
  return shownOnes.join(separator) + (more > 0 ? `${separator}and ${more} more` : "");
}

/** A recorded dispatch in a message: `{"userId":7} on "mail" with {"delayMs":500}`. */
function shownDispatch({ payload, options, queue }: RecordedDispatch): string {
  // The queue is shown resolved; the other options as given.
  const rest = Object.entries(options).filter(([name, value]) => name !== "queue" && value != null);
  const json = payload === previousOutput ? "previousOutput" : JSON.stringify(payload);
  const text = json.length > 120 ? `${json.slice(0, 119)}…` : json;
  const given = rest.length > 0 ? ` with ${JSON.stringify(Object.fromEntries(rest))}` : "";
  return `${text} on ${JSON.stringify(queue)}${given}`;
}

/** `1 time`, `3 times`. */
function timesText(count: number): string {
  return `${count} time${count === 1 ? "" : "s"}`;
}

/** Refuses a count that no number of dispatches could be: negative, fractional, not a number. */
function assertCount(value: number, method: string, name: string): void {
  if (!Number.isSafeInteger(value) || value < 0) {
    throw new RangeError(
      `${method}: ${name} must be a whole number, 0 or more: got ${shown(value)}`,
    );
  }
}

/** A unique or debounce key a {@linkcode QueueFake} holds: its job's id and record. */
interface HeldKey {
  readonly id: number;
  /** When a unique key's hold ends (its `uniqueForMs`); a debounce key's never does here. */
  readonly until: number;
  /** The recorded dispatch of the job holding it (a debounce replaces it). */
  dispatch: RecordedDispatch;
}

/** A dispatch the per-job assertions count, and where it went (` in batch "import"`). */
interface CountedDispatch {
  readonly dispatch: RecordedDispatch;
  readonly as: string;
}

/** Every job definition counts as registered with a fake. */
const ANY_JOB = { has: () => true };

/** A fake stores nothing, so it seals nothing: an encrypted job's payload is recorded as given. */
const NO_SEALING: PayloadSealer = { encrypt: (_jobName, plaintext) => Promise.resolve(plaintext) };

/**
 * The dispatches `planned` made of, one per payload, each with its row
 * (`rows` holds them in the same order): the payload as the row stores it,
 * or `previousOutput` for a chain link that takes one.
 */
function recordAll(
  planned: readonly PlannedJobs[],
  rows: readonly (NewJobRow | WaitingJobRow)[],
): RecordedDispatch[] {
  let next = 0;
  return planned.flatMap(({ job, payloads, options }) =>
    payloads.map((payload) => {
      const row = rows[next++]!;
      return Object.freeze({
        job,
        payload: payload === previousOutput ? previousOutput : JSON.parse(row.payload),
        options: copied(options),
        queue: row.queue,
      });
    })
  );
}

/** A copy of dispatch options (its `at` too), so that the caller's later changes do not show. */
function copied(options: DispatchOptions | undefined): DispatchOptions {
  const copy = { ...options };
  if (copy.at instanceof Date) copy.at = new Date(copy.at);
  return Object.freeze(copy);
}
