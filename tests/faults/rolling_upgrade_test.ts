/**
 * R21 (RELIABILITY.md): a worker process running the code of an earlier
 * commit (checked out from git into a temp folder) drains jobs while this
 * code opens the same database, applying its newer steps (expand steps
 * only) under it, dispatches, and works beside it. Both run jobs; none is
 * lost or run twice; the old worker is still working at the end and stops
 * cleanly. Both codes also dispatch grouped jobs (at most 2 of a group at
 * once) once this code's steps are in: none lost or run twice, and no group
 * ever ran more than 2 at once across the two codes. On
 * SQLite, PostgreSQL and Redis (where the key layout has no new step).
 *
 * The earlier commit is the oldest this code can roll over: the commit on
 * main's first-parent line that added the store's newest contract step (or
 * Redis layout), each engine its own (older code than that must stop first, which `schema_steps_test.ts`
 * covers). Skipped, saying why, where that commit is not in the clone (a
 * shallow one) or the step's file is not committed yet.
 *
 * @module
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Queue, type QueueOptions } from "../../mod.ts";
import { PostgresStore } from "../../src/stores/postgres/mod.ts";
import { RedisStore } from "../../src/stores/redis/mod.ts";
import { SqliteStore } from "../../src/stores/sqlite/mod.ts";
import type { MigrationPlan } from "../../src/stores/store.ts";
import { tempDir, waitUntil } from "../_helpers.ts";
import { freshSchema, postgresTestUrl } from "../_postgres.ts";
import { deletePrefix, freshPrefix, redisTestUrl } from "../_redis.ts";
import { rollingGrouped, rollingTick } from "../fixtures/rolling_upgrade/jobs.ts";
import { LAYOUT_VERSION } from "../../src/stores/redis/migrate.ts";
import { migrations as sqliteSteps } from "../../migrations/sqlite/mod.ts";
import { migrations as postgresSteps } from "../../migrations/postgres/mod.ts";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const FIXTURES = [
  "tests/fixtures/rolling_upgrade/jobs.ts",
  "tests/fixtures/rolling_upgrade/worker.ts",
];
const JOBS = new URL("../fixtures/rolling_upgrade/jobs.ts", import.meta.url).href;
const TOTAL = 400;
/** Grouped jobs each code dispatches; the old code's numbered from 100,000, this code's from 200,000. */
const GROUPED = 100;
const OLD_GROUPED_FROM = 100_000;
const NEW_GROUPED_FROM = 200_000;

/** What `git args` prints in this checkout, trimmed; null when it fails. */
function git(...args: string[]): string | null {
  const run = new Deno.Command("git", { args, cwd: ROOT, stdout: "piped", stderr: "null" })
    .outputSync();
  return run.success ? new TextDecoder().decode(run.stdout).trim() : null;
}

/** The commit an old worker runs, and the newest schema step (or Redis layout) it knows. */
interface OldCode {
  readonly commit: string;
  readonly step: number;
  /** The SQL steps the old code knows (none listed on Redis). */
  readonly known: readonly number[];
}

/**
 * The oldest commit this code can roll over on a SQL engine: the commit on
 * main's first-parent line that added the engine's newest contract step
 * (SQLite's and PostgreSQL's differ: step 24 is SQLite's alone); or why
 * there is none.
 */
function oldSqlCode(engine: "sqlite" | "postgres"): OldCode | string {
  const steps = engine === "sqlite" ? sqliteSteps : postgresSteps;
  const newestContract = steps.findLast((step) => step.kind === "contract")!;
  const contractFile = `migrations/${engine}/${String(newestContract.version).padStart(4, "0")}_`;
  const file = git("ls-files", "--", `migrations/${engine}/`)?.split("\n").find((path) =>
    path.startsWith(contractFile)
  );
  if (file === undefined) {
    return `the file of ${engine} schema step ${newestContract.version} is not committed`;
  }
  const commit = git("log", "--first-parent", "--diff-filter=A", "--format=%H", "-1", "--", file);
  if (!commit) {
    return `the commit that added ${file} is not in this clone (a shallow clone?): the rolling-upgrade test needs it`;
  }
  const known = git("ls-tree", "--name-only", commit, `migrations/${engine}/`)!.split("\n")
    .map((path) => Number(/\/(\d{4})_/.exec(path)?.[1] ?? 0));
  return { commit, step: Math.max(...known), known };
}

/**
 * The same on Redis: the commit on main's first-parent line that added its
 * newest contract layout (the last that changed how many layouts of
 * src/stores/redis/migrate.ts say `kind: "contract"`).
 */
function oldRedisCode(): OldCode | string {
  const commit = git(
    "log",
    "--first-parent",
    "-S",
    'kind: "contract"',
    "--format=%H",
    "-1",
    "--",
    "src/stores/redis/migrate.ts",
  );
  if (!commit) {
    return "the commit that added the newest contract layout of Redis is not in this clone (a shallow clone?), or not committed";
  }
  return { commit, step: LAYOUT_VERSION, known: [] };
}

const OLD_CODE = {
  sqlite: oldSqlCode("sqlite"),
  postgres: oldSqlCode("postgres"),
  redis: oldRedisCode(),
};
for (const [stores, old] of Object.entries(OLD_CODE)) {
  if (typeof old === "string") console.log(`skipped on ${stores}: ${old}`);
}

/** The code of `commit` in `folder`, with this tree's fixtures copied in beside it. */
async function checkOut(folder: string, commit: string): Promise<void> {
  const archive = new Deno.Command("git", {
    args: ["archive", commit],
    cwd: ROOT,
    stdout: "piped",
  }).spawn();
  const tar = new Deno.Command("tar", { args: ["-x", "-C", folder], stdin: "piped" }).spawn();
  await archive.stdout.pipeTo(tar.stdin);
  assert.ok((await archive.status).success, "git archive failed");
  assert.ok((await tar.status).success, "tar -x failed");
  for (const path of FIXTURES) {
    await Deno.mkdir(join(folder, path, ".."), { recursive: true });
    await Deno.copyFile(join(ROOT, path), join(folder, path));
  }
}

/** The old code's worker process; its stdout lines as they come. */
class OldWorker implements AsyncDisposable {
  readonly child: Deno.ChildProcess;
  readonly lines: string[] = [];
  readonly stderr: Promise<string>;
  readonly #reading: Promise<void>;

  constructor(folder: string, args: readonly string[]) {
    const child = this.child = new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "-A",
        "--quiet",
        "--config",
        join(folder, "deno.json"),
        join(folder, FIXTURES[1]!),
        ...args,
      ],
      cwd: folder,
      env: { NO_COLOR: "1" },
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    this.stderr = new Response(child.stderr).text();
    this.#reading = (async () => {
      let partial = "";
      for await (const chunk of child.stdout.pipeThrough(new TextDecoderStream())) {
        const parts = (partial + chunk).split("\n");
        partial = parts.pop()!;
        this.lines.push(...parts);
      }
    })();
  }

  /**
   * The first line of type `type`, parsed, waiting up to `timeoutMs`; fails
   * with the process's stderr when it exits first.
   */
  async line(type: string, timeoutMs = 60_000): Promise<Record<string, unknown>> {
    let exited = false;
    void this.child.status.then(() => exited = true);
    const find = () => {
      for (const line of this.lines) {
        const parsed = JSON.parse(line) as Record<string, unknown>;
        if (parsed.type === type) return parsed;
      }
      return null;
    };
    const found = await waitUntil(() => find() ?? (exited ? "exited" : null), {
      what: `the old worker's "${type}" line`,
      timeoutMs,
    });
    if (found !== "exited") return found;
    // It may exit before its last lines were read: read them all, then look again.
    await this.#reading;
    const last = find();
    if (last !== null) return last;
    throw new Error(`The old worker exited before its "${type}" line: ${await this.stderr}`);
  }

  async [Symbol.asyncDispose](): Promise<void> {
    try {
      this.child.kill("SIGKILL");
    } catch {
      // already exited
    }
    await this.child.status;
    await this.#reading;
    await this.stderr;
  }
}

/** How this code reaches the store the old worker uses. */
interface ThisCode {
  /** What opening it would apply, read without applying anything. */
  plan(): Promise<MigrationPlan>;
  /** The options that open a queue on it (migrating it). */
  options(): Promise<Omit<QueueOptions, "jobs">>;
}

/** One store both versions open. */
interface Target {
  readonly kind: "sqlite" | "postgres" | "redis";
  readonly ignore: boolean;
  /** Runs `fn` with the old worker's arguments and this code's way in, then cleans up. */
  readonly with: (
    folder: string,
    fn: (args: string[], current: ThisCode) => Promise<void>,
  ) => Promise<void>;
}

const postgresUrl = postgresTestUrl();
const redisUrl = redisTestUrl();

const TARGETS: readonly Target[] = [
  {
    kind: "sqlite",
    ignore: false,
    async with(folder, fn) {
      const path = join(folder, "..", "queue.db");
      await fn(["sqlite", path, ""], {
        async plan() {
          await using store = await SqliteStore.open(path, { migrate: false });
          return await store.migrationPlan();
        },
        options: () => Promise.resolve({ path }),
      });
    },
  },
  {
    kind: "postgres",
    ignore: postgresUrl === null,
    async with(_folder, fn) {
      const schema = freshSchema();
      try {
        await fn(["postgres", postgresUrl!, schema], {
          async plan() {
            await using store = await PostgresStore.open(postgresUrl!, { schema, migrate: false });
            return await store.migrationPlan();
          },
          options: async () => ({ store: await PostgresStore.open(postgresUrl!, { schema }) }),
        });
      } finally {
        await using dropper = await PostgresStore.open(postgresUrl!, { schema, migrate: false });
        await dropper.transaction((tx) => tx.query(`DROP SCHEMA "${schema}" CASCADE`));
      }
    },
  },
  {
    kind: "redis",
    ignore: redisUrl === null,
    async with(_folder, fn) {
      const prefix = freshPrefix();
      try {
        await fn(["redis", redisUrl!, prefix], {
          async plan() {
            await using store = await RedisStore.open(redisUrl!, { prefix, migrate: false });
            return await store.migrationPlan();
          },
          options: async () => ({ store: await RedisStore.open(redisUrl!, { prefix }) }),
        });
      } finally {
        await deletePrefix(redisUrl!, prefix);
      }
    },
  },
];

for (const target of TARGETS) {
  const old = OLD_CODE[target.kind];
  const OLD_COMMIT = typeof old === "string" ? "" : old.commit.slice(0, 12);
  const OLD_STEP = typeof old === "string" ? 0 : old.step;
  /** The SQL steps this code applies under the old worker: those the old code lacks (a step may be numbered below its newest: step 22 landed after step 24). */
  const NEW_STEPS = target.kind === "redis" || typeof old === "string"
    ? []
    : (target.kind === "sqlite" ? sqliteSteps : postgresSteps)
      .filter((step) => !old.known.includes(step.version)).map((step) => step.version);
  Deno.test({
    name:
      `R21 (${target.kind}): a worker of the commit of the newest contract step drains jobs while this code applies its newer expand steps under it, dispatches and works beside it: both run jobs, none lost or run twice`,
    ignore: typeof old === "string" || target.ignore,
    async fn() {
      await using tmp = await tempDir();
      const folder = join(tmp.dir, "old");
      await Deno.mkdir(folder);
      await checkOut(folder, OLD_COMMIT);
      const ledger = join(tmp.dir, "ledger.txt");
      await Deno.writeTextFile(ledger, "");
      // Once it exists, the old worker dispatches its grouped jobs (its text: the ledger's path).
      const dispatchWhen = join(tmp.dir, "dispatch-grouped");
      await target.with(folder, async (args, current) => {
        await using old = new OldWorker(folder, [
          ...args,
          dispatchWhen,
          String(OLD_GROUPED_FROM),
          String(GROUPED),
        ]);
        const oldPid = Number((await old.line("ready")).pid);

        // What this code would apply under the old worker: only expand steps, so nothing blocks.
        const plan = await current.plan();
        assert.ok(plan.steps.every((step) => step.kind === "expand"), JSON.stringify(plan));
        if (target.kind !== "redis") {
          assert.deepEqual(
            plan.steps.map((step) => step.version),
            NEW_STEPS,
          );
        }

        const queue = await Queue.open({ ...await current.options(), jobs: JOBS });
        let worker: ReturnType<Queue["work"]> | undefined;
        try {
          if (target.kind !== "redis") {
            const rows = await queue.transaction((tx) =>
              tx.query<{ kind: string }>(
                `SELECT kind FROM queue_migrations WHERE version IN (${
                  NEW_STEPS.join(", ") || "NULL"
                })`,
                [],
              )
            );
            assert.ok(
              rows.every((row) => row.kind === "expand"),
              `the steps applied under the old worker: ${JSON.stringify(rows)}`,
            );
          }
          const ledgerLines = async () => {
            const text = (await Deno.readTextFile(ledger)).trim();
            return text === "" ? [] : text.split("\n");
          };
          const ranBy = async (pid: number) =>
            (await ledgerLines()).some((line) => line.endsWith(` ${pid}`));
          const left = async () =>
            Object.values(await queue.counts()).reduce(
              (sum, c) => sum + c.pending + c.reserved + c.delayed,
              0,
            );
          let dispatched = 0;
          const dispatch = async (count: number) => {
            const payloads = Array.from(
              { length: count },
              (_, i) => ({ n: dispatched + i, ledger }),
            );
            await queue.dispatchMany(rollingTick, payloads);
            dispatched += count;
          };
          // The first jobs go to the old worker alone, on the database it now shares at this
          // code's step.
          await dispatch(TOTAL / 4);
          await waitUntil(() => ranBy(oldPid), { what: "the old worker to run a job" });
          // This code's worker starts (its Web Workers load meanwhile): small chunks keep both fed
          // until it has run a job too, then the rest goes at once.
          worker = queue.work({ concurrency: 4, pollMs: 50, leaseMs: 30_000 });
          while (!(await ranBy(Deno.pid))) {
            await dispatch(20);
            await waitUntil(async () => (await ranBy(Deno.pid)) || (await left()) <= 10, {
              what: "this code's worker to run a job, or the chunk to drain",
            });
          }
          await dispatch(Math.max(0, TOTAL - dispatched));
          // Grouped jobs from both codes, on the schema as this code left it.
          await Deno.writeTextFile(`${dispatchWhen}.tmp`, ledger);
          await Deno.rename(`${dispatchWhen}.tmp`, dispatchWhen);
          await queue.dispatchMany(
            rollingGrouped,
            Array.from({ length: GROUPED }, (_, i) => ({ n: NEW_GROUPED_FROM + i, ledger })),
          );
          await old.line("dispatched");
          const expected = [
            ...Array.from({ length: dispatched }, (_, n) => n),
            ...Array.from({ length: GROUPED }, (_, i) => OLD_GROUPED_FROM + i),
            ...Array.from({ length: GROUPED }, (_, i) => NEW_GROUPED_FROM + i),
          ];
          const lines = await waitUntil(async () => {
            const lines = await ledgerLines();
            return lines.length >= expected.length && (await left()) === 0 ? lines : null;
          }, { what: "every job to run", timeoutMs: 180_000 });

          const runs = new Map<number, number>();
          const byPid = new Map<number, number>();
          for (const line of lines) {
            const [n, pid] = line.split(" ").map(Number) as [number, number];
            runs.set(n, (runs.get(n) ?? 0) + 1);
            byPid.set(pid, (byPid.get(pid) ?? 0) + 1);
          }
          const lost = expected.filter((n) => !runs.has(n)).length;
          const twice = [...runs.values()].filter((count) => count > 1).length;
          console.log(
            `R21 ${target.kind}: ${expected.length} jobs (${
              2 * GROUPED
            } grouped), old worker (${OLD_COMMIT}) ran ${byPid.get(oldPid) ?? 0}, this code ran ${
              byPid.get(Deno.pid) ?? 0
            }; lost ${lost}, run twice ${twice}`,
          );
          assert.equal(lost, 0, "lost");
          assert.equal(twice, 0, "run twice");
          // Each group's runs at once, from both codes together, never above its limit of 2.
          const running = new Map<string, number>();
          const most = new Map<string, number>();
          for (const line of (await Deno.readTextFile(`${ledger}.groups`)).trim().split("\n")) {
            const [mark, group] = line.split(" ") as [string, string];
            const now = (running.get(group) ?? 0) + (mark === "+" ? 1 : -1);
            running.set(group, now);
            most.set(group, Math.max(most.get(group) ?? 0, now));
          }
          assert.deepEqual([...running.values()], [0, 0, 0, 0], "every group's runs ended");
          console.log(`R21 ${target.kind}: most grouped runs at once, by group: ${[...most]}`);
          assert.ok([...most.values()].every((n) => n <= 2), `most at once: ${[...most]}`);
          assert.ok((byPid.get(oldPid) ?? 0) > 0, "the old worker ran jobs");
          assert.ok((byPid.get(Deno.pid) ?? 0) > 0, "this code's worker ran jobs");
          assert.equal((await queue.counts()).default?.failed ?? 0, 0, "none failed");

          const oldRow = (await queue.workers()).find((row) => row.pid === oldPid);
          assert.equal(oldRow?.schemaStep, OLD_STEP, "the old worker's row records its step");
          assert.ok(
            !old.lines.some((line) => line.includes('"stopped"')),
            "the old worker runs on",
          );
        } finally {
          await worker?.stop();
          await queue.close();
        }
        old.child.kill("SIGTERM");
        assert.equal((await old.line("stopped")).reason, "requested");
        assert.equal((await old.child.status).code, 0, await old.stderr);
      });
    },
  });
}
