/**
 * Slot lateness of a schedule: an `everyMs: 1000` schedule on one worker
 * process, and how long after each slot its handler started (p50, p99).
 * Beside it, the baseline of the same run: a plain `setTimeout` aimed at
 * each slot, which is how late this machine's timers alone are.
 *
 * `deno task bench:schedules [--slots 200] [--store sqlite|postgres]`
 * (PostgreSQL from `QUEUE_BENCH_POSTGRES_URL` or `QUEUE_TEST_POSTGRES_URL`).
 *
 * @module
 */
import { parseArgs } from "node:util";
import { z } from "zod";
import { defineJob, defineSchedule, Queue } from "../mod.ts";
import { PostgresStore } from "../src/stores/postgres/mod.ts";
import { percentile } from "./percentile.ts";
import { withTempDatabase } from "./temp_database.ts";

/** The lateness samples of one run, in ms. */
export interface LatenessSample {
  /** How long after its slot each scheduled job's handler started. */
  readonly schedule: number[];
  /** How long after each slot a `setTimeout` aimed at it fired. */
  readonly timer: number[];
}

/** Runs an every-second schedule until `slots` slots ran, on `store`. */
export async function measureLateness(
  slots: number,
  store: "sqlite" | "postgres",
): Promise<LatenessSample> {
  const schedule: number[] = [];
  let done!: () => void;
  const finished = new Promise<void>((resolve) => done = resolve);
  const job = defineJob({
    name: "lateness",
    schema: z.null(),
    handle(_, ctx) {
      if (schedule.length >= slots) return;
      schedule.push(Date.now() - ctx.scheduled!.slot.getTime());
      if (schedule.length === slots) done();
    },
  });
  const everySecond = defineSchedule({
    name: "lateness",
    everyMs: 1_000,
    job,
    payload: null,
    missed: "skip",
  });
  const timer = timerLateness(slots);
  const run = async (queue: Queue) => {
    const worker = queue.work({ executor: "isolate" });
    await finished;
    await worker.stop();
    await queue.close();
  };
  if (store === "sqlite") {
    await withTempDatabase(async (path) =>
      run(await Queue.open({ path, jobs: [job, everySecond] }))
    );
  } else {
    const url = Deno.env.get("QUEUE_BENCH_POSTGRES_URL") ?? Deno.env.get("QUEUE_TEST_POSTGRES_URL");
    if (url === undefined) throw new Error("--store postgres needs QUEUE_BENCH_POSTGRES_URL");
    const schema = `bench_lateness_${crypto.randomUUID().slice(0, 8)}`;
    const pg = await PostgresStore.open(url, { schema });
    try {
      await run(await Queue.open({ store: pg, jobs: [job, everySecond] }));
    } finally {
      const dropper = await PostgresStore.open(url, { schema });
      await dropper.transaction((tx) => tx.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`));
      await dropper.close();
    }
  }
  return { schedule, timer: await timer };
}

/** A `setTimeout` aimed at each of the next `slots` whole seconds: how late each fired. */
async function timerLateness(slots: number): Promise<number[]> {
  const late: number[] = [];
  while (late.length < slots) {
    const slot = (Math.floor(Date.now() / 1_000) + 1) * 1_000;
    await new Promise((resolve) => setTimeout(resolve, slot - Date.now()));
    late.push(Date.now() - slot);
  }
  return late;
}

/** `p50 … ms, p99 … ms` of `values`. */
export function describeLateness(values: readonly number[]): string {
  return `p50 ${percentile(values, 50)} ms, p99 ${percentile(values, 99)} ms`;
}

if (import.meta.main) {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      slots: { type: "string", default: "200" },
      store: { type: "string", default: "sqlite" },
    },
  });
  const slots = Number(values.slots);
  const store = values.store;
  if (!Number.isInteger(slots) || slots < 1 || (store !== "sqlite" && store !== "postgres")) {
    console.error("usage: schedule_lateness.ts [--slots N] [--store sqlite|postgres]");
    Deno.exit(2);
  }
  const sample = await measureLateness(slots, store);
  console.log(`schedule lateness, everyMs 1000, ${slots} slots, ${store}:`);
  console.log(`  scheduled job started after its slot: ${describeLateness(sample.schedule)}`);
  console.log(`  baseline, setTimeout aimed at the slot: ${describeLateness(sample.timer)}`);
}
