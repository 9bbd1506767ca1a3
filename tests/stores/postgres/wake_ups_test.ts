/**
 * Wake-ups after commit: calls made while a message is on its way share the
 * next one, each call resolves only once a message sent after it was
 * answered, a failed message resolves its callers all the same, and on a
 * real server concurrent dispatches wake a listener on another connection.
 *
 * @module
 */
import assert from "node:assert/strict";
import postgres from "postgres";
import { WakeUps } from "../../../src/stores/postgres/wake_ups.ts";
import { PostgresStore } from "../../../src/stores/postgres/mod.ts";
import { newJob } from "../contract/fixtures.ts";
import { freshSchema, postgresTestUrl } from "../../_postgres.ts";

const url = postgresTestUrl();

/** A `send` whose messages are answered by hand, in order. */
function manualSend() {
  const answers: (() => void)[] = [];
  const failures: ((error: Error) => void)[] = [];
  return {
    sent: () => answers.length,
    send: () =>
      new Promise<void>((resolve, reject) => {
        answers.push(resolve);
        failures.push(reject);
      }),
    answer: (index: number) => answers[index]!(),
    fail: (index: number) => failures[index]!(new Error("connection lost")),
  };
}

/** Lets every queued callback run. */
const settle = () => new Promise((resolve) => setTimeout(resolve, 0));

Deno.test("WakeUps: calls made while a message is on its way share the next one, sent once it is answered", async () => {
  const sender = manualSend();
  const wakeUps = new WakeUps(sender.send);
  const resolved: string[] = [];
  const first = wakeUps.wake().then(() => resolved.push("first"));
  const later = [1, 2, 3].map((n) => wakeUps.wake().then(() => resolved.push(`later ${n}`)));
  await settle();
  assert.equal(sender.sent(), 1, "one message on its way, the later calls wait");
  sender.answer(0);
  await first;
  await settle();
  assert.deepEqual(resolved, ["first"], "a later call resolves only with a message sent after it");
  assert.equal(sender.sent(), 2, "one message for the three later calls");
  sender.answer(1);
  await Promise.all(later);
  assert.deepEqual(resolved, ["first", "later 1", "later 2", "later 3"]);
  await wakeUps.settled();
  const alone = wakeUps.wake();
  assert.equal(sender.sent(), 3, "with none on its way, a call sends at once");
  sender.answer(2);
  await alone;
});

Deno.test("WakeUps: a message that fails resolves its callers, and the next call sends again", async () => {
  const sender = manualSend();
  const wakeUps = new WakeUps(sender.send);
  const first = wakeUps.wake();
  const second = wakeUps.wake();
  sender.fail(0);
  await first;
  await settle();
  sender.fail(1);
  await second;
  const third = wakeUps.wake();
  assert.equal(sender.sent(), 3);
  sender.answer(2);
  await third;
  await wakeUps.settled();
});

Deno.test("WakeUps.settled() waits for the message on its way and the one waiting to leave", async () => {
  const sender = manualSend();
  const wakeUps = new WakeUps(sender.send);
  void wakeUps.wake();
  void wakeUps.wake();
  let settled = false;
  const done = wakeUps.settled().then(() => settled = true);
  sender.answer(0);
  await settle();
  assert.equal(settled, false, "the second message has not been answered");
  sender.answer(1);
  await done;
});

Deno.test({
  name:
    "PostgreSQL: concurrent dispatches wake a listener on another connection, which then sees every job",
  ignore: url === null,
  async fn() {
    const schema = freshSchema();
    const store = await PostgresStore.open(url!, { schema });
    const listener = postgres(url!, { max: 1, onnotice: () => {} });
    const seen: number[] = [];
    try {
      const listening = await listener.listen(`renox_queue_${schema}`, () => {
        void listener.unsafe(`SELECT count(*)::int AS n FROM "${schema}".jobs`)
          .then(([row]) => seen.push(row!.n as number));
      });
      const dispatches = 200;
      await Promise.all(Array.from({ length: dispatches }, () => store.insertJobs([newJob()])));
      const deadline = Date.now() + 20_000;
      while (!seen.includes(dispatches) && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      assert.ok(seen.includes(dispatches), `a wake-up after the last commit: saw ${seen}`);
      await listening.unlisten();
    } finally {
      await store.close();
      await listener.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await listener.end();
    }
  },
});
