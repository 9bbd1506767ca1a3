/**
 * The `move` command (docs/moving.md): it moves a queue and prints both
 * stores' counts per table side by side, exit 0; refusals exit 1 with one
 * line; bad input exits 2; `--abort` lifts the fence. What a move copies
 * and how it resumes is held by tests/moving_test.ts and
 * tests/faults/move_test.ts.
 *
 * @module
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { Queue } from "../../mod.ts";
import { tempDir } from "../_helpers.ts";
import { runCli } from "../fixtures/cli/cli_process.ts";
import { record } from "../fixtures/cli/jobs.ts";

const JOBS_URL = import.meta.resolve("../fixtures/cli/jobs.ts");

Deno.test("move --from --to moves the queue, prints each table's counts side by side and the time, and exits 0", async () => {
  await using tmp = await tempDir();
  {
    await using queue = await Queue.open({ path: tmp.dbPath, jobs: JOBS_URL });
    await queue.dispatchMany(record, Array.from({ length: 30 }, (_, n) => ({ n })));
  }
  const to = join(tmp.dir, "moved.db");
  const result = await runCli(["move", "--from", tmp.dbPath, "--to", to]);
  assert.equal(result.code, 0, result.stderr);
  assert.match(result.stdout, new RegExp(`^Moved ${tmp.dbPath} to ${to}\\n`));
  assert.match(result.stdout, /\ntable +source +left behind +destination\n/);
  assert.match(result.stdout, /\njobs +30 +30 {2}ok\n/);
  assert.match(result.stdout, /\nbatches +0 +0 {2}ok\n/);
  assert.match(
    result.stdout,
    /\nDone in \d+ ms; .* stays fenced: point the app and its workers at /,
  );
  await using moved = await Queue.open({ path: to, jobs: JOBS_URL });
  assert.equal((await moved.counts()).default?.pending, 30);

  const refused = await runCli(["move", "--from", tmp.dbPath, "--to", join(tmp.dir, "other.db")]);
  assert.equal(refused.code, 1);
  assert.match(refused.stderr, /it was moved to .*moved\.db .*move --abort/);
  assert.equal(refused.stderr.trim().split("\n").length, 1, refused.stderr);

  const lifted = await runCli(["move", "--abort", "--from", tmp.dbPath]);
  assert.equal(lifted.code, 0, lifted.stderr);
  assert.match(lifted.stdout, /^Lifted the fence of the move to .*moved\.db/);
  const again = await runCli(["move", "--abort", "--from", tmp.dbPath]);
  assert.match(again.stdout, /^No move fenced it: nothing to lift/);
  await using source = await Queue.open({ path: tmp.dbPath, jobs: JOBS_URL });
  await source.dispatch(record, { n: 99 }); // takes writes again
});

Deno.test("move refuses bad input with exit 2 and one line naming it", async () => {
  await using tmp = await tempDir();
  const cases: [string[], RegExp][] = [
    [["move", "--to", tmp.dbPath], /missing --from/],
    [["move", "--from", tmp.dbPath], /missing --to/],
    [["move", "--from", tmp.dbPath, "--to", "x.db", "--db", "y.db"], /--from and --to, not --db/],
    [["move", "--abort", "--from", tmp.dbPath, "--to", "x.db"], /--abort takes --from only/],
    [["move", "--from", tmp.dbPath, "--to", "x.db", "--wait", "soon"], /--wait .*"soon"/],
    [["move", "extra", "--from", tmp.dbPath, "--to", "x.db"], /unexpected argument "extra"/],
    [
      ["move", "--from", tmp.dbPath, "--to", "http://x"],
      /^queue move: --to must be a path, a postgres:\/\/ URL or a redis:\/\/ URL: got "http:\/\/x"/,
    ],
    [
      ["move", "--abort", "--from", "http://u:secret@x"],
      /--from must be a path, a postgres:\/\/ URL or a redis:\/\/ URL: got "http:\/\/u:\*\*\*@x"/,
    ],
  ];
  const results = await Promise.all(cases.map(([args]) => runCli(args)));
  results.forEach((result, index) => {
    const [args, message] = cases[index]!;
    assert.equal(result.code, 2, `${args.join(" ")}: ${result.stderr}`);
    assert.match(result.stderr, message, args.join(" "));
    assert.equal(result.stderr.trim().split("\n").length, 1, result.stderr);
  });
});

Deno.test("move refuses a source file that is not there, and a move to the store itself, with exit 1", async () => {
  await using tmp = await tempDir();
  const missing = await runCli(["move", "--from", join(tmp.dir, "none.db"), "--to", tmp.dbPath]);
  assert.equal(missing.code, 1);
  assert.match(missing.stderr, /no SQLite file at .*none\.db/);
  const itself = await runCli(["move", "--from", tmp.dbPath, "--to", tmp.dbPath]);
  assert.equal(itself.code, 1);
  assert.match(itself.stderr, /to the store it is in/);
});
