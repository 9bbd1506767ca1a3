/**
 * What the CLI prints of stored text and of itself: control characters in
 * errors, job and batch names escaped; admin commands that refuse a database
 * that does not exist; usage lines that name the command as it runs; the
 * resolved database in `work`'s first line. Real child processes.
 *
 * @module
 */
import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { programFor } from "../../src/cli/command.ts";
import { join } from "node:path";
import { z } from "zod";
import { defineJob, defineSchedule, PermanentError, Queue } from "../../mod.ts";
import { workUntilEmpty } from "../../src/testing.ts";
import { tempDir } from "../_helpers.ts";
import { ROOT, runCli } from "../fixtures/cli/cli_process.ts";
import { checkRefusesMissingQueue } from "../fixtures/cli/missing_queue.ts";

const HOSTILE = "\x1b]0;TITLE\x07\x1b[2J";
const hostile = defineJob({
  name: `cli-output.bad\nname${HOSTILE}`,
  schema: z.null(),
  handle() {
    throw new PermanentError(`boom ${HOSTILE}\u202eevil`);
  },
});

Deno.test("failed and batches print stored text with its control characters escaped, one row per job", async () => {
  await using tmp = await tempDir();
  {
    await using queue = await Queue.open({ path: tmp.dbPath, jobs: [hostile] });
    await queue.batch(`upload${HOSTILE}\nsecond line.csv`).push(hostile, null).dispatch();
    await workUntilEmpty(queue, { executor: "isolate" });
  }
  for (const command of ["failed", "batches"]) {
    const result = await runCli([command, "--db", tmp.dbPath]);
    assert.equal(result.code, 0, result.stderr);
    assert.doesNotMatch(
      result.stdout,
      // deno-lint-ignore no-control-regex -- the raw control characters must not be there
      /[\x00-\x09\x0b-\x1f\x7f\u202e]/,
      `${command}: raw controls`,
    );
    assert.equal(result.stdout.trim().split("\n").length, 3, `${command}: header, rule, one row`);
    assert.match(result.stdout, /\\x1b\]0;TITLE\\x07\\x1b\[2J/);
  }
});

Deno.test("schedules and batches show a name whole with its newline escaped, so names that differ after one stay apart", async () => {
  await using tmp = await tempDir();
  const report = defineJob({ name: "cli-output.report", schema: z.null(), handle() {} });
  const schedules = ["daily", "hourly"].map((every) =>
    defineSchedule({ name: `report\n${every}`, everyMs: 3_600_000, job: report, payload: null })
  );
  {
    await using queue = await Queue.open({ path: tmp.dbPath, jobs: [report, ...schedules] });
    await queue.batch("upload\nsecond line.csv").push(report, null).dispatch();
  }
  const listed = await runCli(["schedules", "--db", tmp.dbPath]);
  assert.equal(listed.code, 0, listed.stderr);
  assert.match(listed.stdout, /^report\\ndaily +cli-output\.report/m);
  assert.match(listed.stdout, /^report\\nhourly +cli-output\.report/m);
  const batches = await runCli(["batches", "--db", tmp.dbPath]);
  assert.equal(batches.code, 0, batches.stderr);
  assert.match(batches.stdout, /upload\\nsecond line\.csv/);
});

Deno.test("a --db file that is not a SQLite database is named in the error of migrate, stats and move, and left as it was", async () => {
  await using tmp = await tempDir();
  const garbage = join(tmp.dir, "notes.db");
  await Deno.writeTextFile(garbage, "not a database, only some notes\n".repeat(100));
  const commands = [
    ["migrate"],
    ["migrate", "--plan"],
    ["stats"],
    ["move", "--from", garbage, "--to", join(tmp.dir, "new.db")],
  ];
  for (const command of commands) {
    const result = await runCli(
      command[0] === "move" ? command : [...command, "--db", garbage],
    );
    assert.equal(result.code, 1, `${command.join(" ")}: ${result.stdout}`);
    assert.match(
      result.stderr,
      new RegExp(
        `Cannot open the queue database ${garbage}: it is not a SQLite database \\(SQLite: file is not a database\\)`,
      ),
      command.join(" "),
    );
  }
  assert.equal(
    await Deno.readTextFile(garbage),
    "not a database, only some notes\n".repeat(100),
    "the file is as it was",
  );
});

Deno.test("a damaged SQLite file (cut short) is named in the error, which says to restore it from a backup", async () => {
  await using tmp = await tempDir();
  const path = join(tmp.dir, "cut.db");
  const note = defineJob({ name: "note", schema: z.object({ text: z.string() }), handle() {} });
  {
    await using queue = await Queue.open({ path, jobs: [note] });
    await queue.dispatchMany(
      note,
      Array.from({ length: 2_000 }, (_, i) => ({ text: `${"x".repeat(200)}${i}` })),
    );
  }
  await Deno.truncate(path, Math.floor((await Deno.stat(path)).size / 3));
  for (const command of [["stats"], ["migrate"]]) {
    const result = await runCli([...command, "--db", path]);
    assert.equal(result.code, 1, `${command.join(" ")}: ${result.stdout}`);
    assert.match(
      result.stderr,
      new RegExp(
        `Cannot open the queue database ${path}: the file is damaged: restore it from a backup .*\\(SQLite: database disk image is malformed\\)`,
      ),
    );
  }
});

Deno.test("admin commands refuse a SQLite file that does not exist, creating nothing; migrate creates it", async () => {
  await using tmp = await tempDir();
  const missing = join(tmp.dir, "typo", "queue.db");
  for (const command of [["failed"], ["stats"], ["batches"], ["retry", "all"]]) {
    const result = await runCli([...command, "--db", missing]);
    assert.equal(result.code, 1, `${command[0]}: ${result.stdout}`);
    assert.match(result.stderr, new RegExp(`no database at ${missing}: check --db or QUEUE_DB`));
  }
  assert.deepEqual([...Deno.readDirSync(tmp.dir)], [], "no folder, no database");
  const migrated = await runCli(["migrate", "--db", missing]);
  assert.equal(migrated.code, 0, migrated.stderr);
  assert.equal((await runCli(["failed", "--db", missing])).stdout.trim(), "No failed jobs");
});

Deno.test("admin commands refuse a file: URI naming a file that does not exist, creating nothing, and read one that does", async () => {
  await using tmp = await tempDir();
  for (const uri of [`file:${tmp.dbPath}`, `file://${tmp.dbPath}?mode=rw`]) {
    const result = await runCli(["stats", "--db", uri]);
    assert.equal(result.code, 1, result.stdout);
    assert.equal(
      result.stderr,
      `queue stats: no database at ${uri}: check --db or QUEUE_DB (the work and migrate commands create it)\n`,
    );
  }
  assert.deepEqual([...Deno.readDirSync(tmp.dir)], [], "no database was made");
  assert.equal((await runCli(["migrate", "--db", tmp.dbPath])).code, 0);
  const stats = await runCli(["stats", "--db", `file://${tmp.dbPath}`, "--json"]);
  assert.equal(stats.code, 0, stats.stderr);
});

Deno.test("admin commands on --db :memory: say an in-memory database holds no queue; the CLI module's example (migrate, then stats) exits 0", async () => {
  const memory = await runCli(["stats", "--db", ":memory:", "--json"]);
  assert.equal(memory.code, 1, memory.stdout);
  assert.match(
    memory.stderr,
    /^queue stats: no queue at :memory:: an in-memory database is new and empty for each command; check --db or QUEUE_DB\n$/,
  );
  await using tmp = await tempDir();
  assert.equal((await runCli(["migrate", "--db", tmp.dbPath])).code, 0);
  const stats = await runCli(["stats", "--db", tmp.dbPath, "--json"]);
  assert.equal(stats.code, 0, stats.stderr);
});

Deno.test("admin commands refuse a SQLite file that holds no queue (another app's database), creating no table in it and leaving its journal mode", async () => {
  await using tmp = await tempDir();
  const app = new DatabaseSync(tmp.dbPath);
  app.exec("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)");
  app.close();
  const state = () => {
    const db = new DatabaseSync(tmp.dbPath);
    try {
      return {
        tables: db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all()
          .map((row) => row.name),
        journal: db.prepare("PRAGMA journal_mode").get()?.journal_mode,
      };
    } finally {
      db.close();
    }
  };
  await checkRefusesMissingQueue(
    tmp.dbPath,
    "no queue tables in this file",
    () =>
      Promise.resolve(
        assert.deepEqual(state(), { tables: ["customers"], journal: "delete" }, "left as it was"),
      ),
  );
});

Deno.test("usage lines name the CLI as it runs from source, and --db says it takes a postgres:// URL", async () => {
  const help = await runCli(["help", "work"]);
  assert.match(help.stdout, /^Usage: deno run -A \.\/src\/cli\.ts work --jobs PATH \[flags\]$/m);
  assert.doesNotMatch(help.stdout, /jsr:@renox\/queue\/cli/);
  assert.match(help.stdout, /--db DB\s+a SQLite file, a postgres:\/\/ URL or a redis:\/\/ URL/);
});

Deno.test("usage lines name the script that started the CLI when it is not the CLI module itself", async () => {
  await using tmp = await tempDir();
  const script = join(tmp.dir, "queue_cli.ts");
  await Deno.writeTextFile(
    script,
    `import { main } from ${JSON.stringify(import.meta.resolve("../../src/cli.ts"))};
Deno.exit(await main(Deno.args));`,
  );
  const help = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--quiet", "queue_cli.ts", "help", "pause"],
    cwd: tmp.dir,
    env: { NO_COLOR: "1" },
  }).output();
  const stdout = new TextDecoder().decode(help.stdout);
  assert.equal(help.code, 0, new TextDecoder().decode(help.stderr));
  assert.match(stdout, /^Usage: deno run -A \.\/queue_cli\.ts pause <queue> \[flags\]$/m);
});

Deno.test("usage lines name the published CLI as jsr:@renox/queue/cli, and any other URL as it is", () => {
  const source = "file:///app/src/cli.ts";
  const published = "https://jsr.io/@renox/queue/0.3.1/src/cli.ts";
  assert.equal(programFor(published, published, "/app"), "deno run -A jsr:@renox/queue/cli");
  assert.equal(
    programFor(published, "jsr:@renox/queue@0.3.1/cli", "/app"),
    "deno run -A jsr:@renox/queue/cli",
  );
  assert.equal(programFor(source, source, "/app"), "deno run -A ./src/cli.ts");
  assert.equal(programFor(source, source, "/elsewhere"), "deno run -A /app/src/cli.ts");
  assert.equal(programFor(source, source, null), "deno run -A /app/src/cli.ts");
  assert.equal(
    programFor(source, "file:///app/scripts/queue.ts", "/app"),
    "deno run -A ./scripts/queue.ts",
  );
  const mirrored = "https://example.com/queue/src/cli.ts";
  assert.equal(programFor(mirrored, mirrored, "/app"), `deno run -A ${mirrored}`);
});

Deno.test("work prints the resolved database path in its first line", async () => {
  await using tmp = await tempDir();
  const jobs = join(tmp.dir, "jobs.ts");
  await Deno.writeTextFile(
    jobs,
    `import { z } from "npm:zod@4";
import { defineJob } from ${JSON.stringify(import.meta.resolve("../../mod.ts"))};
export const noop = defineJob({ name: "noop", schema: z.null(), handle() {} });`,
  );
  const result = await runCli([
    "work",
    "--no-supervise",
    "--stop-when-empty",
    "--executor",
    "isolate",
    "--jobs",
    jobs,
  ], { QUEUE_DB: "./.renox/output-test.db" });
  try {
    assert.equal(result.code, 0, result.stderr);
    const first = JSON.parse(result.stdout.split("\n")[0]!);
    assert.equal(first.event, "worker:start");
    assert.equal(first.db, join(ROOT, ".renox", "output-test.db"));
  } finally {
    for (const suffix of ["", "-wal", "-shm"]) {
      await Deno.remove(`./.renox/output-test.db${suffix}`).catch(() => {});
    }
  }
});

Deno.test("migrate and backup name the database on their first line; stats and the listing commands print only their result (docs/working.md)", async () => {
  await using tmp = await tempDir();
  assert.equal((await runCli(["migrate", "--db", tmp.dbPath])).code, 0);
  const first = async (...args: string[]) => {
    const result = await runCli([...args, "--db", tmp.dbPath]);
    assert.equal(result.code, 0, result.stderr);
    return result.stdout.split("\n")[0]!;
  };
  assert.match(
    await first("migrate"),
    new RegExp(`^${RegExp.escape(tmp.dbPath)} is at schema version \\d+$`),
  );
  assert.ok(
    (await first("backup", join(tmp.dir, "copy.db"))).startsWith(`Backed up ${tmp.dbPath} `),
  );
  const listings: [string[], string][] = [
    [["failed"], "No failed jobs"],
    [["batches"], "No batches"],
    [["flows"], "No flows"],
    [["paused"], "No paused queues"],
    [["paused-groups"], "No paused groups"],
    [["schedules"], "No schedules"],
  ];
  for (const [args, line] of listings) assert.equal(await first(...args), line, args[0]);
  await using queue = await Queue.open({ path: tmp.dbPath, jobs: [hostile] });
  await queue.dispatch(hostile, null);
  assert.match(await first("stats"), /^queue\s/);
});
