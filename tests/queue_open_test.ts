/**
 * Opening a queue on a store whose schema is behind the code's: a store the
 * caller opened with `migrate: false`, or `Queue.open({ path | url })` given
 * the stores' `migrate: false`, is refused with an error naming the missing
 * steps and how to apply them, the same on every store, and nothing is
 * applied; once migrated, it opens. `migrate` beside a store the caller
 * opened is refused by name: the queue migrates only a store it opens. A store given beside
 * `mode: "inline"`, which stores nothing, is refused and left to the caller. On SQLite always; on PostgreSQL and Redis
 * when `QUEUE_TEST_POSTGRES_URL` and `QUEUE_TEST_REDIS_URL` are set.
 *
 * @module
 */
import assert from "node:assert/strict";
import { z } from "zod";
import { defineJob, Queue, type QueueOptions, SqliteStore } from "../mod.ts";
import { PostgresStore } from "../src/stores/postgres/mod.ts";
import { RedisStore } from "../src/stores/redis/mod.ts";
import type { Store } from "../src/stores/store.ts";
import { tempDir } from "./_helpers.ts";
import { freshSchema, postgresTestUrl } from "./_postgres.ts";
import { deletePrefix, freshPrefix, redisTestUrl } from "./_redis.ts";

const ping = defineJob({ name: "queue-open.ping", schema: z.null(), handle() {} });

/** A new database of one store, removed afterwards. */
interface Fresh {
  /** Where `Queue.open` finds it: `{ path }` or `{ url }`. */
  readonly where: { path: string } | { url: string };
  /** Opens a store on it that applies no step. */
  unmigrated(): Promise<Store>;
}

interface Kind {
  readonly name: string;
  readonly ignore: boolean;
  /** Runs `fn` on a new database, removed afterwards. */
  fresh(fn: (db: Fresh) => Promise<void>): Promise<void>;
}

const postgresUrl = postgresTestUrl();
const redisUrl = redisTestUrl();

const KINDS: readonly Kind[] = [
  {
    name: "SQLite",
    ignore: false,
    async fresh(fn) {
      await using tmp = await tempDir();
      await fn({
        where: { path: tmp.dbPath },
        unmigrated: () => SqliteStore.open(tmp.dbPath, { migrate: false }),
      });
    },
  },
  {
    name: "PostgreSQL",
    ignore: postgresUrl === null,
    async fresh(fn) {
      const url = new URL(postgresUrl!);
      url.searchParams.set("schema", freshSchema());
      try {
        await fn({
          where: { url: url.href },
          unmigrated: () => PostgresStore.open(url.href, { migrate: false }),
        });
      } finally {
        await using dropper = await PostgresStore.open(postgresUrl!, { migrate: false });
        const schema = url.searchParams.get("schema");
        await dropper.transaction((tx) => tx.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`));
      }
    },
  },
  {
    name: "Redis",
    ignore: redisUrl === null,
    async fresh(fn) {
      const prefix = freshPrefix();
      const url = new URL(redisUrl!);
      url.searchParams.set("prefix", prefix);
      try {
        await fn({
          where: { url: url.href },
          unmigrated: () => RedisStore.open(url.href, { migrate: false }),
        });
      } finally {
        await deletePrefix(redisUrl!, prefix);
      }
    },
  },
];

/** Whether `error` is the refusal of a database at step 0, naming the steps and the ways to apply them. */
function isBehindError(error: unknown): boolean {
  assert.ok(error instanceof Error, String(error));
  assert.match(
    error.message,
    /^Queue\.open: the store's database lacks schema steps 1 to \d+ of this code \(it is at step 0, this code at \d+\): apply them first: .*store\.migrate\(\).*the CLI's migrate command/,
  );
  return true;
}

for (const kind of KINDS) {
  Deno.test({
    name:
      `${kind.name}: Queue.open({ store }) refuses a store opened with migrate: false whose schema is behind the code's, naming the steps, and applies none; once migrated it opens`,
    ignore: kind.ignore,
    fn: () =>
      kind.fresh(async (db) => {
        await using store = await db.unmigrated();
        await assert.rejects(Queue.open({ store, jobs: [ping] }), isBehindError);
        assert.equal((await store.migrationPlan()).databaseStep, 0, "no step applied");
        await store.migrate();
        const queue = await Queue.open({ store, jobs: [ping] });
        try {
          assert.equal(typeof await queue.dispatch(ping, null), "number");
        } finally {
          await queue.close();
        }
      }),
  });

  Deno.test({
    name:
      `${kind.name}: Queue.open({ path | url, migrate: false }) refuses a database behind the code's, and opens one that has every step`,
    ignore: kind.ignore,
    fn: () =>
      kind.fresh(async (db) => {
        // `migrate: false` is the stores' option, outside QueueOptions' type: as JavaScript passes it.
        const unmigrated = { ...db.where, jobs: [ping], migrate: false } as unknown as QueueOptions;
        await assert.rejects(Queue.open(unmigrated), isBehindError);
        {
          await using store = await db.unmigrated();
          assert.equal((await store.migrationPlan()).databaseStep, 0, "no step applied");
        }
        await (await Queue.open({ ...db.where, jobs: [ping] })).close();
        await using queue = await Queue.open(unmigrated);
        assert.equal(typeof await queue.dispatch(ping, null), "number");
      }),
  });

  Deno.test({
    name:
      `${kind.name}: Queue.open({ store, migrate }) refuses migrate by name, pointing to store.migrate(), behind or not, and applies no step; migrate: false (none applied) opens a migrated store`,
    ignore: kind.ignore,
    fn: () =>
      kind.fresh(async (db) => {
        await using store = await db.unmigrated();
        const refused = (migrate: unknown) =>
          new RegExp(
            `^TypeError: Queue\\.open: migrate applies to a store the queue opens \\(path or url\\), so it takes no store: got ${
              RegExp.escape(JSON.stringify(migrate))
            }; migrate the store before Queue\\.open with store\\.migrate\\(\\), which takes the same options$`,
          );
        const open = (migrate: unknown) =>
          Queue.open({ store, jobs: [ping], migrate } as unknown as QueueOptions);
        for (const migrate of [{}, { force: true }, { waitMs: 60_000 }, true]) {
          await assert.rejects(open(migrate), refused(migrate));
        }
        assert.equal((await store.migrationPlan()).databaseStep, 0, "no step applied");
        await store.migrate();
        // Migrated, the store would open: the setting must not be dropped in silence then either.
        await assert.rejects(open({ force: true }), refused({ force: true }));
        const queue = await open(false);
        try {
          assert.equal(typeof await queue.dispatch(ping, null), "number");
        } finally {
          await queue.close();
        }
      }),
  });

  Deno.test({
    name:
      `${kind.name}: Queue.open({ migrate }) and store.migrate() refuse an unknown migrate option, or one of the wrong type, by name, and apply no step`,
    ignore: kind.ignore,
    fn: () =>
      kind.fresh(async (db) => {
        const cases: [migrate: unknown, message: RegExp][] = [
          ["yes", /^TypeError: migrate: options must be an object: got "yes"$/],
          [
            { forse: true },
            /^TypeError: migrate: unknown option "forse" \(it takes "force", "waitMs"\)$/,
          ],
          [{ force: "yes" }, /^TypeError: migrate: force must be true or false: got "yes"$/],
        ];
        await using store = await db.unmigrated();
        for (const [migrate, message] of cases) {
          const options = { ...db.where, jobs: [ping], migrate } as unknown as QueueOptions;
          await assert.rejects(Queue.open(options), message);
          await assert.rejects(store.migrate(migrate as never), message);
        }
        assert.equal((await store.migrationPlan()).databaseStep, 0, "no step applied");
      }),
  });
}

for (const kind of KINDS) {
  Deno.test({
    name:
      `${kind.name}: Queue.open({ store, mode: "inline" }) refuses the store with a TypeError naming both, and leaves it open for the caller`,
    ignore: kind.ignore,
    fn: () =>
      kind.fresh(async (db) => {
        await using store = await db.unmigrated();
        await store.migrate();
        await assert.rejects(
          Queue.open({ store, mode: "inline", jobs: [ping] }),
          (error) => {
            assert.ok(error instanceof TypeError, String(error));
            assert.match(
              error.message,
              /^Queue\.open: mode "inline" takes no store: .*drop store .*or drop mode "inline"/,
            );
            return true;
          },
        );
        // Still the caller's and still open: a queue in worker mode uses it.
        await using queue = await Queue.open({ store, jobs: [ping] });
        assert.equal(typeof await queue.dispatch(ping, null), "number");
      }),
  });
}
