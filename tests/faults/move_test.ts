/**
 * A move killed halfway (docs/moving.md, "Resuming"): the real `move`
 * command, run as a process, is killed with SIGKILL once rows have reached
 * the destination and before they all have; run again, it finishes: both
 * stores' counts are equal, and every job is there once, with its id. To a
 * SQLite file, to PostgreSQL when `QUEUE_TEST_POSTGRES_URL` is set, and to
 * Redis when `QUEUE_TEST_REDIS_URL` is.
 *
 * @module
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { fileURLToPath } from "node:url";
// deno-lint-ignore no-import-prefix
import postgres from "npm:postgres@^3.4.9";
import { RedisStore } from "../../src/stores/redis/mod.ts";
import { SqliteStore } from "../../src/stores/sqlite/mod.ts";
import { tempDir, waitUntil } from "../_helpers.ts";
import { postgresTestUrl } from "../_postgres.ts";
import { deletePrefix, freshPrefix, redisTestUrl } from "../_redis.ts";
import { freshDatabase } from "../fixtures/deploy/serve_process.ts";

const CLI = fileURLToPath(new URL("../../src/cli.ts", import.meta.url));
/** Enough jobs that the move takes a while: hundreds of pages. */
const TOTAL = 150_000;
const pgUrl = postgresTestUrl();
const redisUrl = redisTestUrl();

/** Starts `move --from from --to to` as a process of its own. */
function startMove(from: string, to: string): Deno.ChildProcess {
  return new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", CLI, "move", "--from", from, "--to", to],
    stdout: "piped",
    stderr: "piped",
  }).spawn();
}

/** A SQLite queue at `path` holding `TOTAL` pending jobs; their ids, lowest and highest. */
async function bigQueue(path: string): Promise<{ first: number; last: number }> {
  await using store = await SqliteStore.open(path);
  const now = Date.now();
  const ids: number[] = [];
  for (let start = 0; start < TOTAL; start += 10_000) {
    ids.push(
      ...await store.insertJobs(Array.from({ length: 10_000 }, (_, n) => ({
        queue: "default",
        name: "bulk",
        payload: JSON.stringify({ n: start + n, pad: "x".repeat(64) }),
        priority: 0,
        availableAt: now,
        retryUntil: null,
        createdAt: now,
      }))),
    );
  }
  return { first: ids[0]!, last: ids.at(-1)! };
}

/** How a destination's jobs are read from outside the move: how many, and their ids' range. */
interface Reader extends AsyncDisposable {
  jobs(): Promise<{ count: number; distinct: number; min: number; max: number } | null>;
}

async function killHalfwayAndResume(to: string, reader: Reader, dir: string): Promise<void> {
  const from = join(dir, "queue.db");
  const { first, last } = await bigQueue(from);
  const killed = startMove(from, to);
  let halfway = 0;
  try {
    await waitUntil(async () => {
      halfway = (await reader.jobs())?.count ?? 0;
      return halfway >= TOTAL / 10;
    }, { what: "a tenth of the jobs in the destination", timeoutMs: 120_000, everyMs: 5 });
    killed.kill("SIGKILL");
  } finally {
    const status = await killed.status;
    await killed.stdout.cancel();
    await killed.stderr.cancel();
    assert.equal(status.signal, "SIGKILL", "the move was still running when killed");
  }
  const left = (await reader.jobs())!;
  assert.ok(left.count < TOTAL, `killed halfway: ${left.count} of ${TOTAL} jobs copied`);

  const resumed = await startMove(from, to).output();
  const out = new TextDecoder().decode(resumed.stdout);
  assert.equal(resumed.code, 0, new TextDecoder().decode(resumed.stderr) + out);
  assert.match(out, /^Finished the move /);
  assert.match(out, new RegExp(`\\njobs +${TOTAL} +${TOTAL}  ok\\n`));
  assert.doesNotMatch(out, /DIFFERS/);
  assert.deepEqual(await reader.jobs(), { count: TOTAL, distinct: TOTAL, min: first, max: last });
  console.log(`move killed after ${left.count} of ${TOTAL} jobs were copied; the rerun finished`);
}

Deno.test("A move killed with SIGKILL halfway and run again finishes: counts equal, each job once (SQLite to SQLite)", async () => {
  await using dir = await tempDir();
  const to = join(dir.dir, "to.db");
  await killHalfwayAndResume(to, {
    jobs() {
      let db: DatabaseSync | undefined;
      try {
        db = new DatabaseSync(to, { readOnly: true });
        const row = db.prepare(
          "SELECT count(*) AS count, count(DISTINCT id) AS distinct_ids, min(id) AS min, max(id) AS max FROM jobs",
        ).get()!;
        return Promise.resolve({
          count: Number(row.count),
          distinct: Number(row.distinct_ids),
          min: Number(row.min),
          max: Number(row.max),
        });
      } catch {
        return Promise.resolve(null); // not created, or not migrated yet
      } finally {
        db?.close();
      }
    },
    [Symbol.asyncDispose]: () => Promise.resolve(),
  }, dir.dir);
});

Deno.test({
  name:
    "A move killed with SIGKILL halfway and run again finishes: counts equal, each job once (SQLite to PostgreSQL)",
  ignore: pgUrl === null,
  async fn() {
    await using dir = await tempDir();
    await using database = await freshDatabase(pgUrl!);
    const sql = postgres(database.url, { max: 1, onnotice: () => {} });
    try {
      await killHalfwayAndResume(database.url, {
        async jobs() {
          try {
            const [row] =
              await sql`SELECT count(*)::int AS count, count(DISTINCT id)::int AS distinct_ids,
              min(id)::int AS min, max(id)::int AS max FROM jobs`;
            return { count: row!.count, distinct: row!.distinct_ids, min: row!.min, max: row!.max };
          } catch {
            return null; // not migrated yet
          }
        },
        [Symbol.asyncDispose]: () => Promise.resolve(),
      }, dir.dir);
    } finally {
      await sql.end({ timeout: 5 });
    }
  },
});

Deno.test({
  name:
    "A move killed with SIGKILL halfway and run again finishes: counts equal, each job once (SQLite to Redis)",
  ignore: redisUrl === null,
  async fn() {
    await using dir = await tempDir();
    const prefix = freshPrefix();
    const to = `${redisUrl}/0?prefix=${prefix}`;
    // Opened once the move has laid the prefix out; read through the store's own export.
    let store: RedisStore | undefined;
    try {
      await killHalfwayAndResume(to, {
        async jobs() {
          try {
            store ??= await RedisStore.open(to, { migrate: false });
          } catch {
            return null; // not laid out yet
          }
          const ids: number[] = [];
          let after: string | null = null;
          do {
            const page: Awaited<ReturnType<RedisStore["exportRows"]>> = await store.exportRows(
              "jobs",
              after,
              10_000,
            );
            for (const row of page.rows) ids.push(Number(row.id));
            after = page.after;
          } while (after !== null);
          return {
            count: ids.length,
            distinct: new Set(ids).size,
            min: ids.reduce((a, b) => Math.min(a, b), Infinity),
            max: ids.reduce((a, b) => Math.max(a, b), -Infinity),
          };
        },
        [Symbol.asyncDispose]: () => Promise.resolve(),
      }, dir.dir);
    } finally {
      await store?.close();
      await deletePrefix(redisUrl!, prefix);
    }
  },
});
