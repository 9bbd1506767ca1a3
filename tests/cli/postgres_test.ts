/**
 * The CLI on PostgreSQL: `--db postgres://…?schema=…` (and `QUEUE_DB`)
 * reaches the PostgreSQL store for every command, in the URL's `schema`;
 * the store takes the parameter as its `schema` option (the option wins)
 * and never sends it to the server. Runs when `QUEUE_TEST_POSTGRES_URL` is
 * set; each case uses a schema of its own, dropped afterwards.
 *
 * @module
 */
import assert from "node:assert/strict";
import { z } from "zod";
import { defineJob, Queue } from "../../mod.ts";
import { PostgresStore } from "../../src/stores/postgres/mod.ts";
import { redactPassword } from "../../src/stores/database_url.ts";
import { freshSchema, postgresTestUrl } from "../_postgres.ts";
import { checkRefusesMissingQueue } from "../fixtures/cli/missing_queue.ts";
import { runCli } from "../fixtures/cli/cli_process.ts";
import { checkSignalAndSteps } from "../fixtures/cli/signal_steps.ts";
import { checkSpacedCapitalUrl } from "../fixtures/cli/spaced_url.ts";

const onboard = defineJob({ name: "cli.onboard", schema: z.null(), queue: "steps", handle() {} });

const url = postgresTestUrl();
if (url === null) {
  console.log("CLI tests on PostgreSQL skipped: QUEUE_TEST_POSTGRES_URL is not set");
}

/** The test server's URL with `schema` as its `schema` parameter. */
function withSchema(schema: string): string {
  const target = new URL(url!);
  target.searchParams.set("schema", schema);
  return target.href;
}

/** The schemas of the test database whose name is `schema`. */
async function schemasNamed(schema: string): Promise<number> {
  await using store = await PostgresStore.open(url!, { migrate: false });
  const rows = await store.transaction((tx) =>
    tx.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM information_schema.schemata WHERE schema_name = $1",
      [schema],
    )
  );
  return rows[0]!.n;
}

/** Registers a test that needs the server, with a fresh schema dropped afterwards. */
function postgresTest(name: string, fn: (db: string, schema: string) => Promise<void>): void {
  Deno.test({
    name,
    ignore: url === null,
    async fn() {
      const schema = freshSchema();
      try {
        await fn(withSchema(schema), schema);
      } finally {
        await using dropper = await PostgresStore.open(url!, { migrate: false });
        await dropper.transaction((tx) => tx.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`));
      }
    },
  });
}

postgresTest(
  "PostgresStore.open() takes the URL's schema parameter as its schema, and the option over it",
  async (db, schema) => {
    {
      await using store = await PostgresStore.open(db);
      await using queue = await Queue.open({ store, jobs: [onboard] });
      await queue.dispatch(onboard, null);
      const [row] = await store.transaction((tx) =>
        tx.query<{ schema: string; jobs: number }>(
          "SELECT current_schema() AS schema, (SELECT count(*)::int FROM jobs) AS jobs",
          [],
        )
      );
      assert.deepEqual(row, { schema, jobs: 1 });
    }
    const other = freshSchema();
    try {
      await using store = await PostgresStore.open(db, { schema: other });
      const [row] = await store.transaction((tx) =>
        tx.query<{ schema: string }>("SELECT current_schema() AS schema", [])
      );
      assert.equal(row?.schema, other, "the option wins");
    } finally {
      await using dropper = await PostgresStore.open(url!, { migrate: false });
      await dropper.transaction((tx) => tx.query(`DROP SCHEMA IF EXISTS "${other}" CASCADE`));
    }
  },
);

Deno.test({
  name: "PostgresStore.open() refuses a schema parameter that is not a schema name, naming it",
  ignore: url === null,
  async fn() {
    const target = new URL(url!);
    target.searchParams.set("schema", "Jobs; DROP");
    await assert.rejects(
      () => PostgresStore.open(target.href),
      (error: Error) =>
        error instanceof TypeError && /^schema must be .*got "Jobs; DROP"$/.test(error.message),
    );
  },
});

Deno.test("CLI commands on a PostgreSQL server that refuses connections name it without its password", async () => {
  const down = "postgres://app:secret@127.0.0.1:1/app";
  const said: Record<string, string> = {};
  for (const command of ["migrate", "stats", "failed"]) {
    const result = await runCli([command, "--db", down]);
    said[command] = `${result.code} ${result.stderr.trim()}`;
  }
  for (const command of ["migrate", "stats", "failed"]) {
    assert.match(
      said[command]!,
      /^1 .*Cannot reach the PostgreSQL database at postgres:\/\/app:\*\*\*@127\.0\.0\.1:1\/app: .*ECONNREFUSED/,
      command,
    );
  }
  assert.doesNotMatch(Object.values(said).join("\n"), /secret/, "the password is not shown");
});

postgresTest(
  "CLI migrate --db postgres://…?schema= makes the tables in that schema and names the URL without its password",
  async (db, schema) => {
    const result = await runCli(["migrate", "--db", db]);
    assert.equal(result.code, 0, result.stderr);
    assert.match(
      result.stdout,
      new RegExp(`${RegExp.escape(redactPassword(db))} is at schema version \\d+\n$`),
    );
    assert.equal(await schemasNamed(schema), 1);
  },
);

postgresTest(
  "CLI admin commands refuse a schema that holds no queue, naming the URL, and create nothing there",
  (db, schema) =>
    checkRefusesMissingQueue(
      db,
      "no queue tables in this schema",
      async () => assert.equal(await schemasNamed(schema), 0, "no schema made"),
    ),
);

postgresTest(
  "CLI migrate --plan on a schema that does not exist plans every step from step 0 and creates nothing",
  async (db, schema) => {
    const plan = await runCli(["migrate", "--plan", "--db", db]);
    assert.equal(plan.code, 0, plan.stderr);
    assert.match(
      plan.stdout,
      /^.* is at schema step 0; this code knows \d+\nWould apply schema step 1 \(/,
    );
    assert.equal(await schemasNamed(schema), 0, "no schema made");
  },
);

postgresTest("CLI migrate reads the schema from QUEUE_DB's URL", async (db, schema) => {
  const result = await runCli(["migrate"], { QUEUE_DB: db });
  assert.equal(result.code, 0, result.stderr);
  assert.equal(await schemasNamed(schema), 1);
});

postgresTest(
  "CLI commands read a postgres:// DATABASE_URL when neither --db nor QUEUE_DB is given, as Queue.open and readConfig() do; QUEUE_DB wins",
  async (db, schema) => {
    // --plan first: it creates nothing, so a CLI that ignored DATABASE_URL leaves no file behind.
    const plan = await runCli(["migrate", "--plan"], { DATABASE_URL: db });
    assert.equal(plan.code, 0, plan.stderr);
    assert.ok(
      plan.stdout.startsWith(`${redactPassword(db)} is at schema step 0`),
      plan.stdout.split("\n")[0],
    );
    const migrated = await runCli(["migrate"], { DATABASE_URL: ` ${db}` });
    assert.equal(migrated.code, 0, migrated.stderr);
    assert.equal(await schemasNamed(schema), 1);
    const other = withSchema(freshSchema());
    const given = await runCli(["migrate", "--plan"], { DATABASE_URL: db, QUEUE_DB: other });
    assert.equal(given.code, 0, given.stderr);
    assert.ok(given.stdout.startsWith(`${redactPassword(other)} is at schema step 0`));
  },
);

postgresTest(
  "CLI migrate reads a QUEUE_DB or --db URL with a space before it and its scheme in capitals as PostgreSQL, making no file",
  async (db, schema) => {
    await checkSpacedCapitalUrl(
      db,
      "postgres",
      "Postgres",
      async () => await schemasNamed(schema) === 1,
    );
  },
);

postgresTest(
  "CLI signal and steps --db postgres://…?schema= answer a job's wait there: delivered to its wait, buffered under another name, not-found exits 1; steps lists its memos",
  async (db, schema) => {
    const store = await PostgresStore.open(url!, { schema });
    await checkSignalAndSteps(store, db);
  },
);
