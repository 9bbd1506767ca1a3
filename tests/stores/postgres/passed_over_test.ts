/**
 * PostgreSQL's claim skips the rows another transaction holds (`SKIP
 * LOCKED`), so an empty claim does not mean empty queues: the store says
 * when it may have passed a due job over (`claimPassedOver`), and a worker
 * that stops once its queues are empty keeps claiming until the job is
 * taken. Runs when `QUEUE_TEST_POSTGRES_URL` is set.
 *
 * @module
 */
import assert from "node:assert/strict";
import postgres from "postgres";
import { z } from "zod";
import { defineJob } from "../../../src/job.ts";
import { Queue } from "../../../src/queue.ts";
import type { Store } from "../../../src/stores/store.ts";
import { claim, newJob, T0 } from "../contract/mod.ts";
import { waitUntil } from "../../_helpers.ts";
import { openTestPostgresStore, postgresTestUrl } from "../../_postgres.ts";

const url = postgresTestUrl();
if (url === null) console.log("PostgreSQL tests skipped: QUEUE_TEST_POSTGRES_URL is not set");

/**
 * Runs `fn` while another connection holds the row of job `id` in `schema`
 * (`SELECT … FOR UPDATE`, as a transaction writing to it would), then
 * ends that transaction: committed, or with the job deleted when `remove`.
 */
async function holdingRow<T>(
  schema: string,
  id: number,
  fn: () => Promise<T>,
  { remove = false } = {},
): Promise<T> {
  const sql = postgres(url!, { max: 1, onnotice: () => {} });
  try {
    return await sql.begin(async (tx): Promise<T> => {
      await tx.unsafe(`SET LOCAL search_path TO "${schema}"`);
      const [held] = await tx.unsafe("SELECT id FROM jobs WHERE id = $1 FOR UPDATE", [id]);
      assert.ok(held !== undefined, `job ${id} is there to hold`);
      const result = await fn();
      if (remove) await tx.unsafe("DELETE FROM jobs WHERE id = $1", [id]);
      return result;
    }) as T;
  } finally {
    await sql.end();
  }
}

Deno.test({
  name:
    "PostgresStore: an empty claim that skipped a due job's held row passed it over; once the job is gone, it passed none",
  ignore: url === null,
  async fn() {
    await using opened = await openTestPostgresStore(url!, { clock: "caller" });
    const { store, schema } = opened;
    const [id] = await store.insertJobs([newJob()]);
    const asked = { queues: ["default"], names: ["contract-job"], now: T0 };
    await holdingRow(schema, id!, async () => {
      assert.deepEqual(await claim(store), [], "the claim skips the held row");
      assert.equal(await store.claimPassedOver(asked), true);
    }, { remove: true });
    assert.deepEqual(await claim(store), []);
    assert.equal(await store.claimPassedOver(asked), false);
  },
});

/**
 * Runs `fn` while another connection's open transaction has bumped the
 * version of group `key` in `schema`, as a dispatch of a job of that group
 * does until it commits (which keeps the group's row locked); then commits.
 */
async function lockingGroup<T>(schema: string, key: string, fn: () => Promise<T>): Promise<T> {
  const sql = postgres(url!, { max: 1, onnotice: () => {} });
  try {
    return await sql.begin(async (tx): Promise<T> => {
      await tx.unsafe(`SET LOCAL search_path TO "${schema}"`);
      const locked = await tx.unsafe(
        "UPDATE job_groups SET version = version + 1 WHERE group_key = $1 RETURNING id",
        [key],
      );
      assert.equal(locked.length, 1, `group ${key} is there to lock`);
      return await fn();
    }) as T;
  } finally {
    await sql.end();
  }
}

Deno.test({
  name:
    "PostgresStore: an empty claim that skipped a group with a due job whose row another transaction locks passed it over; once the row is free, it passed none, nor for a locked group with only a delayed job",
  ignore: url === null,
  async fn() {
    await using opened = await openTestPostgresStore(url!, { clock: "caller" });
    const { store, schema } = opened;
    const group = (key: string) => ({ group: { key, limit: null, ordered: false } });
    await store.insertJobs([
      newJob(group("due")),
      newJob({ ...group("later"), availableAt: T0 + 60_000 }),
    ]);
    const asked = { queues: ["default"], names: ["contract-job"], now: T0 };
    await lockingGroup(schema, "due", async () => {
      assert.deepEqual(await claim(store), [], "the claim skips the locked group");
      assert.equal(await store.claimPassedOver(asked), true);
      assert.equal(await store.claimPassedOver({ ...asked, names: ["other-job"] }), false);
      assert.equal(await store.claimPassedOver({ ...asked, queues: ["other"] }), false);
    });
    await lockingGroup(schema, "later", async () => {
      assert.equal(await store.claimPassedOver(asked), false, "the locked group's job is not due");
    });
    assert.equal(await store.claimPassedOver(asked), false, "no group is locked");
    assert.equal((await claim(store)).length, 1, "the free group's job is claimed");
  },
});

/**
 * Runs a worker with `stopWhenEmpty` on PostgreSQL while `hold` keeps the
 * only due job (of group "g" when `grouped`) from its claims, and checks it
 * does not stop meanwhile: it runs the job once `hold` lets go, then stops.
 */
async function stopsOnceFree(
  grouped: boolean,
  hold: (schema: string, id: number, whileHeld: () => Promise<void>) => Promise<void>,
): Promise<void> {
  await using opened = await openTestPostgresStore(url!);
  const ran: number[] = [];
  const job = defineJob({
    name: "held",
    schema: z.object({ n: z.number() }),
    ...(grouped ? { group: () => "g" } : {}),
    handle({ n }) {
      ran.push(n);
    },
  });
  // The store as the worker sees it, noting each answer it gives about passed-over jobs.
  const answers: boolean[] = [];
  const watched = new Proxy(opened.store, {
    get(target, property) {
      const value = Reflect.get(target, property, target);
      if (property === "claimPassedOver") {
        return async (...args: Parameters<Store["claimPassedOver"]>) => {
          const answer = await target.claimPassedOver(...args);
          answers.push(answer);
          return answer;
        };
      }
      return typeof value === "function" ? value.bind(target) : value;
    },
  }) as Store;
  const queue = await Queue.open({ store: watched, jobs: [job] });
  try {
    const id = await queue.dispatch(job, { n: 1 });
    let worker: ReturnType<typeof queue.work> | undefined;
    await hold(opened.schema, id, async () => {
      worker = queue.work({ executor: "isolate", stopWhenEmpty: true, pollMs: 20 });
      await waitUntil(() => answers.includes(true) || worker!.stopReason !== null, {
        what: "the worker's empty claim to be found passing the held job over",
      });
      assert.equal(worker.stopReason, null, "stopped with the job still due");
    });
    await worker!.done;
    assert.deepEqual(ran, [1]);
    assert.equal(worker!.stats.completed, 1);
    assert.equal(worker!.stopReason, "empty");
    const left = Object.values(await queue.counts())
      .reduce((sum, counts) => sum + counts.pending + counts.delayed + counts.reserved, 0);
    assert.equal(left, 0, "no job left in the queue");
  } finally {
    await queue.close();
  }
}

Deno.test({
  name:
    "Queue.work({ stopWhenEmpty }) on PostgreSQL does not stop while the only due job's row is held by another transaction: it runs the job once the row is free, then stops",
  ignore: url === null,
  fn: () => stopsOnceFree(false, (schema, id, whileHeld) => holdingRow(schema, id, whileHeld)),
});

Deno.test({
  name:
    "Queue.work({ stopWhenEmpty }) on PostgreSQL does not stop while the row of the only due job's group is locked by a dispatch's open transaction: it runs the job once the group is free, then stops",
  ignore: url === null,
  fn: () => stopsOnceFree(true, (schema, _id, whileHeld) => lockingGroup(schema, "g", whileHeld)),
});
