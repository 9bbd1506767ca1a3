/**
 * The bench's jobs module: every job the bench runs, in one module that the
 * queue, each Web Worker and the pick-up worker process import by URL.
 *
 * @module
 */
import { z } from "zod";
import { defineJob } from "../mod.ts";
import { spin } from "./cpu_work.ts";
import { signalPickup } from "./pickup_signal.ts";
import type { StartSignals } from "./peers/serial_pickups.ts";
import { wallClockMs } from "./wall_clock.ts";

/** This module's URL, for `Queue.open({ jobs })` and the Web Workers. */
export const BENCH_JOBS_URL: string = import.meta.url;

/** Does nothing: what the drains measure is the queue's own cost per job. */
export const noop = defineJob({
  name: "bench-noop",
  schema: z.object({ n: z.number().int() }),
  handle() {},
});

/** Groups of the fair-scheduling drain (`--only fair`). */
export const FAIR_GROUPS = 1_000;

/** Does nothing, in one of {@linkcode FAIR_GROUPS} groups by `n`: the claim's fair part. */
export const grouped = defineJob({
  name: "bench-grouped",
  schema: z.object({ n: z.number().int() }),
  group: ({ n }) => String(n % FAIR_GROUPS),
  handle() {},
});

/**
 * {@linkcode grouped} with a group rate limit that never holds a group back
 * (at most 1,000,000 claims per group a minute): the cost of counting each
 * group's claims in the claim.
 */
export const groupedRated = defineJob({
  name: "bench-grouped-rated",
  schema: z.object({ n: z.number().int() }),
  group: ({ n }) => String(n % FAIR_GROUPS),
  groupRate: { max: 1_000_000, perMs: 60_000 },
  handle() {},
});

/**
 * When the flow fan-in bench's last node handler ended and its join's
 * handler started (`performance.now()`), written by the handlers: the
 * bench runs them in its own isolate, which shares this module.
 */
export const flowTimes = { lastNodeEndMs: 0, joinStartMs: 0 };

/** Does nothing, then notes when it ended: a node of the flow fan-in bench. */
export const flowNode = defineJob({
  name: "bench-flow-node",
  schema: z.object({ n: z.number().int() }),
  handle() {
    flowTimes.lastNodeEndMs = performance.now();
  },
});

/** Notes when it started: the join the flow fan-in bench waits for. */
export const flowJoin = defineJob({
  name: "bench-flow-join",
  schema: z.object({ n: z.number().int() }),
  handle() {
    flowTimes.joinStartMs = performance.now();
  },
});

/** Writes one line to its job log: what the observability drain measures beside `noop`. */
export const logged = defineJob({
  name: "bench-logged",
  schema: z.object({ n: z.number().int() }),
  handle({ n }, ctx) {
    ctx.log("handled", { n });
  },
});

/** Holds its thread for `iterations` of synchronous arithmetic (about 20 ms in the bench). */
export const cpuBound = defineJob({
  name: "bench-cpu",
  schema: z.object({ iterations: z.number().int().min(1) }),
  handle({ iterations }) {
    spin(iterations);
  },
});

/**
 * Signals, first thing, how long after `sentAt` (wall clock, ms) its handler
 * started.
 */
export const pickup = defineJob({
  name: "bench-pickup",
  schema: z.object({ sentAt: z.number() }),
  handle({ sentAt }, ctx) {
    signalPickup({ id: ctx.id, latencyMs: wallClockMs() - sentAt });
  },
});

/**
 * Where {@linkcode pickupHere} says that its handler started: the start
 * signals of the pick-up run under way in this isolate (null outside one).
 */
export const pickupHereStarts: { current: StartSignals | null } = { current: null };

/**
 * Says, first thing, that its handler started: the pick-up job of a worker
 * in the bench's own isolate (isolate executor), as BullMQ's worker runs
 * its handler in the bench's process.
 */
export const pickupHere = defineJob({
  name: "bench-pickup-here",
  schema: z.object({ n: z.number().int() }),
  handle({ n }) {
    pickupHereStarts.current?.start(n);
  },
});

/** Records one durable step that does nothing: what one checkpoint costs beside `noop`. */
export const oneStep = defineJob({
  name: "bench-one-step",
  schema: z.object({ n: z.number().int() }),
  async handle({ n }, ctx) {
    await ctx.step("only", () => n);
  },
});

/** Records ten durable steps that do nothing, one after another. */
export const tenSteps = defineJob({
  name: "bench-ten-steps",
  schema: z.object({ n: z.number().int() }),
  async handle({ n }, ctx) {
    for (let step = 0; step < 10; step++) await ctx.step("step", () => n + step);
  },
});
