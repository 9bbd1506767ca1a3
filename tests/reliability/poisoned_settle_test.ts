/**
 * A poisoned settle: the database refuses to settle one job (a trigger that
 * raises for its id), on both stores. The worker settles the tick's other
 * jobs one by one, fails or puts back the poisoned one with the database's
 * error, and goes on taking jobs.
 *
 * @module
 */
import assert from "node:assert/strict";
import { z } from "zod";
import { defineJob } from "../../mod.ts";
import { type StoreContext, storeTest } from "../_stores.ts";
import { waitUntil } from "../_helpers.ts";

const noop = defineJob({ name: "poison.noop", schema: z.object({ n: z.number() }), handle() {} });

/** A trigger that refuses to delete job `id` from `jobs` (a settle of success or failure). */
function poisonSql(id: number) {
  return {
    sqlite: [
      `CREATE TRIGGER poison BEFORE DELETE ON jobs WHEN OLD.id = ${id}
        BEGIN SELECT RAISE(ABORT, 'poisoned row ${id}'); END`,
    ],
    postgres: [
      `CREATE FUNCTION poison() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION 'poisoned row %', OLD.id; END $$`,
      `CREATE TRIGGER poison BEFORE DELETE ON jobs FOR EACH ROW WHEN (OLD.id = ${id})
        EXECUTE FUNCTION poison()`,
    ],
  };
}

async function jobRow(db: StoreContext, id: number) {
  const [row] = await db.query<{ token: number | null; attempts: number; last_error: string }>(
    "SELECT token, attempts, last_error FROM jobs WHERE id = ?",
    [id],
  );
  return row;
}

storeTest.sql(
  "A settle the database refuses for one job settles the tick's others, puts the poisoned one back with the database's error, and the queue flows on",
  async (db) => {
    const queue = await db.open({ jobs: [noop] });
    const ids = await queue.dispatchMany(noop, Array.from({ length: 10 }, (_, n) => ({ n })));
    const poisoned = ids[3]!;
    for (const statement of db.pick(poisonSql(poisoned))) await db.query(statement);

    const errors: { during: string; message: string }[] = [];
    queue.addEventListener("queue:error", ({ detail }) => {
      errors.push({ during: detail.during, message: detail.error.message });
    });
    const startedAt = performance.now();
    const worker = queue.work({ concurrency: 10, pollMs: 20 });
    try {
      await waitUntil(async () => (await db.count("jobs")) === 1, {
        what: "the other nine settled",
        timeoutMs: 20_000,
      });
      const row = await waitUntil(async () => {
        const row = await jobRow(db, poisoned);
        return row?.token === null ? row : null;
      }, { what: "the poisoned job put back", timeoutMs: 20_000 });
      const settledMs = performance.now() - startedAt;
      assert.match(row.last_error, new RegExp(`Cannot settle job ${poisoned}: .*poisoned row`));
      assert.equal(row.attempts, 1, "the refused attempt counts");
      assert.ok(
        errors.some((error) =>
          error.during === `settle of job ${poisoned}` && /poisoned row/.test(error.message)
        ),
        JSON.stringify(errors),
      );
      assert.equal(await db.count("failed_jobs"), 0);

      // The queue flows on: later jobs settle while the poisoned one is still refused.
      const later = await queue.dispatchMany(noop, Array.from({ length: 5 }, (_, n) => ({ n })));
      await waitUntil(async () => (await db.count("jobs", `id IN (${later.join(", ")})`)) === 0, {
        what: "later jobs settled",
        timeoutMs: 20_000,
      });
      // Without the trigger, the poisoned job settles on its next attempt.
      await db.query("DROP TRIGGER poison" + db.pick({ sqlite: "", postgres: " ON jobs" }));
      await waitUntil(async () => (await db.count("jobs")) === 0, {
        what: "the poisoned job settled",
        timeoutMs: 20_000,
      });
      console.log(
        `poisoned settle (${db.kind}): 9 others settled and the poisoned job put back in ` +
          `${Math.round(settledMs)} ms; ${errors.length} queue:error events; 5 later jobs flowed`,
      );
    } finally {
      await worker.stop();
    }
  },
);
