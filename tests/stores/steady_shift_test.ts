/**
 * The clock shift a dispatch's times move by onto the store's clock
 * (PostgreSQL and Redis go by the server's), kept steady from one dispatch
 * to the next (src/stores/steady_shift.ts): jobs for the same time keep
 * their dispatch order (tests/queue_test.ts), yet a dispatcher whose clock
 * steps, or whose first call was held up, is followed at once. Runs where `QUEUE_TEST_POSTGRES_URL` or
 * `QUEUE_TEST_REDIS_URL` is set.
 *
 * @module
 */
import assert from "node:assert/strict";
import { z } from "zod";
import { defineJob, Queue } from "../../mod.ts";
import type { Store } from "../../src/stores/store.ts";
import { openTestPostgresStore, postgresTestUrl } from "../_postgres.ts";
import { openTestRedisStore, redisTestUrl } from "../_redis.ts";

const postgresUrl = postgresTestUrl();
const redisUrl = redisTestUrl();
if (postgresUrl === null) {
  console.log("steady shift tests on PostgreSQL skipped: QUEUE_TEST_POSTGRES_URL is not set");
}
if (redisUrl === null) {
  console.log("steady shift tests on Redis skipped: QUEUE_TEST_REDIS_URL is not set");
}

const STEP_MS = 30_000;
const DELAY_MS = 2_000;
/** The most a delay is made late by a first call held up (docs/stores.md, "Clocks"). */
const MOST_LATE_MS = 50;

const job = defineJob({ name: "steady.delayed", schema: z.number(), handle() {} });

const servers: {
  readonly name: string;
  readonly url: string | null;
  readonly open: (url: string) => Promise<{ store: Store } & AsyncDisposable>;
}[] = [
  { name: "PostgreSQL", url: postgresUrl, open: (url) => openTestPostgresStore(url) },
  { name: "Redis", url: redisUrl, open: (url) => openTestRedisStore(url) },
];

for (const server of servers) {
  Deno.test({
    name:
      `${server.name}: a dispatcher whose clock steps 30 s ahead between two dispatches delays the second by the server's clock all the same`,
    ignore: server.url === null,
    async fn() {
      await using test = await server.open(server.url!);
      let offsetMs = 0;
      await using queue = await Queue.open({
        store: test.store,
        jobs: [job],
        clock: { now: () => Date.now() + offsetMs },
      });
      const sentAt = Date.now();
      const first = await queue.dispatch(job, 1, { delayMs: DELAY_MS });
      offsetMs = STEP_MS;
      const second = await queue.dispatch(job, 2, { delayMs: DELAY_MS });
      const receivedAt = Date.now();
      const { jobs } = await queue.jobs();
      const dueAt = new Map(jobs.map((listed) => [listed.id, listed.availableAt.getTime()]));
      // The server runs on this machine's clock: each job due 2 s after its dispatch on it.
      for (const id of [first, second]) {
        const due = dueAt.get(id)!;
        assert.ok(
          due >= sentAt + DELAY_MS - 5 && due <= receivedAt + DELAY_MS + 5,
          `job ${id} is due ${due - sentAt - DELAY_MS} ms after 2 s from the first dispatch ` +
            `(the dispatches took ${receivedAt - sentAt} ms)`,
        );
      }
    },
  });
}

for (const server of servers) {
  for (const lagMs of [40, 300]) {
    Deno.test({
      name:
        `${server.name}: after a first dispatch held up ${lagMs} ms on its way, a job dispatched due is due when stored, and a delayed one is not delayed by as much more`,
      ignore: server.url === null,
      async fn() {
        await using test = await server.open(server.url!);
        // A clock behind for the first dispatch: its call reads as if held up that long. 40 ms
        // is kept as the next dispatch's shift (within the band), 300 ms is not.
        let lag = lagMs;
        await using queue = await Queue.open({
          store: test.store,
          jobs: [job],
          clock: { now: () => Date.now() - lag },
        });
        await queue.dispatch(job, 1);
        lag = 0;
        const sentAt = Date.now();
        const due = await queue.dispatch(job, 2);
        const delayed = await queue.dispatch(job, 3, { delayMs: DELAY_MS });
        const receivedAt = Date.now();
        const { jobs } = await queue.jobs();
        const listed = (id: number) => jobs.find((row) => row.id === id)!;
        assert.ok(
          listed(due).availableAt.getTime() <= receivedAt,
          `job ${due}, dispatched due, is due ${
            listed(due).availableAt.getTime() - receivedAt
          } ms after its dispatch returned`,
        );
        assert.ok(listed(due).createdAt.getTime() <= receivedAt, "created in the future");
        const dueAt = listed(delayed).availableAt.getTime();
        assert.ok(
          dueAt >= sentAt + DELAY_MS - 5 && dueAt <= receivedAt + DELAY_MS + MOST_LATE_MS,
          `the delayed job is due ${dueAt - sentAt - DELAY_MS} ms after 2 s from its dispatch`,
        );
      },
    });
  }
}
