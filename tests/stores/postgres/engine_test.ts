/**
 * The PostgreSQL engine's run modes, on a real server: an unflushed write
 * commits without waiting for the WAL flush, a write as the server says.
 *
 * @module
 */
import assert from "node:assert/strict";
import postgres from "postgres";
import { PostgresEngine, type Sql } from "../../../src/stores/postgres/engine.ts";
import { exec, type Script } from "../../../src/stores/sql/script.ts";
import { statement } from "../../../src/stores/sql/statement.ts";
import { postgresTestUrl } from "../../_postgres.ts";

const url = postgresTestUrl();

const SETTING = statement("SELECT current_setting('synchronous_commit') AS value");

/** What `synchronous_commit` is inside the script's transaction, and outside any. */
function* setting(): Script<string> {
  const { rows: [row] } = yield* exec<{ value: string }>(SETTING);
  return row!.value;
}

Deno.test({
  name:
    "PostgresEngine: an unflushed write commits without waiting for the disk; a write and the next transaction keep the server's setting",
  ignore: url === null,
  async fn() {
    const connect = () => postgres(url!, { max: 1, onnotice: () => {} }) as unknown as Sql;
    const engine = new PostgresEngine(connect, "public", "renox_queue_engine_test");
    try {
      const server = await engine.run(setting, "statement");
      assert.notEqual(server, "off", "the test server commits synchronously");
      assert.equal(await engine.run(setting, "unflushed write"), "off");
      // One connection: the setting ended with its transaction.
      assert.equal(await engine.run(setting, "write"), server);
      assert.equal(await engine.run(setting, "statement"), server);
    } finally {
      await engine.close();
    }
  },
});
