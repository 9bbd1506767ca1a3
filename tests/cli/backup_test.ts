import assert from "node:assert/strict";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { Queue } from "../../mod.ts";
import { tempDir, unfinishedCount } from "../_helpers.ts";
import { runCli } from "../fixtures/cli/cli_process.ts";
import { record } from "../fixtures/cli/jobs.ts";

const JOBS_URL = import.meta.resolve("../fixtures/cli/jobs.ts");

/** `text` as a regular expression that matches it literally. */
function literal(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

Deno.test("backup <file> writes a whole copy of the SQLite database, prints where and how big, and exits 0", async () => {
  await using tmp = await tempDir();
  {
    await using queue = await Queue.open({ path: tmp.dbPath, jobs: JOBS_URL });
    await queue.dispatchMany(record, Array.from({ length: 500 }, (_, n) => ({ n })));
  }
  const copy = join(tmp.dir, "backups", "queue-copy.db");
  await Deno.mkdir(join(tmp.dir, "backups"));
  const result = await runCli(["backup", copy, "--db", tmp.dbPath]);
  assert.equal(result.code, 0, result.stderr);
  assert.equal(result.stderr, "");
  const { size } = await Deno.stat(copy);
  assert.match(
    result.stdout,
    new RegExp(
      `^Backed up .*queue\\.db to ${literal(copy)} \\(${
        size.toLocaleString("en-US")
      } bytes\\) in \\d+ ms\\n$`,
    ),
  );
  const db = new DatabaseSync(copy);
  try {
    assert.equal(db.prepare("PRAGMA integrity_check").get()?.integrity_check, "ok");
  } finally {
    db.close();
  }
  await using restored = await Queue.open({ path: copy, jobs: JOBS_URL });
  assert.equal(await unfinishedCount(restored), 500);
});

Deno.test("backup: a missing, extra or malformed <file> exits 2 naming it; a file that exists exits 1 naming it, untouched", async () => {
  await using tmp = await tempDir();
  {
    await using _queue = await Queue.open({ path: tmp.dbPath, jobs: [] });
  }
  const db = ["--db", tmp.dbPath];
  const usage: [string[], RegExp][] = [
    [["backup", ...db], /^queue backup: missing the backup file \(<file>\)/],
    [["backup", "a.db", "b.db", ...db], /^queue backup: unexpected argument "b\.db"/],
    [["backup", "", ...db], /^queue backup: <file> must be the path of a new file: got ""/],
    [["backup", ":memory:", ...db], /got ":memory:"/],
    [["backup", "file:copy.db", ...db], /got "file:copy\.db"/],
    [["backup", "redis://host/0", ...db], /got "redis:\/\/host\/0"/],
  ];
  const results = await Promise.all(usage.map(([args]) => runCli(args)));
  results.forEach((result, index) => {
    const [args, message] = usage[index]!;
    assert.equal(result.code, 2, `${args.join(" ")}: ${result.stderr}`);
    assert.match(result.stderr, message);
    assert.equal(result.stderr.trim().split("\n").length, 1, result.stderr);
    assert.equal(result.stdout, "");
  });

  const target = join(tmp.dir, "taken.db");
  await Deno.writeTextFile(target, "someone else's file");
  const taken = await runCli(["backup", target, ...db]);
  assert.equal(taken.code, 1, taken.stderr);
  assert.match(
    taken.stderr,
    new RegExp(`^queue backup: Cannot back up to ${literal(target)}: the file exists`),
  );
  assert.equal(await Deno.readTextFile(target), "someone else's file");
  assert.deepEqual(
    [...Deno.readDirSync(tmp.dir)].map((entry) => entry.name).filter((name) =>
      name.includes(".partial-")
    ),
    [],
  );
});

Deno.test("backup is listed in the help, and backup --help says how to restore", async () => {
  const [overview, help] = await Promise.all([runCli(["help"]), runCli(["backup", "--help"])]);
  assert.equal(overview.code, 0, overview.stderr);
  assert.match(overview.stdout, /^ {2}backup +copy the SQLite database/m);
  assert.equal(help.code, 0, help.stderr);
  assert.match(help.stdout, /Usage: .* backup <file> \[flags\]/);
  assert.match(help.stdout, /-wal and -shm/);
  assert.match(help.stdout, /pg_dump/);
});
