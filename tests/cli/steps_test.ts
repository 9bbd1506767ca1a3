/**
 * The durable-step commands of the CLI (`steps <id>` and `signal <id>
 * <name> [json]`), run as real child processes on a SQLite file whose
 * steps this test records through the store, as a worker records them.
 *
 * @module
 */
import assert from "node:assert/strict";
import { z } from "zod";
import { defineJob, generateAppKey, Queue } from "../../mod.ts";
import { signalSealedAs, stepSealedAs } from "../../src/admin/steps.ts";
import { isEncryptedPayload } from "../../src/encryption.ts";
import { SqliteStore } from "../../src/stores/sqlite/mod.ts";
import { cipherOf, tempDir } from "../_helpers.ts";
import { runCli } from "../fixtures/cli/cli_process.ts";
import { recordSteps, stepMemo } from "../fixtures/steps/recorded_steps.ts";

const onboard = defineJob({ name: "cli.onboard", schema: z.null(), queue: "a", handle() {} });
const sealed = defineJob({
  name: "cli.sealed",
  schema: z.null(),
  queue: "b",
  encrypted: true,
  handle() {},
});
const HOUR_MS = 3_600_000;

Deno.test("steps <id> prints each recorded step: seq, key, kind, state, attempt, duration, output; an encrypted output as (encrypted)", async () => {
  await using tmp = await tempDir();
  const appKey = generateAppKey();
  const store = await SqliteStore.open(tmp.dbPath);
  await using queue = await Queue.open({ store, jobs: [onboard, sealed], appKey });
  const cipher = await cipherOf(appKey);

  const plain = await queue.dispatch(onboard, null);
  await recordSteps(store, "a", plain, [
    stepMemo(1, "create-account", '{"email":"ada@example.com"}', 1_500),
    stepMemo(2, "send", '"\\u001b[31mred"'),
    stepMemo(3, "send#2", "2"),
    stepMemo(4, "\x1b[2Jclear", "null"),
  ], { kind: "sleep", seq: 5, key: "cool-off", until: Date.now() + HOUR_MS });
  const hidden = await queue.dispatch(sealed, null);
  const secret = await cipher.encrypt(stepSealedAs(hidden, "pin"), '{"pin":"0000-secret"}');
  await recordSteps(store, "b", hidden, [stepMemo(1, "pin", secret)], {
    kind: "wait",
    seq: 2,
    key: "survey",
    until: Date.now() + 24 * HOUR_MS,
  });

  const db = ["--db", tmp.dbPath];
  const shown = await runCli(["steps", String(plain), ...db]);
  assert.equal(shown.code, 0, shown.stderr);
  const lines = shown.stdout.trimEnd().split("\n");
  assert.match(lines[0]!, /^seq\s+key\s+kind\s+state\s+attempt\s+duration\s+output$/);
  assert.match(
    lines[2]!,
    /^\s*1\s+create-account\s+step\s+done\s+1\s+1\.5 s\s+\{"email":"ada@example\.com"\}$/,
  );
  assert.match(lines[3]!, /^\s*2\s+send\s+step\s+done\s+1\s+12 ms\s+"\\u001b\[31mred"$/);
  assert.match(lines[4]!, /^\s*3\s+send#2\s+step\s+done\s+1\s+12 ms\s+2$/);
  assert.match(lines[5]!, /^\s*4\s+\\x1b\[2Jclear\s+step\s+done\s+1\s+12 ms\s+null$/);
  assert.match(
    lines[6]!,
    /^\s*5\s+cool-off\s+sleep\s+sleeping until \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\s+1\s+-$/,
  );
  assert.equal(lines.length, 7);
  assert.ok(!shown.stdout.includes("\x1b"), "no control character reaches the terminal");

  const sealedRun = await runCli(["steps", String(hidden), ...db]);
  assert.equal(sealedRun.code, 0, sealedRun.stderr);
  assert.match(sealedRun.stdout, /1\s+pin\s+step\s+done\s+1\s+12 ms\s+\(encrypted\)/);
  assert.match(sealedRun.stdout, /2\s+survey\s+wait\s+parked until \d{4}-\d\d-\d\d/);
  assert.ok(!sealedRun.stdout.includes("0000-secret"), "the CLI never opens a step's output");

  const json = await runCli(["steps", String(hidden), "--json", ...db]);
  assert.equal(json.code, 0, json.stderr);
  const listed = JSON.parse(json.stdout);
  assert.deepEqual(listed.map((step: { key: string }) => step.key), ["pin", "survey"]);
  assert.equal(listed[0].encrypted, true);
  assert.equal("output" in listed[0], false);
  assert.equal(listed[1].state, "parked");

  const none = await runCli(["steps", "999", ...db]);
  assert.equal(none.code, 1, none.stdout);
  assert.match(none.stderr, /^queue steps: no job 999 \(it never was, or it ended/);
  const bad = await runCli(["steps", "x", ...db]);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /a job id must be a positive whole number: got "x"/);
});

Deno.test("signal <id> <name> [json] prints delivered for a job waiting for it, buffered for one that is not; finished and not-found exit 1", async () => {
  await using tmp = await tempDir();
  const store = await SqliteStore.open(tmp.dbPath);
  await using queue = await Queue.open({ store, jobs: [onboard] });
  const db = ["--db", tmp.dbPath];

  const waiting = await queue.dispatch(onboard, null);
  await recordSteps(store, "a", waiting, [stepMemo(1, "create-account", "{}")], {
    kind: "wait",
    seq: 2,
    key: "survey",
    until: null,
  });
  const delivered = await runCli(["signal", String(waiting), "survey", '{"score": 9}', ...db]);
  assert.equal(delivered.code, 0, delivered.stderr);
  assert.match(delivered.stdout, new RegExp(`^delivered: job ${waiting} was waiting for "survey"`));
  const mailbox = (await store.jobSteps(waiting)).signals;
  assert.deepEqual(mailbox.map(({ name, payload }) => ({ name, payload })), [
    { name: "survey", payload: '{"score":9}' },
  ]);
  assert.equal((await queue.jobs()).jobs.find((job) => job.id === waiting)?.state, "pending");

  const pending = await queue.dispatch(onboard, null, { delayMs: HOUR_MS });
  const buffered = await runCli(["signal", String(pending), "survey", ...db]);
  assert.equal(buffered.code, 0, buffered.stderr);
  assert.match(buffered.stdout, new RegExp(`^buffered: kept in job ${pending}'s mailbox`));
  assert.deepEqual((await store.jobSteps(pending)).signals.map((row) => row.payload), ["null"]);

  assert.equal(await queue.cancel(pending), "cancelled");
  const finished = await runCli(["signal", String(pending), "survey", "1", ...db]);
  assert.equal(finished.code, 1);
  assert.match(finished.stderr, new RegExp(`finished: job ${pending} has already ended`));
  const unknown = await runCli(["signal", "999", "survey", ...db]);
  assert.equal(unknown.code, 1);
  assert.match(unknown.stderr, /not-found: no job 999/);
  assert.deepEqual((await store.jobSteps(999)).signals, []);
});

Deno.test("signal seals the payload with APP_KEY for an encrypted job, refuses one without APP_KEY, and sends others as they are", async () => {
  await using tmp = await tempDir();
  const appKey = generateAppKey();
  const store = await SqliteStore.open(tmp.dbPath);
  await using queue = await Queue.open({ store, jobs: [onboard, sealed], appKey });
  const db = ["--db", tmp.dbPath];
  const hidden = await queue.dispatch(sealed, null);
  const plain = await queue.dispatch(onboard, null);

  const refused = await runCli(["signal", String(hidden), "survey", '{"score":3}', ...db]);
  assert.equal(refused.code, 1);
  assert.match(refused.stderr, new RegExp(`job ${hidden} is encrypted, .*set APP_KEY`));
  assert.deepEqual((await store.jobSteps(hidden)).signals, []);

  const run = await runCli(["signal", String(hidden), "survey", '{"score":3}', ...db], {
    APP_KEY: appKey,
  });
  assert.equal(run.code, 0, run.stderr);
  const [row] = (await store.jobSteps(hidden)).signals;
  assert.ok(row !== undefined && isEncryptedPayload(row.payload), "stored sealed");
  const cipher = await cipherOf(appKey);
  assert.equal(await cipher.decrypt(signalSealedAs(hidden, "survey"), row.payload), '{"score":3}');

  const open = await runCli(["signal", String(plain), "survey", '{"score":4}', ...db], {
    APP_KEY: appKey,
  });
  assert.equal(open.code, 0, open.stderr);
  assert.deepEqual((await store.jobSteps(plain)).signals.map((signal) => signal.payload), [
    '{"score":4}',
  ]);
});

Deno.test("signal refuses bad input with exit 2, naming the argument, and stores nothing", async () => {
  await using tmp = await tempDir();
  const store = await SqliteStore.open(tmp.dbPath);
  await using queue = await Queue.open({ store, jobs: [onboard] });
  const id = String(await queue.dispatch(onboard, null));
  const cases: [args: string[], message: RegExp][] = [
    [["signal", "x", "survey"], /a job id must be a positive whole number: got "x"/],
    [["signal", "0", "survey"], /a job id must be a positive whole number: got "0"/],
    [["signal", id], /missing <id> and <name>/],
    [["signal", id, "survey", "1", "2"], /unexpected argument "2"/],
    [["signal", id, "a#b"], /<name> must not contain "#" .*got "a#b"/],
    [["signal", id, "n".repeat(256)], /<name> must be a string of 1 to 255 characters/],
    [["signal", id, "survey", "{bad"], /\[json\] is not JSON: .*got "\{bad"/],
    [["signal", id, "survey", "hello"], /\[json\] is not JSON: .*got "hello"/],
    [["signal", id, "survey", "1e400"], /\[json\] does not survive JSON: .*Infinity/],
  ];
  for (const [args, message] of cases) {
    const run = await runCli([...args, "--db", tmp.dbPath]);
    assert.equal(run.code, 2, `${args.join(" ").slice(0, 60)}: ${run.stderr}`);
    assert.match(run.stderr, message);
    assert.match(run.stderr, /^queue signal: .*\(see signal --help\)\n$/);
  }
  assert.deepEqual((await store.jobSteps(Number(id))).signals, []);
});
