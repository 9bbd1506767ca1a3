/**
 * PostgreSQL's row locks and `cancelFlow`: a worker's settle of a node locks
 * the node's job row and then the flow's row, so a cancel of the flow that
 * held the flow's row and waited for that job's would close a cycle of
 * waits (`deadlock detected`). The cancel's write skips a job row another
 * transaction holds, and cancels that job once the holder is done.
 *
 * @module
 */
import assert from "node:assert/strict";
import type { NewFlowNodeRow } from "../../../src/stores/store.ts";
import { openTestPostgresStore, postgresTestUrl, schemaClient } from "../../_postgres.ts";
import { waitUntil } from "../../_helpers.ts";
import { newJob, T0 } from "../contract/mod.ts";

const url = postgresTestUrl();

/** A root node `key` (job name `key`). */
function node(key: string, parents: number[] = []): NewFlowNodeRow {
  return {
    key,
    job: { ...newJob({ name: key }), delayMs: 0, retryForMs: null },
    parents,
    continueOnFailure: false,
  };
}

/** A promise and the function that resolves it. */
function latch<T = void>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((done) => resolve = done);
  return { promise, resolve };
}

Deno.test({
  name:
    "PostgreSQL: cancelFlow() beside a settle that holds a node's job row and then waits for the flow's row the cancel holds: no deadlock, the other nodes are cancelled in its write, that one right after the settle",
  ignore: url === null,
  async fn() {
    await using pg = await openTestPostgresStore(url!);
    const { store, schema } = pg;
    const { id, jobIds } = await store.insertFlow({
      name: "held",
      createdAt: T0,
      nodes: [node("a"), node("b"), node("c"), node("join", [0, 1, 2])],
      onFailure: [],
    });
    const [a, b, c] = jobIds;
    const holder = schemaClient(url!, schema); // two connections: the flow's holder, the settle
    const monitor = schemaClient(url!, schema);
    /** How many backends wait for a lock `pid` holds (or waits ahead of them for). */
    const blockedBy = async (pid: number) => {
      const [row] = await monitor`SELECT count(*)::int AS n FROM pg_stat_activity
        WHERE ${pid}::int = ANY(pg_blocking_pids(pid))`;
      return row!.n as number;
    };
    const firstPid = latch<number>();
    const letFlowGo = latch();
    const settlePid = latch<number>();
    const endSettle = latch();
    try {
      // Someone holds the flow's row, so the cancel queues for it before the settle does.
      const first = holder.begin(async (tx) => {
        const [row] = await tx`SELECT pg_backend_pid() AS pid`;
        await tx`SELECT id FROM flows WHERE id = ${id} FOR UPDATE`;
        firstPid.resolve(row!.pid as number);
        await letFlowGo.promise;
      });
      const flowHolder = await firstPid.promise;
      const cancelling = store.cancelFlow({
        id,
        reason: "flow cancelled",
        now: T0,
        keepUntil: T0,
        keepUntilByName: {},
      });
      await waitUntil(async () => (await blockedBy(flowHolder)) >= 1 || null, {
        what: "the cancel waits for the flow's row",
      });
      // The settle's order: its job's row, then the flow's (behind the cancel).
      const settle = holder.begin(async (tx) => {
        const [row] = await tx`SELECT pg_backend_pid() AS pid`;
        await tx`SELECT id FROM jobs WHERE id = ${b!} FOR UPDATE`;
        settlePid.resolve(row!.pid as number);
        await tx`SELECT id FROM flows WHERE id = ${id} FOR UPDATE`;
        await endSettle.promise;
      });
      const settling = await settlePid.promise;
      await waitUntil(async () => {
        const [row] = await monitor`SELECT cardinality(pg_blocking_pids(${settling}::int)) AS n`;
        return (row!.n as number) > 0 || null;
      }, { what: "the settle waits for the flow's row" });
      letFlowGo.resolve();
      await first;
      // The cancel holds the flow and the settle waits for it holding b: the cancel's write skips
      // b's row and commits, a and c cancelled; b is cancelled once the settle is done with it.
      await waitUntil(async () => {
        const states = (await store.flow(id))!.nodes.map((n) => n.state);
        return states.join() === "cancelled,pending,cancelled,cancelled" || null;
      }, { what: "the write that skips b's row committed" });
      endSettle.resolve();
      await settle;
      assert.deepEqual(await cancelling, { cancelled: [a, c, b], cancelling: [] });
      assert.deepEqual((await store.flow(id))!.nodes.map((n) => n.state), [
        "cancelled",
        "cancelled",
        "cancelled",
        "cancelled",
      ]);
    } finally {
      letFlowGo.resolve();
      endSettle.resolve();
      await holder.end();
      await monitor.end();
    }
  },
});
