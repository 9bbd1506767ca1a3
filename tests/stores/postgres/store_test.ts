/**
 * The store contracts against PostgreSQL, each case in a schema of its own
 * that it drops afterwards: the first part of the contract here, the others
 * in store_part2_test.ts and store_part3_test.ts (one file per part, so that
 * `deno test --parallel` runs them side by side). Runs when
 * `QUEUE_TEST_POSTGRES_URL` is set (`.ci/run` sets it); otherwise says why it
 * skips.
 *
 * @module
 */
import assert from "node:assert/strict";
import postgres from "postgres";
import { postgresDialect } from "../../../src/stores/postgres/dialect.ts";
import { WAKE_UP } from "../../../src/stores/sql/script.ts";
import { PostgresStore } from "../../../src/stores/postgres/mod.ts";
import { claim, newJob, T0 } from "../contract/mod.ts";
import { openTestPostgresStore, planNodes, postgresTestUrl } from "../../_postgres.ts";
import { postgresContract } from "./_contract.ts";

const url = postgresTestUrl();
postgresContract(0);

Deno.test("PostgresStore.open() refuses a bad schema name, clock or URL before connecting", async () => {
  const { rejects } = await import("node:assert/strict");
  await rejects(
    PostgresStore.open("postgres://x@127.0.0.1:1/db", { schema: "a-b" }),
    /schema must be/,
  );
  // Lower case only (search_path folds it), and short enough for its NOTIFY channel.
  for (const schema of ["Upper", "a".repeat(52)]) {
    await rejects(
      PostgresStore.open("postgres://x@127.0.0.1:1/db", { schema }),
      (error: Error) =>
        error instanceof TypeError &&
        /schema must be 1 to 51 lower-case letters, digits and underscores/.test(error.message),
      schema,
    );
  }
  await rejects(
    PostgresStore.open("postgres://x@127.0.0.1:1/db", { clock: "wall" as never }),
    /clock must be "database" or "caller"/,
  );
  await rejects(
    PostgresStore.open("mysql://u:secret@h/db"),
    (error: Error) =>
      /url must start with postgres:\/\//.test(error.message) && !error.message.includes("secret"),
  );
});

Deno.test({
  name: "PostgresStore: a claim reads only the due jobs it takes, not every due job of the level",
  ignore: url === null,
  async fn() {
    await using opened = await openTestPostgresStore(url!, { clock: "caller" });
    // 2,000 jobs due at one time and priority: before the claim index ended with the id, the
    // claim read and sorted all of them to take the first 10 by (due time, id).
    await opened.store.insertJobs(Array.from({ length: 2_000 }, () => newJob({ availableAt: T0 })));
    const request = {
      queues: ["default"],
      limit: 10,
      now: T0 + 1_000,
      leaseMs: 30_000,
      token: 7,
      names: ["contract-job"],
    };
    const step = postgresDialect({ dbClock: false }).claim(request, false)
      .next();
    if (step.done || step.value === WAKE_UP || !("params" in step.value)) {
      throw new Error("the claim runs one statement");
    }
    const { statement, params } = step.value;
    const sql = postgres(url!, { max: 1, onnotice: () => {} });
    try {
      const [row] = await sql.begin(async (tx) => {
        await tx.unsafe(`SET LOCAL search_path TO "${opened.schema}"`);
        await tx.unsafe("ANALYZE jobs"); // as autovacuum would have by then
        // The plan a prepared claim gets once the server stops planning it for its parameters.
        await tx.unsafe("SET LOCAL plan_cache_mode = force_generic_plan");
        return await tx.unsafe(
          `EXPLAIN (ANALYZE, FORMAT JSON) ${statement.postgres}`,
          params as never[],
        );
      });
      const nodes = planNodes(row!);
      // Every read of the jobs table (the levels' seeks, the due jobs' scan, the update's lookups).
      const scans = nodes.filter((node) =>
        node["Relation Name"] === "jobs" && String(node["Node Type"]).endsWith("Scan")
      );
      const read = scans.map((node) =>
        `${node["Node Type"]} ${node["Index Name"]}: ${node["Actual Rows"]}`
      );
      assert.ok(
        scans.some((node) =>
          node["Index Name"] === "jobs_claim_order" && node["Actual Rows"] === 10
        ),
        read.join(", "),
      );
      assert.ok(scans.every((node) => Number(node["Actual Rows"]) <= 10), read.join(", "));
    } finally {
      await sql.end();
    }
  },
});

Deno.test({
  name:
    "PostgresStore: a settle's prune of passed group holds skips a hold another transaction holds, without waiting for it",
  ignore: url === null,
  async fn() {
    await using opened = await openTestPostgresStore(url!, { clock: "caller" });
    const { store } = opened;
    await store.pauseGroup("contract-job", "a", T0, T0 + 1_000);
    await store.pauseGroup("contract-job", "b", T0, T0 + 1_000);
    const settleAt = (now: number) =>
      store.settle([], { queues: ["default"], limit: 1, now, leaseMs: 30_000, token: 1 });
    const keys = async () =>
      (await store.pausedGroups(T0, { limit: 10, offset: 0 })).map((group) => group.key);
    const sql = postgres(url!, { max: 1, onnotice: () => {} });
    try {
      await sql.begin(async (tx) => {
        await tx.unsafe(`SET LOCAL search_path TO "${opened.schema}"`);
        // As a pause of group a being written: its row is locked until this transaction ends.
        await tx.unsafe("SELECT 1 FROM group_pauses WHERE group_key = 'a' FOR UPDATE");
        let timer: ReturnType<typeof setTimeout> | undefined;
        const deadline = new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error("the settle waited for the lock")), 10_000);
        });
        const settled = settleAt(T0 + 120_000);
        try {
          await Promise.race([settled, deadline]);
        } finally {
          clearTimeout(timer);
        }
        assert.deepEqual(await keys(), ["a"], "b is deleted, a skipped");
      });
    } finally {
      await sql.end();
    }
    await settleAt(T0 + 180_000);
    assert.deepEqual(await keys(), [], "the next walk deletes a");
  },
});

Deno.test({
  name:
    "PostgresStore: a grouped job inserted as code of step 24 does (no group id, its group listed after it) lists its group and takes its id; the claim takes it in its turn",
  ignore: url === null,
  async fn() {
    await using opened = await openTestPostgresStore(url!, { clock: "caller" });
    const [listed] = await opened.store.insertJobs([
      newJob({ group: { key: "a", limit: null, ordered: false } }),
    ]);
    // What code of step 24 writes for a grouped job: the job, then its group's listing.
    const insertAsStep24 = (key: string, n: number) =>
      opened.store.transaction(async (tx) => {
        await tx.query(
          `INSERT INTO jobs (queue, name, payload, available_at, created_at, group_key)
          VALUES ('default', 'contract-job', $1, $2, $2, $3)`,
          [`{"n":${n}}`, T0, key],
        );
        await tx.query(
          `INSERT INTO job_groups (queue, name, group_key, group_limit, group_ordered, version)
          VALUES ('default', 'contract-job', $1, NULL, 0, 0)
          ON CONFLICT (queue, name, group_key) DO UPDATE SET version = job_groups.version + 1`,
          [key],
        );
      });
    await insertAsStep24("b", 1);
    await insertAsStep24("a", 2);
    const groups = await opened.store.transaction((tx) =>
      tx.query<{ group_key: string; id: string }>(
        "SELECT group_key, id::text FROM job_groups ORDER BY id",
      )
    );
    assert.deepEqual(groups.map((group) => group.group_key), ["a", "b"]);
    const jobs = await opened.store.transaction((tx) =>
      tx.query<{ id: string; group_id: string }>(
        "SELECT id::text, group_id::text FROM jobs ORDER BY id",
      )
    );
    assert.deepEqual(
      jobs.map((job) => job.group_id),
      [groups[0]!.id, groups[1]!.id, groups[0]!.id],
    );
    const taken = await claim(opened.store, { limit: 2 });
    assert.deepEqual(taken.map((job) => job.id).sort((a, b) => a - b), [
      listed!,
      Number(jobs[1]!.id),
    ]);
    const rest = await claim(opened.store, { limit: 2, token: 2 });
    assert.deepEqual(rest.map((job) => job.id), [Number(jobs[2]!.id)]);
  },
});
