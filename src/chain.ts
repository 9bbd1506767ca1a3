/**
 * Chains: jobs that run one after another. Only the first is queued at
 * dispatch; each next one is queued in the transaction that settles the
 * success of the one before.
 *
 * @module
 */
import { assertQueueName } from "./names.ts";
import { optionBag, optionNames } from "./option_bags.ts";
import type { DispatchOptions, JobDefinition, PayloadOf, PlannedJobs } from "./job.ts";

/**
 * The payload of a chain link that takes the output of the link before it
 * (`defineJob({ output })`): `.then(next, previousOutput)`. The output is
 * checked against the next job's schema when it runs (a mismatch fails it
 * for good). Not for the first link, nor next to an encrypted job.
 *
 * @example Passing an output on
 * ```ts ignore
 * await queue.chain().then(fetchRates, { currency: "EUR" }).then(priceOrder, previousOutput)
 *   .dispatch();
 * ```
 */
export const previousOutput: unique symbol = Symbol("previousOutput");

/** Options for {@linkcode Queue.chain}. */
export interface ChainOptions {
  /**
   * Queue for every job of the chain (its catch included) whose dispatch
   * options name none.
   * @default {each job's own queue}
   */
  queue?: string;
}

/** Every option of `queue.chain()`. @internal */
export const CHAIN_OPTIONS = optionNames<ChainOptions>()(["queue"]);

/**
 * The options of `chain(options)`, checked as every dispatcher checks them:
 * an object of known options, with a valid queue name. @internal
 */
export function chainOptions(options: ChainOptions | undefined): ChainOptions {
  const checked = optionBag(options, "chain", CHAIN_OPTIONS) ?? {};
  if (checked.queue !== undefined) assertQueueName(checked.queue, "chain");
  return checked;
}

/** A chain as its builder hands it over to be checked and stored. */
export interface ChainPlan {
  /** The links in order, one payload each. */
  readonly links: readonly PlannedJobs[];
  /** Jobs queued once, when a link fails for good. */
  readonly onFailure: readonly PlannedJobs[];
}

/**
 * Builds a chain: `.then()` adds a link, `.catch()` a job to queue once if a
 * link fails for good, `.dispatch()` stores it. A link that fails for good
 * stops the chain; `queue.retry(id)` of that link resumes it where it stopped.
 *
 * @example Three steps, in order, with a clean-up on failure
 * ```ts
 * import { defineJob, Queue } from "@renox/queue";
 * import { z } from "zod";
 *
 * const step = defineJob({ name: "step", schema: z.object({ n: z.number() }), handle({ n }) {
 *   console.log(`step ${n}`);
 * } });
 * const cleanUp = defineJob({ name: "clean-up", schema: z.null(), handle() {} });
 *
 * await using queue = await Queue.open({ path: ":memory:", jobs: [step, cleanUp] });
 * await queue.chain()
 *   .then(step, { n: 1 })
 *   .then(step, { n: 2 })
 *   .then(step, { n: 3 })
 *   .catch(cleanUp, null)
 *   .dispatch();
 * await queue.work({ stopWhenEmpty: true }).done; // step 1, step 2, step 3
 * ```
 */
export class ChainBuilder {
  readonly #submit: (plan: ChainPlan) => Promise<number>;
  readonly #track: (dispatching: Promise<number>) => Promise<number>;
  readonly #queue: string | undefined;
  readonly #links: PlannedJobs[] = [];
  readonly #onFailure: PlannedJobs[] = [];
  #dispatched = false;

  /**
   * Made by `queue.chain()` and `tx.chain()`; `track` gives the promise
   * `dispatch()` returns for the dispatch's own (a transaction follows it).
   * @internal
   */
  constructor(
    options: ChainOptions,
    submit: (plan: ChainPlan) => Promise<number>,
    track: (dispatching: Promise<number>) => Promise<number> = (dispatching) => dispatching,
  ) {
    this.#queue = options.queue;
    this.#track = track;
    this.#submit = submit;
  }

  /**
   * Adds a link that runs after the ones before it have succeeded; with
   * {@linkcode previousOutput} as its payload, it gets the output of the
   * link before it.
   */
  then<J extends JobDefinition>(
    job: J,
    payload: PayloadOf<J> | typeof previousOutput,
    options?: DispatchOptions,
  ): this {
    this.#links.push(this.#plan("then", job, payload, options));
    return this;
  }

  /** Adds a job queued once, when any link fails for good. */
  catch<J extends JobDefinition>(job: J, payload: PayloadOf<J>, options?: DispatchOptions): this {
    this.#onFailure.push(this.#plan("catch", job, payload, options));
    return this;
  }

  /**
   * Checks every payload, then stores the chain in one transaction and
   * returns its id, which is also its first job's id. Nothing is stored if
   * any payload is refused; an empty chain is refused.
   */
  dispatch(): Promise<number> {
    return this.#track(this.#dispatch());
  }

  async #dispatch(): Promise<number> {
    if (this.#dispatched) {
      throw new Error("This chain was already dispatched: build a new one with queue.chain()");
    }
    if (this.#links.length === 0) {
      throw new TypeError("Cannot dispatch an empty chain: add a job with .then(job, payload)");
    }
    this.#dispatched = true; // before the await: a second call meanwhile must not store a copy
    try {
      return await this.#submit({ links: this.#links, onFailure: this.#onFailure });
    } catch (error) {
      this.#dispatched = false; // nothing was stored
      throw error;
    }
  }

  #plan(
    method: string,
    job: JobDefinition,
    payload: unknown,
    options: DispatchOptions | undefined,
  ): PlannedJobs {
    if (typeof job === "function") {
      // `await chain` would call then(resolve, reject): say what happened instead of storing it.
      throw new TypeError(
        `chain.${method}(job, payload) takes a job definition, not a callback: a chain is not a promise, await chain.dispatch()`,
      );
    }
    const queue = options?.queue ?? this.#queue;
    return {
      job,
      payloads: [payload],
      options: queue === undefined ? options : { ...options, queue },
    };
  }
}
