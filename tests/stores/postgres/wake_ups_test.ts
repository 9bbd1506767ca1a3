/**
 * Wake-ups after commit: calls made while a message is on its way share the
 * next one, each call resolves only once a message sent after it was
 * answered, a failed message resolves its callers all the same, and on a
 * real server concurrent dispatches wake a listener on another connection,
 * as does every other write that makes work for idle workers, after its
 * commit; a settle that makes none sends nothing.
 *
 * @module
 */
import assert from "node:assert/strict";
import postgres from "postgres";
import { WakeUps } from "../../../src/stores/postgres/wake_ups.ts";
import { PostgresStore } from "../../../src/stores/postgres/mod.ts";
import type { Settlement } from "../../../src/stores/store.ts";
import {
  claim,
  complete,
  failedJobs,
  newJob,
  release,
  schedule,
  T0,
} from "../contract/fixtures.ts";
import { freshSchema, postgresTestUrl, schemaClient } from "../../_postgres.ts";

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

/** A write that should wake other processes' workers, and what its wake-up must find committed. */
interface WakingWrite {
  /** What the write is. */
  readonly what: string;
  /** Prepares the write, in queue `queue`; returns the write, for a store on the same schema. */
  readonly prepare: (
    store: PostgresStore,
    queue: string,
  ) => Promise<(store: PostgresStore) => Promise<unknown>>;
  /** A statement on the store's tables, with `$1` the queue, true once the write is visible. */
  readonly visible: string;
}

const EXISTS = "SELECT EXISTS (SELECT 1 FROM jobs WHERE queue = $1) AS ok";
const HOUR_MS = 3_600_000;

/** Pushes a job to `queue` and claims it with `token`; its id. */
async function claimed(store: PostgresStore, queue: string, token: number): Promise<number> {
  const [id] = await store.insertJobs([newJob({ queue })]);
  const [job] = await claim(store, { queues: [queue], limit: 1, token });
  assert.equal(job?.id, id);
  return id!;
}

/** A park of the attempt `token` holds on job `id`, waiting for the signal `approve`. */
function parkForSignal(id: number, token: number): Settlement {
  const until = T0 + HOUR_MS;
  return {
    kind: "park",
    id,
    token,
    at: T0,
    availableAt: until,
    step: {
      seq: 1,
      key: "approve",
      kind: "wait",
      output: null,
      until,
      done: false,
      attempt: 1,
      durationMs: 0,
    },
  };
}

const WAKING_WRITES: readonly WakingWrite[] = [
  {
    what: "a dispatch inside queue.transaction()",
    prepare: (_store, queue) =>
      Promise.resolve((store) => store.transaction((tx) => tx.insertJobs([newJob({ queue })]))),
    visible: EXISTS,
  },
  {
    what: "a settle that releases a job for a retry",
    async prepare(store, queue) {
      const id = await claimed(store, queue, 1);
      return (store) => store.settle([release(id, 1, T0)]);
    },
    visible: "SELECT EXISTS (SELECT 1 FROM jobs WHERE queue = $1 AND token IS NULL) AS ok",
  },
  {
    what: "a settle that queues a chain's next link",
    async prepare(store, queue) {
      const first = await store.insertChain({
        first: newJob({ queue, name: "link-1" }),
        next: [{ queue, name: "link-2", payload: "{}", priority: 0, delayMs: 0, retryForMs: null }],
        onFailure: [],
      });
      const [job] = await claim(store, { queues: [queue], limit: 1, token: 1 });
      assert.equal(job?.id, first);
      return (store) => store.settle([complete(first, 1)]);
    },
    visible: "SELECT EXISTS (SELECT 1 FROM jobs WHERE queue = $1 AND name = 'link-2') AS ok",
  },
  {
    what: "a settle that ends a job somebody awaits",
    async prepare(store, queue) {
      const id = await claimed(store, queue, 1);
      assert.equal(await store.markAwaited(id), true);
      return (store) => store.settle([complete(id, 1)]);
    },
    visible: "SELECT NOT EXISTS (SELECT 1 FROM jobs WHERE queue = $1) AS ok",
  },
  {
    what: "a retry of a failed job",
    async prepare(store, queue) {
      const [id] = await failedJobs(store, [T0], { queue });
      return (store) => store.retry([id!], T0);
    },
    visible: EXISTS,
  },
  {
    what: "a resume of a paused queue",
    async prepare(store, queue) {
      await store.pause(queue, T0, null, null);
      return (store) => store.resume(queue, T0);
    },
    visible: "SELECT NOT EXISTS (SELECT 1 FROM queue_pauses WHERE queue = $1) AS ok",
  },
  {
    what: "a schedule's run",
    async prepare(store, queue) {
      await store.syncSchedules([schedule(queue, { queue })], T0);
      return (store) =>
        store.runSchedule(queue, [{ slot: T0, manual: true, row: newJob({ queue }) }], T0);
    },
    visible: EXISTS,
  },
  {
    what: "a signal that makes a parked job due",
    async prepare(store, queue) {
      const id = await claimed(store, queue, 1);
      assert.deepEqual((await store.settle([parkForSignal(id, 1)])).applied, [true]);
      return (store) => store.signal({ jobId: id, name: "approve", payload: "1", now: T0 });
    },
    visible: `SELECT EXISTS (SELECT 1 FROM jobs WHERE queue = $1 AND available_at <= ${T0}) AS ok`,
  },
  {
    what: "a cancel of a running job",
    async prepare(store, queue) {
      const id = await claimed(store, queue, 1);
      return (store) => store.cancel({ id, reason: "stop", now: T0, keepUntil: T0 });
    },
    visible:
      "SELECT EXISTS (SELECT 1 FROM jobs WHERE queue = $1 AND cancel_requested IS NOT NULL) AS ok",
  },
];

Deno.test({
  name:
    "PostgreSQL: every write that makes work for idle workers wakes a listener on another connection after its commit, which then sees the write",
  ignore: url === null,
  async fn(t) {
    const schema = freshSchema();
    const store = await PostgresStore.open(url!, { schema, clock: "caller" });
    const listener = schemaClient(url!, schema);
    try {
      for (const [index, write] of WAKING_WRITES.entries()) {
        await t.step(write.what, async () => {
          const queue = `q${index}`;
          // Prepared through a store of its own, closed once its wake-ups have left: none of
          // them reaches the listener, which listens from after that.
          const preparing = await PostgresStore.open(url!, { schema, clock: "caller" });
          const run = await write.prepare(preparing, queue).finally(() => preparing.close());
          const reads: Promise<boolean>[] = [];
          const listening = await listener.listen(`renox_queue_${schema}`, () => {
            reads.push(listener.unsafe(write.visible, [queue]).then(([row]) => row!.ok === true));
          });
          try {
            await run(store);
            const deadline = Date.now() + 10_000;
            while (reads.length === 0 && Date.now() < deadline) {
              await new Promise((resolve) => setTimeout(resolve, 10));
            }
            assert.notEqual(reads.length, 0, "no wake-up came");
            assert.equal(await reads[0], true, "the wake-up came before the write was visible");
          } finally {
            await listening.unlisten();
          }
        });
      }
    } finally {
      await store.close();
      await listener.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await listener.end();
    }
  },
});

Deno.test({
  name: "PostgreSQL: a settle that only completes plain jobs sends no wake-up",
  ignore: url === null,
  async fn() {
    const schema = freshSchema();
    const channel = `renox_queue_${schema}`;
    const store = await PostgresStore.open(url!, { schema, clock: "caller" });
    const listener = postgres(url!, { max: 2, onnotice: () => {} });
    const payloads: string[] = [];
    try {
      const [a, b] = await store.insertJobs([newJob(), newJob()]);
      await claim(store, { limit: 2, token: 1 });
      const listening = await listener.listen(channel, (payload) => payloads.push(payload));
      assert.deepEqual((await store.settle([complete(a!, 1), complete(b!, 1)])).applied, [
        true,
        true,
      ]);
      await store.close(); // sends the wake-ups on their way first
      await listener.unsafe("SELECT pg_notify($1, 'marker')", [channel]);
      const deadline = Date.now() + 10_000;
      while (!payloads.includes("marker") && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      assert.deepEqual(payloads, ["marker"]);
      await listening.unlisten();
    } finally {
      await store.close();
      await listener.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await listener.end();
    }
  },
});
