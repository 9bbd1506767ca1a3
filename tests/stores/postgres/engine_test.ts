/**
 * The PostgreSQL engine on a real server: unflushed statements commit one
 * by one without waiting for the WAL flush, a write as the server says;
 * the wake-up a script asks for is sent once, after its commit, and never
 * for a transaction that rolled back.
 *
 * @module
 */
import assert from "node:assert/strict";
import postgres from "postgres";
import { PostgresEngine } from "../../../src/stores/postgres/engine.ts";
import { exec, type Script, wakeAfterCommit } from "../../../src/stores/sql/script.ts";
import { statement } from "../../../src/stores/sql/statement.ts";
import { enginePools, freshSchema, postgresTestUrl } from "../../_postgres.ts";

const url = postgresTestUrl();

const SETTING = statement("SELECT current_setting('synchronous_commit') AS value");

/** What `synchronous_commit` is inside the script's transaction, and outside any. */
function* setting(): Script<string> {
  const { rows: [row] } = yield* exec<{ value: string }>(SETTING);
  return row!.value;
}

Deno.test({
  name:
    "PostgresEngine: unflushed statements commit without waiting for the disk; a write and a statement keep the server's setting",
  ignore: url === null,
  async fn() {
    const engine = new PostgresEngine(enginePools(url!, "public"), {
      schema: "public",
      channel: "renox_queue_engine_test",
      server: "the test server",
    });
    try {
      const server = await engine.run(setting, "statement");
      assert.notEqual(server, "off", "the test server commits synchronously");
      assert.equal(await engine.run(setting, "unflushed statements"), "off");
      assert.equal(await engine.run(setting, "write"), server);
      assert.equal(await engine.run(setting, "statement"), server);
    } finally {
      await engine.close();
    }
  },
});

const MARK = statement("INSERT INTO marks (n) VALUES ($1)");
/**
 * Holds the transaction open after its wake-up was asked for: a wake-up
 * sent then would reach the listener while the mark is not yet visible.
 */
const HOLD = statement("SELECT pg_sleep(0.3)");
const FAIL_NOW = statement("SELECT 1 / 0");

/** Inserts mark `n`, asks for a wake-up (twice), then holds the transaction open. */
function* mark(n: number): Script<void> {
  yield* exec(MARK, n);
  yield* wakeAfterCommit();
  yield* wakeAfterCommit();
  yield* exec(HOLD);
}

/** Inserts mark `n`, asks for a wake-up, then fails: the transaction rolls back. */
function* markThenFail(n: number): Script<void> {
  yield* exec(MARK, n);
  yield* wakeAfterCommit();
  yield* exec(FAIL_NOW);
}

/**
 * An engine on a fresh schema with a `marks` table, and a listener on
 * another connection that, on each message of the engine's channel, notes
 * its payload and reads the marks committed by then.
 */
async function engineWithListener() {
  const schema = freshSchema();
  const channel = `renox_queue_${schema}`;
  const admin = postgres(url!, { max: 2, onnotice: () => {} });
  await admin.unsafe(`CREATE SCHEMA "${schema}"`);
  await admin.unsafe(`CREATE TABLE "${schema}".marks (n int NOT NULL)`);
  const engine = new PostgresEngine(enginePools(url!, schema), {
    schema,
    channel,
    server: "the test server",
  });
  /** Each message: its payload, and the marks the listener read once it came. */
  const heard: Promise<{ payload: string; marks: number[] }>[] = [];
  const listening = await admin.listen(channel, (payload) => {
    heard.push(
      admin.unsafe(`SELECT n FROM "${schema}".marks ORDER BY n`)
        .then((rows) => ({ payload, marks: rows.map((row) => Number(row.n)) })),
    );
  });
  /** Waits until `count` messages were heard; every message heard so far. */
  const heardAtLeast = async (count: number) => {
    const deadline = Date.now() + 10_000;
    while (heard.length < count && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    return await Promise.all(heard);
  };
  /**
   * Closes the engine, which sends the wake-ups on their way first, then
   * sends a message of the test's own: every message heard before it.
   */
  const allHeard = async () => {
    await engine.close();
    const before = heard.length;
    await admin.unsafe("SELECT pg_notify($1, 'marker')", [channel]);
    const all = await heardAtLeast(before + 1);
    const at = all.findIndex((message) => message.payload === "marker");
    if (at < 0) throw new Error("the test's own message never came back");
    return all.slice(0, at);
  };
  return {
    engine,
    heardAtLeast,
    allHeard,
    async [Symbol.asyncDispose]() {
      await engine.close();
      await listening.unlisten();
      await admin.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await admin.end();
    },
  };
}

Deno.test({
  name:
    "PostgresEngine: a wake-up a script asks for reaches a listener on another connection once, after the commit, when what the script wrote is visible",
  ignore: url === null,
  async fn() {
    await using setup = await engineWithListener();
    const { engine, heardAtLeast, allHeard } = setup;
    await engine.run(() => mark(1), "write");
    await heardAtLeast(1);
    await engine.run(() => mark(2), "unflushed statements");
    await heardAtLeast(2);
    await engine.transaction(async (tx) => {
      await tx.run(mark(3));
      await tx.run(mark(4));
    });
    // Asked twice per script, and twice in the app transaction: one message each.
    assert.deepEqual(await allHeard(), [
      { payload: "", marks: [1] },
      { payload: "", marks: [1, 2] },
      { payload: "", marks: [1, 2, 3, 4] },
    ]);
  },
});

Deno.test({
  name:
    "PostgresEngine: a script or app transaction that rolls back sends none of the wake-ups it asked for; unflushed statements that fail midway keep what they committed, and send none either",
  ignore: url === null,
  async fn() {
    await using setup = await engineWithListener();
    const { engine, allHeard } = setup;
    await assert.rejects(engine.run(() => markThenFail(1), "write"), /division by zero/);
    // Each unflushed statement commits alone: the mark before the failure stays, unannounced.
    await assert.rejects(
      engine.run(() => markThenFail(2), "unflushed statements"),
      /division by zero/,
    );
    await assert.rejects(
      engine.transaction(async (tx) => {
        await tx.run(mark(3));
        throw new Error("the app changed its mind");
      }),
      /changed its mind/,
    );
    // A wake-up sent for one of them would be a message of its own: this one leaves after them.
    await engine.run(() => mark(4), "write");
    assert.deepEqual(await allHeard(), [{ payload: "", marks: [2, 4] }]);
  },
});
