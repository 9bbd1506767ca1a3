/**
 * The flow scripts (src/stores/sql/flows.ts) on both SQL engines: how the
 * statement with which a settle records a flow's end (or that it has not
 * ended) reads `flow_nodes`. Runs on PostgreSQL when
 * `QUEUE_TEST_POSTGRES_URL` is set.
 *
 * @module
 */
import assert from "node:assert/strict";
import { DatabaseSync, type SQLInputValue } from "node:sqlite";
import { settled } from "../../../src/stores/sql/flows.ts";
import { type Step, WAKE_UP } from "../../../src/stores/sql/script.ts";
import { SqliteStore } from "../../../src/stores/sqlite/mod.ts";
import { tempDir } from "../../_helpers.ts";
import { openTestPostgresStore, planNodes, postgresTestUrl } from "../../_postgres.ts";
import { T0 } from "../contract/mod.ts";

const url = postgresTestUrl();

/** Nodes per flow in the tables the plans are read on, of which the last is still queued. */
const NODES = 50;
/** Flows in those tables. */
const FLOWS = 200;

/**
 * The statement with which the settle of a node of flow 1 that queued no
 * child records the flow's end, and its parameters.
 */
function markEnd(): Step & { readonly params: readonly unknown[] } {
  const script = settled(
    { id: 1, flow_id: 1, batch_id: null, batch_member: 0, chain_id: null },
    "complete",
    T0,
    null,
    null,
  );
  // The flow's row (not cancelled), the node's (position 0), its waiting children (none).
  const results = [{ rows: [{ cancelled_at: null }], count: 1 }, {
    rows: [{ position: 0 }],
    count: 1,
  }];
  let next = script.next();
  for (let n = 0; !next.done; n++) {
    const step = next.value;
    if (step !== WAKE_UP && "params" in step && step.statement.sqlite.includes("ended_at")) {
      return step;
    }
    next = script.next(results[n] ?? { rows: [], count: 0 });
  }
  throw new Error("the settle records no end");
}

Deno.test("SqliteStore: a settle asks whether its flow has ended with a seek of flow_nodes_open, not a read of the flow's nodes", async () => {
  await using dir = await tempDir();
  await (await SqliteStore.open(dir.dbPath)).close();
  const db = new DatabaseSync(dir.dbPath);
  try {
    db.exec(
      `WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < ${
        NODES * FLOWS - 1
      })
      INSERT INTO flow_nodes (flow_id, position, node_key, name, state, waiting_for)
      SELECT i / ${NODES}, i % ${NODES}, 'k' || i, 'x',
        CASE WHEN i % ${NODES} = ${NODES - 1} THEN 'pending' ELSE 'succeeded' END, 0 FROM n`,
    );
    const { statement, params } = markEnd();
    for (const stats of ["without statistics", "after ANALYZE"]) {
      if (stats === "after ANALYZE") db.exec("ANALYZE");
      const details = db.prepare(`EXPLAIN QUERY PLAN ${statement.sqlite}`)
        .all(...params as SQLInputValue[]).map((row) => String(row.detail));
      const reads = details.filter((detail) => detail.includes("flow_nodes"));
      assert.ok(reads.length > 0, `${stats}: ${details}`);
      assert.ok(
        reads.every((detail) => detail.includes("flow_nodes_open")),
        `${stats}: ${details}`,
      );
    }
  } finally {
    db.close();
  }
});

Deno.test({
  name:
    "PostgresStore: a settle asks whether its flow has ended with a seek of flow_nodes_open, not a read of the flow's nodes",
  ignore: url === null,
  async fn() {
    await using opened = await openTestPostgresStore(url!, { clock: "caller" });
    const { statement, params } = markEnd();
    const [row] = await opened.store.transaction(async (tx) => {
      await tx.query(`INSERT INTO flow_nodes (flow_id, position, node_key, name, state, waiting_for)
        SELECT i / ${NODES}, i % ${NODES}, 'k' || i, 'x',
          CASE WHEN i % ${NODES} = ${NODES - 1} THEN 'pending' ELSE 'succeeded' END, 0
        FROM generate_series(0, ${NODES * FLOWS - 1}) i`);
      await tx.query("ANALYZE flow_nodes"); // as autovacuum would have by then
      // The plan a prepared settle gets once the server stops planning it for its parameters.
      await tx.query("SET LOCAL plan_cache_mode = force_generic_plan");
      return await tx.query<Record<string, unknown>>(
        `EXPLAIN (FORMAT JSON) ${statement.postgres}`,
        params,
      );
    });
    const nodes = planNodes(row!);
    const reads = nodes.filter((node) => node["Relation Name"] === "flow_nodes");
    const shown = reads.map((node) => `${node["Node Type"]} ${node["Index Name"]}`).join(", ");
    assert.ok(reads.length > 0, shown);
    assert.ok(reads.every((node) => node["Index Name"] === "flow_nodes_open"), shown);
  },
});
