/**
 * Our throughput figures: `Queue.dispatch()` one at a time,
 * `Queue.dispatchMany()` in one call, and draining pre-queued no-op jobs
 * with `Queue.work()` at several concurrencies, in this isolate and in Web
 * Workers, each through the public API only.
 *
 * @module
 */
import type { ExecutorKind, Queue } from "../mod.ts";
import { trace } from "@opentelemetry/api";
import { FAIR_GROUPS, grouped, groupedRated, logged, noop, oneStep, tenSteps } from "./jobs.ts";
import { type Measurement, measureRate } from "./measurement.ts";
import { assertPending, withQueue, withQueueKeeping } from "./queue_fixture.ts";
import { rawRoundTripRate } from "./raw_round_trip.ts";
import { ownLoopDrain } from "./own_loop.ts";

/** Concurrencies the drains are measured at. */
export const DRAIN_CONCURRENCIES = [1, 8, 32] as const;

/** The drain's poll interval, in ms. */
export const DRAIN_POLL_MS = 5;

/** Runs `fn` on a queue on a fresh database, closed and removed afterwards. */
export type QueueFixture = <T>(fn: (queue: Queue) => Promise<T>) => Promise<T>;

/** `jobs` payloads of the no-op job. */
export function payloads(jobs: number): { n: number }[] {
  return Array.from({ length: jobs }, (_, n) => ({ n }));
}

/**
 * Single dispatch (against the raw autocommit insert into the minimal queue
 * table, target 90 %) and `dispatchMany` (against the raw one-transaction
 * insert into it, target 80 %); each also against the same insert on the
 * store's own schema.
 */
export function dispatchMeasurements(): Measurement[] {
  return [
    {
      id: "dispatch-single",
      name: "single dispatch",
      label: "queue.dispatch(), one at a time (sequential awaits)",
      baseline: "raw-insert-autocommit-minimal",
      alsoComparedWith: ["raw-insert-autocommit"],
      target: 0.9,
      run: dispatchSingle,
    },
    {
      id: "dispatch-many",
      name: "dispatchMany",
      label: "queue.dispatchMany(), all jobs in one call",
      baseline: "raw-insert-one-transaction-minimal",
      alsoComparedWith: ["raw-insert-one-transaction"],
      target: 0.8,
      run: dispatchMany,
    },
  ];
}

/**
 * The drains with `executor: "isolate"`, against the raw drain ceiling
 * (claim and delete 50 per transaction; targets
 * 35 % at concurrency 8, 50 % at 32, on the minimal queue table; also
 * against the same ceiling on the store's own schema; c32 also against its own statements
 * replayed with no worker, `store_rules_replay.ts`), and at concurrency 1 against the raw
 * drain that commits once per job (target 1.5×: a default worker beats any
 * design that commits per job). Beside them: c32 of jobs that each write a
 * log line, and c32 keeping no finished job (`keepFinishedMs: 0`), which
 * shows what the default's copy of each finished job into `completed_jobs`
 * costs against a ceiling that keeps none.
 */
export function isolateDrainMeasurements(): Measurement[] {
  return DRAIN_CONCURRENCIES.map((concurrency): Measurement => ({
    id: `drain-c${concurrency}`,
    name: `isolate drain c${concurrency}`,
    label: `queue.work() drain of no-op jobs, isolate executor, concurrency ${concurrency}`,
    ...(concurrency === 1
      ? { baseline: "raw-drain-unbatched", alsoComparedWith: ["raw-drain-batched"], target: 1.5 }
      : {
        baseline: "raw-drain-batched-minimal",
        alsoComparedWith: concurrency === 32
          ? ["raw-drain-batched", "raw-drain-store-rules"]
          : ["raw-drain-batched"],
        target: concurrency === 8 ? 0.35 : 0.5,
      }),
    run: (jobs) => drain(jobs, concurrency, "isolate"),
  })).concat({
    id: "drain-logged-c32",
    name: "isolate drain c32, logged",
    label:
      "queue.work() drain, isolate executor, concurrency 32, jobs dispatched in a span, each writing one ctx.log() line (spans recorded under OTEL_DENO=true)",
    baseline: "drain-c32",
    run: (jobs) => drain(jobs, 32, "isolate", withQueue, logged),
  }, {
    id: "drain-c32-unkept",
    name: "isolate drain c32, results not kept",
    label:
      "queue.work() drain of no-op jobs, isolate executor, concurrency 32, keepFinishedMs: 0 (no finished job kept, as the raw ceiling keeps none; the default keeps each 24 h)",
    baseline: "raw-drain-batched",
    alsoComparedWith: ["drain-c32"],
    run: (jobs) => drain(jobs, 32, "isolate", (fn) => withQueueKeeping(0, fn)),
  });
}

/**
 * The isolate drain at concurrency 32 of jobs spread over
 * {@linkcode FAIR_GROUPS} groups (no limit), every claim taking them round
 * robin across the groups, against the plain drain of the same run
 * (target 80 %).
 */
export function fairDrainMeasurements(): Measurement[] {
  return [{
    id: "drain-c32-groups",
    name: "isolate drain c32, 1,000 groups",
    label: `queue.work() drain of no-op jobs in ${
      FAIR_GROUPS.toLocaleString("en-US")
    } groups (group: n % ${FAIR_GROUPS}), isolate executor, concurrency 32`,
    baseline: "drain-c32",
    target: 0.8,
    run: (jobs) => drain(jobs, 32, "isolate", withQueue, grouped),
  }, {
    id: "drain-c32-groups-rated",
    name: "isolate drain c32, 1,000 groups, groupRate",
    label: `the same drain with groupRate (1,000,000 claims per group a minute: never reached), ` +
      `each claim reading and counting its groups' rate windows`,
    baseline: "drain-c32-groups",
    run: (jobs) => drain(jobs, 32, "isolate", withQueue, groupedRated),
  }];
}

/** Delayed higher-priority jobs beside the due ones in {@linkcode delayedBesideMeasurement}. */
export const DELAYED_BESIDE = 200_000;

/**
 * The isolate drain at concurrency 32 with {@linkcode DELAYED_BESIDE}
 * delayed priority-5 jobs queued beside the due priority-0 ones, against
 * the same drain without them (target 90 %: a claim's cost does not depend
 * on delayed jobs at a higher priority), on a fresh queue of `fixture`;
 * `more` overrides fields (a label with the job count).
 */
export function delayedBesideMeasurement(
  fixture: QueueFixture = withQueue,
  more: Partial<Measurement> = {},
): Measurement {
  return {
    id: "drain-c32-delayed-beside",
    name: "isolate drain c32, delayed beside",
    label: `queue.work() drain, isolate executor, concurrency 32, beside ${
      DELAYED_BESIDE.toLocaleString("en-US")
    } delayed priority-5 jobs`,
    baseline: "drain-c32",
    target: 0.9,
    ...more,
    run: (jobs) =>
      fixture(async (queue) => {
        const delayed = payloads(DELAYED_BESIDE);
        await queue.dispatchMany(noop, delayed, { delayMs: 3_600_000, priority: 5 });
        const rate = await drain(jobs, 32, "isolate", (fn) => fn(queue), noop, DELAYED_BESIDE);
        return rate;
      }),
  };
}

/**
 * The drains with `executor: "workers"` (as many Web Workers as the
 * default: the smaller of concurrency and cores), against the isolate drain
 * at the same concurrency (issue 27: at least 50 % at concurrency 1, 70 % at 8 and 32) and
 * also against the raw drain ceiling. They run as many jobs as the isolate
 * drains: starting the pool (about a tenth of a second, each Web Worker
 * importing the jobs module) is timed, as every `work()` call pays it, but
 * is then a small share of the run rather than most of it. Beside them, the
 * raw round trip to a bare Web Worker against the isolate drain at
 * concurrency 1: the hand-off alone, which bounds the Web Worker drain there.
 */
export function workerDrainMeasurements(): Measurement[] {
  return DRAIN_CONCURRENCIES.map((concurrency): Measurement => ({
    id: `drain-workers-c${concurrency}`,
    name: `workers drain c${concurrency}`,
    label: `queue.work() drain of no-op jobs, Web Worker executor, concurrency ${concurrency}`,
    baseline: `drain-c${concurrency}`,
    alsoComparedWith: ["raw-drain-batched"],
    target: concurrency === 1 ? 0.5 : 0.7,
    run: (jobs) => drain(jobs, concurrency, "workers"),
  })).concat({
    id: "raw-web-worker-round-trip",
    name: "raw Web Worker round trip",
    label:
      "raw Web Worker round trip, one at a time: one attempt's message to a bare Web Worker that answers at once (no queue; what each job at concurrency 1 hands off twice)",
    baseline: "drain-c1",
    run: rawRoundTripRate,
  }, ...ownLoopMeasurements());
}

/**
 * The other shape for the Web Worker executor (issue 27), measured beside
 * the pool: as many Web Workers as the pool would start, each draining on
 * its own connection with the isolate executor (see `bench/own_loop.ts`),
 * against the isolate drain at the same concurrency; and at concurrency 32
 * one such Web Worker alone, which tells the cost of two SQLite writers in
 * one process from the cost of the shape.
 */
function ownLoopMeasurements(): Measurement[] {
  const cores = Math.max(1, navigator.hardwareConcurrency ?? 1);
  const rows = DRAIN_CONCURRENCIES.map((concurrency) => ({
    concurrency,
    loops: Math.min(concurrency, cores),
  }));
  if (cores > 1) rows.push({ concurrency: 32, loops: 1 });
  return rows.map(({ concurrency, loops }): Measurement => ({
    id: `drain-own-loops-c${concurrency}-x${loops}`,
    name: `own-loop drain c${concurrency} ×${loops}`,
    label: `${
      loops === 1 ? "1 Web Worker draining" : `${loops} Web Workers, each draining`
    } no-op jobs on its own connection (isolate executor inside, no supervision), concurrency ${concurrency} in all`,
    baseline: `drain-c${concurrency}`,
    run: (jobs) => ownLoopDrain(jobs, concurrency, loops),
  }));
}

/**
 * Durable steps at concurrency 32, isolate executor, on a fresh queue of
 * `fixture`: jobs that record one step each against the bare no-op drain
 * (what one checkpoint costs: its memo is written with the tick's settle),
 * and jobs of ten steps, counted in steps per second, against the no-op
 * drain (issue 29: a 10-step job at least half the rate of 10 plain jobs).
 * `more` overrides fields of both (the server bench's job counts).
 */
export function stepMeasurements(
  fixture: QueueFixture = withQueue,
  more: Partial<Measurement> = {},
): Measurement[] {
  return [{
    id: "drain-c32-one-step",
    name: "isolate drain c32, one step each",
    label: "queue.work() drain, isolate executor, concurrency 32, each job recording one ctx.step",
    baseline: "drain-c32",
    ...more,
    run: (jobs) => drain(jobs, 32, "isolate", fixture, oneStep),
  }, {
    id: "drain-c32-ten-steps",
    name: "isolate drain c32, ten steps each",
    label:
      "the same drain of jobs of ten ctx.step each, in steps per second (a step against a plain job)",
    baseline: "drain-c32",
    target: 0.5,
    ...more,
    run: async (jobs) => {
      const stepped = Math.max(1, Math.round(jobs / 10));
      return 10 * await drain(stepped, 32, "isolate", fixture, tenSteps);
    },
  }];
}

/** Times `jobs` calls of `dispatch()`, one at a time, on a fresh queue of `fixture`. */
export function dispatchSingle(jobs: number, fixture: QueueFixture = withQueue): Promise<number> {
  const all = payloads(jobs);
  return fixture(async (queue) => {
    const rate = await measureRate(jobs, async () => {
      for (const payload of all) await queue.dispatch(noop, payload);
    });
    await assertPending(queue, jobs);
    return rate;
  });
}

/** Times one `dispatchMany()` of `jobs` jobs on a fresh queue of `fixture`. */
export function dispatchMany(jobs: number, fixture: QueueFixture = withQueue): Promise<number> {
  const all = payloads(jobs);
  return fixture(async (queue) => {
    const rate = await measureRate(jobs, () => queue.dispatchMany(noop, all));
    await assertPending(queue, jobs);
    return rate;
  });
}

/**
 * Pre-queues `jobs` no-op jobs on a fresh queue of `fixture`, then times a
 * worker that drains them and stops. With Web Workers the timing includes starting the pool (each Web
 * Worker imports the jobs module), as every `work()` call pays it.
 */
export function drain(
  jobs: number,
  concurrency: number,
  executor: ExecutorKind,
  fixture: QueueFixture = withQueue,
  job:
    | typeof noop
    | typeof logged
    | typeof oneStep
    | typeof tenSteps
    | typeof grouped
    | typeof groupedRated = noop,
  delayedLeft = 0,
): Promise<number> {
  return fixture(async (queue) => {
    if (job === noop || job === grouped || job === groupedRated) {
      await queue.dispatchMany(job, payloads(jobs));
    } else {
      // As an app would: dispatched while handling a request, so the trace context is stored.
      await trace.getTracer("bench").startActiveSpan("bench dispatch", async (span) => {
        await queue.dispatchMany(job, payloads(jobs));
        span.end();
      });
    }
    let completed = 0;
    const rate = await measureRate(jobs, async () => {
      const worker = queue.work({
        executor,
        concurrency,
        stopWhenEmpty: true,
        pollMs: DRAIN_POLL_MS,
      });
      await worker.done;
      completed = worker.stats.completed;
    });
    if (completed !== jobs) {
      throw new Error(
        `The ${executor} drain at concurrency ${concurrency} ran ${completed} of ${jobs} jobs`,
      );
    }
    await assertPending(queue, 0, delayedLeft);
    return rate;
  });
}
