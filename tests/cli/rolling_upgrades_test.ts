/**
 * The CLI in a rolling upgrade: `migrate --plan` shows each missing step's
 * kind and the live workers of older code that block a contract step,
 * changing nothing; `migrate` refuses such a step naming them, and applies
 * it with `--force`; a `work` process whose code is older than a contract
 * step applied under it claims nothing more, finishes its running job and
 * exits 75, and a worker of that code started afterwards exits 75 at once.
 *
 * @module
 */
import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { join } from "node:path";
import type { Migration } from "../../migrations/migration.ts";
import { migrations } from "../../migrations/sqlite/mod.ts";
import { Queue } from "../../mod.ts";
import { SqliteStore } from "../../src/stores/sqlite/mod.ts";
import { tempDir, waitUntil } from "../_helpers.ts";
import { runCli, startCli } from "../fixtures/cli/cli_process.ts";
import { held, rollingTick } from "../fixtures/rolling_upgrade/jobs.ts";

const JOBS = new URL("../fixtures/rolling_upgrade/jobs.ts", import.meta.url).href;
const NEWEST = migrations.at(-1)!.version;

/** The newest step recorded in the SQLite file `path`. */
function newestStep(path: string): number {
  const db = new DatabaseSync(path);
  try {
    return Number(db.prepare("SELECT MAX(version) AS v FROM queue_migrations").get()!.v);
  } finally {
    db.close();
  }
}

Deno.test("migrate --plan on a SQLite file that does not exist yet plans every step from step 0 and creates nothing, as on an empty schema or prefix", async () => {
  await using tmp = await tempDir();
  const missing = join(tmp.dir, "new", "queue.db");
  const plan = await runCli(["migrate", "--plan", "--db", missing]);
  assert.equal(plan.code, 0, plan.stderr);
  assert.deepEqual(plan.stdout.trim().split("\n"), [
    `${missing} is at schema step 0; this code knows ${NEWEST}`,
    ...migrations.map((step) => `Would apply schema step ${step.version} (${step.kind})`),
  ]);
  assert.deepEqual([...Deno.readDirSync(tmp.dir)], [], "no folder, no database");
});

Deno.test("migrate --plan lists the missing steps with their kinds and the live worker of older code that blocks a contract step, changing nothing; migrate refuses naming it; --force applies it", async () => {
  await using tmp = await tempDir();
  // A database at step 11, as code of that step left it, with one of its workers live.
  const before12 = migrations.filter((step) => step.version <= 11);
  await (await SqliteStore.openWithSteps(tmp.dbPath, {}, before12)).close();
  const db = new DatabaseSync(tmp.dbPath);
  const now = Date.now();
  db.prepare(
    `INSERT INTO workers (id, host, pid, queues, concurrency, started_at, last_seen_at, running, names)
    VALUES ('old', 'old-box', 4242, '["default"]', 1, ?, ?, 0, '[]')`,
  ).run(now, now);
  db.close();

  const plan = await runCli(["migrate", "--plan", "--db", tmp.dbPath]);
  assert.equal(plan.code, 0, plan.stderr);
  const later = migrations.filter((step) => step.version > 11);
  assert.deepEqual(plan.stdout.trim().split("\n"), [
    `${tmp.dbPath} is at schema step 11; this code knows ${NEWEST}`,
    ...later.map((step) =>
      `Would apply schema step ${step.version} (${step.kind}${
        step.kind === "contract"
          ? ", blocked by 1 live worker of older code: old-box pid 4242, code before step 18"
          : ""
      })`
    ),
  ]);
  assert.equal(later.find((step) => step.version === 12)?.kind, "contract");
  assert.equal(newestStep(tmp.dbPath), 11, "--plan changed nothing");

  const refused = await runCli(["migrate", "--db", tmp.dbPath]);
  assert.equal(refused.code, 1, refused.stdout);
  assert.match(
    refused.stderr,
    /^queue migrate: Cannot apply schema step 12, a contract step: .*old-box pid 4242, code before step 18.*--force.*, but for code before step 18, which never learns of it: stop that yourself\n$/,
  );
  assert.equal(newestStep(tmp.dbPath), 11, "the refusal changed nothing");

  const forced = await runCli(["migrate", "--force", "--db", tmp.dbPath]);
  assert.equal(forced.code, 0, forced.stderr);
  assert.deepEqual(forced.stdout.trim().split("\n"), [
    ...later.map((step) =>
      `Applied schema step ${step.version} (${step.kind}${
        step.kind === "contract"
          ? ", blocked by 1 live worker of older code: old-box pid 4242, code before step 18"
          : ""
      })`
    ),
    `${tmp.dbPath} is at schema version ${NEWEST}`,
  ]);
  assert.equal(newestStep(tmp.dbPath), NEWEST);
});

/** A contract step no release ships, applied by the test as a newer release would. */
const TEST_CONTRACT: Migration = {
  version: 9001,
  kind: "contract",
  sql: "CREATE TABLE test_contract_step (id INTEGER)",
};

Deno.test("work: past a contract step applied under it, a worker of older code claims nothing more, finishes its running job and exits 75; started again, it exits 75 at once", async () => {
  await using tmp = await tempDir();
  const ledger = join(tmp.dir, "ledger.txt");
  const release = join(tmp.dir, "release");
  await Deno.writeTextFile(ledger, "");
  {
    await using queue = await Queue.open({ path: tmp.dbPath, jobs: [held, rollingTick] });
    await queue.dispatch(held, { release, ledger });
    await queue.dispatchMany(rollingTick, [1, 2, 3].map((n) => ({ n, ledger })));
  }
  const args = ["work", "--db", tmp.dbPath, "--jobs", JOBS, "--concurrency", "1"];
  await using worker = startCli([...args, "--no-supervise", "--lease-ms", "600"]);
  await waitUntil(async () => (await Deno.readTextFile(ledger)).startsWith("started"), {
    what: "the held job to start",
  });

  // A newer release applies a contract step while the worker runs (forced: it is live).
  await (await SqliteStore.openWithSteps(tmp.dbPath, { migrate: { force: true } }, [
    ...migrations,
    TEST_CONTRACT,
  ])).close();
  await worker.waitForRecord(
    (record) =>
      record.event === "queue:error" && String(record.error).includes("contract schema step 9001"),
    30_000,
  );
  await Deno.writeTextFile(release, "");

  const status = await worker.child.status;
  const stderr = await worker.stderr;
  assert.equal(status.code, 75, stderr);
  assert.match(stderr, /contract schema step 9001 .*restart this process on the new version/);
  const lines = (await Deno.readTextFile(ledger)).trim().split("\n").map((line) =>
    line.split(" ")[0]
  );
  assert.deepEqual(lines, ["started", "held"], "it finished the held job and started no other");
  const stop = worker.records().find((record) => record.event === "worker:stop");
  assert.equal(stop?.reason, "outdated");

  await using queue = await Queue.open({
    store: await SqliteStore.openWithSteps(tmp.dbPath, {}, [...migrations, TEST_CONTRACT]),
    jobs: [held, rollingTick],
  });
  const counts = (await queue.counts()).default;
  assert.deepEqual([counts?.pending, counts?.reserved, counts?.failed], [3, 0, 0]);

  const again = await runCli(args);
  assert.equal(again.code, 75, again.stdout);
  assert.match(
    again.stderr,
    /^queue work: Cannot open the queue database: .*contract schema step 9001/,
  );
});
