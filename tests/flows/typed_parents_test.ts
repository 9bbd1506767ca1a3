/**
 * Typed `ctx.parents` (docs/flows.md): a job that declares its parents
 * (`defineJob({ parents })`) reads each one's output typed, checked by
 * `deno check` (the `@ts-expect-error` lines fail the check when the types
 * do not flow); `flow.dispatch()` checks the declaration against the
 * node's parents; any other dispatch of such a job is refused. On every
 * store.
 *
 * @module
 */
import assert from "node:assert/strict";
import { z } from "zod";
import { defineJob, defineSchedule, type OutputOf } from "../../mod.ts";
import { workUntilEmpty } from "../../src/testing.ts";
import { storeTest } from "../_stores.ts";

const day = z.object({ day: z.string() });
const fetchSales = defineJob({
  name: "fetch-sales",
  schema: day,
  output: z.object({ total: z.number(), currency: z.string() }),
  handle: () => ({ total: 1_200, currency: "EUR" }),
});
const fetchRefunds = defineJob({
  name: "fetch-refunds",
  schema: day,
  output: z.number(),
  handle: () => 150,
});
const touch = defineJob({ name: "touch", schema: day, handle() {} });

const reports: string[] = [];
const buildReport = defineJob({
  name: "build-report",
  schema: day,
  parents: { "fetch-sales": fetchSales, refunds: fetchRefunds, touched: touch },
  output: z.string(),
  handle({ day }, ctx) {
    const sales: { total: number; currency: string } = ctx.parents["fetch-sales"];
    const refunds: number = ctx.parents.refunds;
    const touched: null = ctx.parents.touched;
    // @ts-expect-error: a parent's output has its job's output type, not another
    const wrong: string = ctx.parents.refunds;
    // @ts-expect-error: a declared parent without output reads null
    const missing: number = ctx.parents.touched;
    const undeclared: unknown = ctx.parents["not-declared"];
    const report = `${day}: ${sales.total - refunds} ${sales.currency}`;
    reports.push(report);
    return [report, wrong, missing, touched, undeclared].length > 0 ? report : "";
  },
});
const untyped = defineJob({
  name: "untyped",
  schema: day,
  handle(_payload, ctx) {
    // @ts-expect-error: without declared parents, ctx.parents holds unknowns
    const total: number = ctx.parents["fetch-refunds"];
    return void total;
  },
});

const jobs = [fetchSales, fetchRefunds, touch, buildReport, untyped];

// OutputOf gives a job's output type (it gave never, which took anything).
const refundsOut: OutputOf<typeof fetchRefunds> = 150;
// @ts-expect-error: fetch-refunds outputs a number
const refundsWrong: OutputOf<typeof fetchRefunds> = "150";
const touchOut: OutputOf<typeof touch> = undefined;

Deno.test("defineJob() refuses parents that are not job definitions, naming the key", () => {
  assert.deepEqual([refundsOut, refundsWrong, touchOut], [150, "150", undefined]);
  assert.throws(
    () =>
      defineJob({ name: "p", schema: day, parents: { a: "fetch-sales" as never }, handle() {} }),
    /Job "p": parents\["a"\] must be a job definition \(made by defineJob\): got "fetch-sales"/,
  );
  assert.throws(
    () => defineJob({ name: "p2", schema: day, parents: [fetchSales] as never, handle() {} }),
    /Job "p2": parents must be an object of job definitions by key/,
  );
});

storeTest(
  "a node whose job declares its parents reads their outputs, typed, by key",
  async (db) => {
    reports.length = 0;
    await using queue = await db.open({ jobs });
    const flow = queue.flow("nightly-report");
    const sales = flow.add(fetchSales, { day: "d1" });
    const refunds = flow.add(fetchRefunds, { day: "d1" }, { key: "refunds" });
    const touched = flow.add(touch, { day: "d1" }, { key: "touched" });
    const report = flow.add(buildReport, { day: "d1" }, { after: [sales, refunds, touched] });
    const flowId = await flow.dispatch();
    await workUntilEmpty(queue, { executor: "isolate" });
    assert.deepEqual(reports, ["d1: 1050 EUR"]);
    assert.equal((await queue.flowStatus(flowId))?.state, "succeeded");
    assert.equal(report.key, "build-report");
  },
);

storeTest(
  "flow.dispatch() refuses a node whose declared parents it does not wait for, runs another job, or may fail into it; nothing is stored",
  async (db) => {
    await using queue = await db.open({ jobs });
    const build = (
      wire: (flow: ReturnType<typeof queue.flow>) => void,
    ) => {
      const flow = queue.flow("report");
      wire(flow);
      return flow.dispatch();
    };
    await assert.rejects(
      build((flow) => {
        const sales = flow.add(fetchSales, { day: "d" });
        flow.add(touch, { day: "d" }, { key: "touched" });
        flow.add(buildReport, { day: "d" }, { after: [sales, "touched"] });
      }),
      /Cannot dispatch flow "report": node "build-report" \(job "build-report"\) declares parent "refunds" \(job "fetch-refunds"\), which it does not wait for: add it to the node's after/,
    );
    await assert.rejects(
      build((flow) => {
        const sales = flow.add(fetchSales, { day: "d" });
        const refunds = flow.add(touch, { day: "d" }, { key: "refunds" });
        const touched = flow.add(touch, { day: "d" }, { key: "touched" });
        flow.add(buildReport, { day: "d" }, { after: [sales, refunds, touched] });
      }),
      /node "build-report" \(job "build-report"\) declares parent "refunds" as job "fetch-refunds", but that node runs "touch"/,
    );
    await assert.rejects(
      build((flow) => {
        const sales = flow.add(fetchSales, { day: "d" });
        const refunds = flow.add(fetchRefunds, { day: "d" }, { key: "refunds" });
        const touched = flow.add(touch, { day: "d" }, { key: "touched" });
        flow.add(buildReport, { day: "d" }, {
          after: [sales, refunds, touched],
          continueOnFailure: true,
        });
      }),
      /node "build-report" \(job "build-report"\) declares its parents, whose outputs it reads: it cannot take continueOnFailure/,
    );
    await assert.rejects(
      queue.dispatch(buildReport, { day: "d" }),
      /Cannot dispatch "build-report": it declares the parents whose outputs it reads \(defineJob\(\{ parents \}\)\), so it runs only as a flow's node: add it with flow.add\(job, payload, \{ after \}\)/,
    );
    await assert.rejects(
      queue.chain().then(buildReport, { day: "d" }).dispatch(),
      /Cannot dispatch "build-report" as link 1 of a chain: it declares the parents/,
    );
    assert.deepEqual(await queue.flows(), [], "no flow stored");
    assert.equal((await queue.counts()).default?.pending ?? 0, 0, "no job stored");
  },
);

Deno.test("defineSchedule() refuses a job that declares its parents", () => {
  assert.throws(
    () =>
      defineSchedule({ name: "nightly", job: buildReport, everyMs: 60_000, payload: { day: "d" } }),
    /Schedule "nightly": job "build-report" declares the parents whose outputs it reads \(defineJob\(\{ parents \}\)\), so it runs only as a flow's node/,
  );
});
