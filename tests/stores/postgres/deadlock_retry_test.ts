/**
 * PostgreSQL breaks a cycle of lock waits by rolling one transaction back
 * (`deadlock detected`). A cancel of a flow's node locks the job's row and
 * then the flow's; a transaction that holds the flow's row and then asks for
 * the job's closes the cycle. When PostgreSQL picks the store's write, the
 * store runs it again once the other side has gone on, so the caller gets
 * its answer rather than the driver's error.
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
function node(key: string): NewFlowNodeRow {
  return {
    key,
    job: { ...newJob({ name: key }), delayMs: 0, retryForMs: null },
    parents: [],
    continueOnFailure: false,
  };
}

Deno.test({
  name:
    "PostgreSQL: a cancel that PostgreSQL rolls back to break a deadlock runs again, and cancels the job",
  ignore: url === null,
  async fn() {
    await using pg = await openTestPostgresStore(url!);
    const { store, schema } = pg;
    const { id: flowId, jobIds: [jobId] } = await store.insertFlow({
      name: "locked",
      createdAt: T0,
      nodes: [node("a"), node("b")],
      onFailure: [],
    });
    const other = schemaClient(url!, schema);
    const monitor = schemaClient(url!, schema);
    try {
      let otherPid = 0;
      let releaseFlow!: () => void;
      const flowHeld = new Promise<void>((resolve) => releaseFlow = resolve);
      let holding!: () => void;
      const held = new Promise<void>((resolve) => holding = resolve);
      // The other side: the flow's row first, then (once the cancel waits for it) the job's.
      const otherSide = other.begin(async (tx) => {
        const [row] = await tx`SELECT pg_backend_pid() AS pid`;
        otherPid = row!.pid as number;
        // The cancel's session looks for the cycle after 1 s (the default), this one after 60 s:
        // PostgreSQL breaks it by rolling back the cancel's write, the case under test.
        await tx`SET LOCAL deadlock_timeout = '60s'`;
        await tx`SELECT id FROM flows WHERE id = ${flowId} FOR UPDATE`;
        holding();
        await flowHeld;
        await tx`SELECT id FROM jobs WHERE id = ${jobId!} FOR UPDATE`;
      });
      await held;
      const cancelling = store.cancel({ id: jobId!, reason: "stop", now: T0, keepUntil: T0 + 1 });
      await waitUntil(async () => {
        const [row] = await monitor`SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE ${otherPid}::int = ANY(pg_blocking_pids(pid))`;
        return (row!.n as number) >= 1 || null;
      }, { what: "the cancel waits for the flow's row" });
      releaseFlow(); // the other side now asks for the job's row the cancel holds: a cycle
      const [cancelled, otherEnded] = await Promise.allSettled([cancelling, otherSide]);
      assert.equal(otherEnded.status, "fulfilled", "the other side went on");
      assert.deepEqual(cancelled, { status: "fulfilled", value: "cancelled" });
      assert.equal((await store.flow(flowId))!.nodes[0]!.state, "cancelled");
    } finally {
      await other.end();
      await monitor.end();
    }
  },
});
