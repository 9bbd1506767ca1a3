/**
 * Rolling upgrades on SQLite and PostgreSQL, with this code's real steps
 * plus one test-only step no release ships (through the stores'
 * `openWithSteps` seam): a contract step is refused while a worker of older
 * code is live, listed with its host, pid and step; `force` applies it;
 * `migrationPlan()` changes nothing; an expand step newer than the code
 * lets it open and work; a contract one makes it refuse and tells its
 * heartbeat.
 *
 * @module
 */
import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import type { Migration } from "../../migrations/migration.ts";
import { migrations as sqliteSteps } from "../../migrations/sqlite/mod.ts";
import { migrations as postgresSteps } from "../../migrations/postgres/mod.ts";
import { Queue } from "../../mod.ts";
import { OutdatedCodeError, QueueMovedError } from "../../src/errors.ts";
import { SqliteStore } from "../../src/stores/sqlite/mod.ts";
import { PostgresStore } from "../../src/stores/postgres/mod.ts";
import type { MigrateOptions, Store, WorkerHeartbeat } from "../../src/stores/store.ts";
import { LIVE_WORKER_WINDOW_MS } from "../../src/stores/schema_steps.ts";
import { tempDir } from "../_helpers.ts";
import { newJob } from "./contract/fixtures.ts";
import { freshSchema, postgresTestUrl } from "../_postgres.ts";

/** A contract step no release ships: a table of its own, so that applying it shows. */
const TEST_CONTRACT: Migration = {
  version: 9001,
  kind: "contract",
  sql: "CREATE TABLE test_contract_step (id INTEGER)",
};
/** An expand step no release ships. */
const TEST_EXPAND: Migration = {
  version: 9002,
  kind: "expand",
  sql: "CREATE TABLE test_expand_step (id INTEGER)",
};

/** How a test opens the database: applying with these options, or (`"plan"`) applying nothing. */
type Opening = MigrateOptions | "plan";

/** Opens one database with this code's steps, or with more, as a newer release would. */
interface Engine {
  readonly name: string;
  readonly ignore: boolean;
  /** The newest step this code ships for the engine (SQLite has step 24, PostgreSQL none). */
  readonly codeStep: number;
  /** Runs `fn` with an opener for one fresh database, removed afterwards. */
  readonly fresh: (
    fn: (open: (extra: readonly Migration[], opening?: Opening) => Promise<Store>) => Promise<void>,
  ) => Promise<void>;
}

const url = postgresTestUrl();

const ENGINES: readonly Engine[] = [
  {
    name: "SQLite",
    ignore: false,
    codeStep: sqliteSteps.at(-1)!.version,
    async fresh(fn) {
      await using tmp = await tempDir();
      await fn((extra, opening = {}) =>
        SqliteStore.openWithSteps(tmp.dbPath, {
          migrate: opening === "plan" ? false : opening,
        }, [...sqliteSteps, ...extra])
      );
    },
  },
  {
    name: "PostgreSQL",
    ignore: url === null,
    codeStep: postgresSteps.at(-1)!.version,
    async fresh(fn) {
      const schema = freshSchema();
      try {
        await fn((extra, opening = {}) =>
          PostgresStore.openWithSteps(url!, {
            schema,
            migrate: opening === "plan" ? false : opening,
          }, [...postgresSteps, ...extra])
        );
      } finally {
        await using dropper = await PostgresStore.open(url!, { schema, migrate: false });
        await dropper.transaction((tx) => tx.query(`DROP SCHEMA "${schema}" CASCADE`));
      }
    },
  },
];

/** A worker's heartbeat, as a live worker of this process writes it now. */
function worker(id: string): WorkerHeartbeat {
  const now = Date.now();
  return {
    id,
    host: "old-box",
    pid: 4242,
    queues: ["default"],
    concurrency: 1,
    startedAt: now,
    lastSeenAt: now,
    running: 0,
    names: [],
  };
}

/** The steps recorded in the database, with their kinds. */
async function recorded(store: Store): Promise<{ version: number; kind: string | null }[]> {
  const rows = await store.transaction((tx) =>
    tx.query<{ version: unknown; kind: string | null }>(
      "SELECT version, kind FROM queue_migrations ORDER BY version",
      [],
    )
  );
  return rows.map((row) => ({ version: Number(row.version), kind: row.kind }));
}

for (const engine of ENGINES) {
  Deno.test({
    name:
      `${engine.name}: every step applied is recorded with its kind, the steps before step 18 included`,
    ignore: engine.ignore,
    fn: () =>
      engine.fresh(async (open) => {
        await using store = await open([]);
        const steps = engine.name === "SQLite" ? sqliteSteps : postgresSteps;
        assert.deepEqual(
          await recorded(store),
          steps.map((step) => ({ version: step.version, kind: step.kind })),
        );
      }),
  });

  Deno.test({
    name:
      `${engine.name}: a store fenced by a move takes a step that writes the rows of a fenced table, in the transaction that lifts the fence and sets it again: it opens, reads, still refuses writes, and move --abort lifts the fence`,
    ignore: engine.ignore,
    fn: () =>
      engine.fresh(async (open) => {
        {
          await using old = await open([]);
          await old.insertJobs([newJob()]);
          await old.fenceForMove("postgres://elsewhere/app", Date.now());
        }
        // A later release's step that rewrites rows, as step 25 rewrote job_groups and jobs.
        const rewrite: Migration = {
          version: 9005,
          kind: "expand",
          sql: "UPDATE jobs SET priority = priority",
        };
        await using store = await open([rewrite]);
        assert.equal((await recorded(store)).at(-1)?.version, 9005);
        const [counted] = await store.counts(Date.now());
        assert.equal(counted?.pending, 1, "reads go on");
        await assert.rejects(store.insertJobs([newJob()]), QueueMovedError);
        assert.equal(await store.liftMoveFence(), true);
        await store.insertJobs([newJob()]);
      }),
  });

  Deno.test({
    name:
      `${engine.name}: a contract step is refused while a worker of older code is live, naming its host, pid and step; the plan lists it and changes nothing; force applies it`,
    ignore: engine.ignore,
    fn: () =>
      engine.fresh(async (open) => {
        await using old = await open([]);
        assert.deepEqual(await old.heartbeat(worker("old"), 0), {
          codeStep: engine.codeStep,
          databaseStep: engine.codeStep,
          contractStep: null,
        });

        await using planner = await open([TEST_EXPAND, TEST_CONTRACT].sort(byVersion), "plan");
        const plan = await planner.migrationPlan();
        assert.equal(plan.databaseStep, engine.codeStep);
        assert.equal(plan.codeStep, TEST_EXPAND.version);
        assert.deepEqual(
          plan.steps.map(({ version, kind, blockedBy }) => ({
            version,
            kind,
            blockedBy: blockedBy.map(({ host, pid, schemaStep }) => ({ host, pid, schemaStep })),
          })),
          [
            {
              version: TEST_CONTRACT.version,
              kind: "contract",
              blockedBy: [{ host: "old-box", pid: 4242, schemaStep: engine.codeStep }],
            },
            { version: TEST_EXPAND.version, kind: "expand", blockedBy: [] },
          ],
        );
        assert.equal(
          (await recorded(old)).at(-1)?.version,
          engine.codeStep,
          "the plan applied nothing",
        );

        await assert.rejects(
          open([TEST_CONTRACT]),
          new RegExp(
            `Cannot apply schema step 9001, a contract step: .*old-box pid 4242, schema step ${engine.codeStep}`,
          ),
        );
        assert.equal(
          (await recorded(old)).at(-1)?.version,
          engine.codeStep,
          "the refusal applied nothing",
        );

        await using forced = await open([TEST_CONTRACT], { force: true });
        assert.deepEqual((await recorded(forced)).at(-1), { version: 9001, kind: "contract" });
        assert.deepEqual(await old.heartbeat(worker("old"), 0), {
          codeStep: engine.codeStep,
          databaseStep: 9001,
          contractStep: 9001,
        }, "the older worker's heartbeat learns of the contract step");
        await assert.rejects(open([]), OutdatedCodeError, "older code no longer opens it");
      }),
  });

  Deno.test({
    name:
      `${engine.name}: code older than the database opens it and works while every newer step is an expand step; a worker gone from the window blocks nothing`,
    ignore: engine.ignore,
    fn: () =>
      engine.fresh(async (open) => {
        await (await open([TEST_EXPAND])).close();
        await using old = await open([]);
        assert.deepEqual(await old.heartbeat(worker("old"), 0), {
          codeStep: engine.codeStep,
          databaseStep: TEST_EXPAND.version,
          contractStep: null,
        });
        assert.equal(await old.removeWorker("old"), true);
        // A stopped worker removed its row: nothing blocks the contract step.
        await using newest = await open([TEST_EXPAND, TEST_CONTRACT].sort(byVersion));
        assert.equal((await recorded(newest)).at(-1)?.version, TEST_EXPAND.version);
        assert.deepEqual(
          (await recorded(newest)).filter((step) => step.version > engine.codeStep),
          [{ version: 9001, kind: "contract" }, { version: 9002, kind: "expand" }],
        );
      }),
  });
}

for (const engine of ENGINES) {
  Deno.test({
    name:
      `${engine.name}: a contract step given waitMs waits for the older worker to go, then applies`,
    ignore: engine.ignore,
    fn: () =>
      engine.fresh(async (open) => {
        await using old = await open([]);
        await old.heartbeat(worker("old"), 0);
        const opening = open([TEST_CONTRACT], { waitMs: 60_000 });
        let opened = false;
        void opening.then(() => opened = true, () => {});
        assert.deepEqual(
          (await old.migrationPlan()).steps,
          [],
          "nothing applied while the worker is live",
        );
        assert.equal(opened, false);
        assert.equal(await old.removeWorker("old"), true, "the older worker stops");
        await using newer = await opening;
        assert.deepEqual((await recorded(newer)).at(-1), { version: 9001, kind: "contract" });
      }),
  });
}

function byVersion(a: Migration, b: Migration): number {
  return a.version - b.version;
}

Deno.test("SQLite: a contract step given waitMs waits until a dead worker's row ages out of the heartbeat window, never applying before", async () => {
  await using tmp = await tempDir();
  await using old = await SqliteStore.open(tmp.dbPath);
  // A worker that died 27 s ago: its row is live for 3 s more.
  const lastSeenAt = Date.now() - 27_000;
  await old.heartbeat({ ...worker("dead"), startedAt: lastSeenAt, lastSeenAt }, 0);
  await using newer = await SqliteStore.openWithSteps(tmp.dbPath, {
    migrate: { waitMs: 60_000 },
  }, [...sqliteSteps, TEST_CONTRACT]);
  const [row] = await newer.transaction((tx) =>
    tx.query<{ applied_at: number }>(
      "SELECT applied_at FROM queue_migrations WHERE version = 9001",
      [],
    )
  );
  assert.ok(
    Number(row?.applied_at) >= lastSeenAt + LIVE_WORKER_WINDOW_MS,
    "applied only once the row was out of the window",
  );
});

Deno.test("Queue.open() applies a contract step under a live worker of older code only with migrate: { force: true }", async () => {
  await using tmp = await tempDir();
  // A database at step 11 with one of that code's workers live: step 12 is a real contract step.
  await (await SqliteStore.openWithSteps(
    tmp.dbPath,
    {},
    sqliteSteps.filter((s) => s.version <= 11),
  ))
    .close();
  const db = new DatabaseSync(tmp.dbPath);
  const now = Date.now();
  db.prepare(
    `INSERT INTO workers (id, host, pid, queues, concurrency, started_at, last_seen_at, running, names)
    VALUES ('old', 'old-box', 4242, '["default"]', 1, ?, ?, 0, '[]')`,
  ).run(now, now);
  db.close();
  await assert.rejects(
    Queue.open({ path: tmp.dbPath, jobs: [] }),
    /Cannot apply schema step 12, a contract step: .*old-box pid 4242/,
  );
  await using queue = await Queue.open({ path: tmp.dbPath, jobs: [], migrate: { force: true } });
  const rows = await queue.transaction((tx) =>
    tx.query<{ version: number; kind: string | null }>(
      "SELECT version, kind FROM queue_migrations ORDER BY version",
    )
  );
  assert.deepEqual(
    rows.map((row) => ({ version: Number(row.version), kind: row.kind })),
    sqliteSteps.map((step) => ({ version: step.version, kind: step.kind })),
    "every step applied, with its kind, those applied before kinds were recorded filled in",
  );
});
