/**
 * How a SQL store runs its ticks on its engine: a settle that only confirms
 * starts does not wait for the disk; every other settle does. On a real
 * PostgreSQL server, through an engine that records each run's mode.
 *
 * @module
 */
import assert from "node:assert/strict";
import postgres from "postgres";
import { migrations } from "../../../migrations/postgres/mod.ts";
import { postgresDialect } from "../../../src/stores/postgres/dialect.ts";
import { PostgresEngine, type Sql } from "../../../src/stores/postgres/engine.ts";
import type { Engine, RunMode } from "../../../src/stores/sql/engine.ts";
import { SqlStore } from "../../../src/stores/sql/sql_store.ts";
import { claim, LEASE_MS, newJob, T0 } from "../contract/fixtures.ts";
import { freshSchema, postgresTestUrl, schemaClient } from "../../_postgres.ts";

const url = postgresTestUrl();

/** `engine`, noting the mode of every script it runs. */
function recording(engine: Engine, modes: RunMode[]): Engine {
  return {
    run: (start, mode) => {
      modes.push(mode);
      return engine.run(start, mode);
    },
    transaction: (fn) => engine.transaction(fn),
    migrate: (steps, options, apply) => engine.migrate(steps, options, apply),
    watch: (listener) => engine.watch(listener),
    backup: (file) => engine.backup(file),
    close: () => engine.close(),
  };
}

Deno.test({
  name:
    "SqlStore.settle() writes a tick that only confirms starts unflushed, and one that settles a job flushed",
  ignore: url === null,
  async fn() {
    const schema = freshSchema();
    const connect = () => schemaClient(url!, schema) as unknown as Sql;
    const modes: RunMode[] = [];
    const engine = new PostgresEngine(connect, schema, `renox_queue_${schema}`);
    const store = new SqlStore(
      recording(engine, modes),
      postgresDialect({ dbClock: false }),
      migrations,
    );
    try {
      await store.migrate();
      const [a, b, c] = await store.insertJobs([newJob(), newJob(), newJob()]);
      await claim(store, { limit: 3, aheadFrom: 1, token: 1 });
      const confirm = (id: number) => ({ leases: [{ id, token: 1 }], leaseMs: LEASE_MS, now: T0 });
      /** The modes `settle` ran its script in. */
      const runs = async (settle: () => Promise<unknown>) => {
        modes.length = 0;
        return { result: await settle(), modes: [...modes] };
      };

      const confirmed = await runs(() =>
        store.settle([], undefined, { spans: [], starts: confirm(b!) })
      );
      assert.deepEqual(confirmed, {
        result: { applied: [], claimed: [], started: [b] },
        modes: ["unflushed write"],
      });
      assert.equal(await store.result(b!, T0).then((row) => row?.state), "running");
      const complete = { kind: "complete", id: a!, token: 1, at: T0 } as const;
      const settled = await runs(() =>
        store.settle([complete], undefined, { starts: confirm(c!) })
      );
      assert.deepEqual(settled, {
        result: { applied: [true], claimed: [], started: [c] },
        modes: ["write"],
      });
    } finally {
      const sql = postgres(url!, { max: 1, onnotice: () => {} });
      await sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await sql.end();
      await store.close();
    }
  },
});
