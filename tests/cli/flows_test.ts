/**
 * The flow commands of the CLI (`flows`, `flow <id>`), run as real child
 * processes on a database this test fills through the queue.
 *
 * @module
 */
import assert from "node:assert/strict";
import { z } from "zod";
import { defineJob, PermanentError, Queue } from "../../mod.ts";
import { workUntilEmpty } from "../../src/testing.ts";
import { ManualClock, tempDir } from "../_helpers.ts";
import { runCli } from "../fixtures/cli/cli_process.ts";

const failing = new Set<string>();
const step = defineJob({
  name: "cli.flow-step",
  schema: z.object({ label: z.string() }),
  handle({ label }) {
    if (failing.has(label)) throw new PermanentError(`${label} broke`);
  },
});

/** `2026-01-01 00:00:00` for a time in ms. */
function shown(ms: number): string {
  return new Date(ms).toISOString().replace("T", " ").slice(0, 19);
}

Deno.test("flows prints a table of flows newest first with their node counts; flow <id> prints each node; both take --json; an unknown id exits 1", async () => {
  await using tmp = await tempDir();
  const clock = new ManualClock();
  await using queue = await Queue.open({ path: tmp.dbPath, jobs: [step], clock });
  failing.add("b");
  const broken = queue.flow("nightly");
  const a = broken.add(step, { label: "a" }, { key: "a" });
  const b = broken.add(step, { label: "b" }, { key: "b", after: [a] });
  broken.add(step, { label: "c" }, { key: "c", after: [b] });
  const brokenId = await broken.dispatch();
  await workUntilEmpty(queue, { executor: "isolate" });
  const waiting = queue.flow("later");
  waiting.add(step, { label: "x" }, { key: "x", after: ["y"] });
  waiting.add(step, { label: "y" }, { key: "y" });
  const waitingId = await waiting.dispatch();
  const db = ["--db", tmp.dbPath];

  const [table, one, json, missing] = await Promise.all([
    runCli(["flows", ...db]),
    runCli(["flow", String(brokenId), ...db]),
    runCli(["flow", String(waitingId), "--json", ...db]),
    runCli(["flow", "999", ...db]),
  ]);

  assert.equal(table.code, 0, table.stderr);
  const [header, , ...rows] = table.stdout.trimEnd().split("\n");
  assert.match(header!, /^id +name +state +nodes +succeeded +failed +skipped +left +created at$/);
  const at = shown(clock.now());
  assert.equal(rows.length, 2);
  assert.match(rows[0]!, new RegExp(`^ *${waitingId}  later +running +2 +0 +0 +0 +2 +${at}$`));
  assert.match(rows[1]!, new RegExp(`^ *${brokenId}  nightly +failed +3 +1 +1 +1 +0 +${at}$`));

  assert.equal(one.code, 0, one.stderr);
  const [title, nodeHeader, , ...nodes] = one.stdout.trimEnd().split("\n");
  assert.equal(title, `Flow ${brokenId} "nightly": failed, created ${at}`);
  assert.match(nodeHeader!, /^key +job +state +job id +after +error$/);
  assert.match(nodes[0]!, /^a +cli\.flow-step +succeeded +\d+ +- *$/);
  assert.match(nodes[1]!, /^b +cli\.flow-step +failed +\d+ +a +PermanentError: b broke$/);
  assert.match(nodes[2]!, /^c +cli\.flow-step +skipped +- +b *$/);

  assert.equal(json.code, 0, json.stderr);
  const status = JSON.parse(json.stdout);
  assert.equal(status.state, "running");
  assert.deepEqual(
    status.nodes.map((node: { key: string; state: string }) => [node.key, node.state]),
    [["y", "pending"], ["x", "waiting"]],
  );

  assert.equal(missing.code, 1);
  assert.match(missing.stderr, /queue flow: no flow 999/);
});

Deno.test("prune-flows deletes the flows that ended more than --hours ago and says how many", async () => {
  await using tmp = await tempDir();
  // The CLI goes by the real clock: the old flow is dispatched 3 hours before it, the fresh one now.
  const clock = new ManualClock(Date.now() - 3 * 3_600_000);
  await using queue = await Queue.open({ path: tmp.dbPath, jobs: [step], clock });
  const old = queue.flow("old");
  old.add(step, { label: "o" });
  const oldId = await old.dispatch();
  await workUntilEmpty(queue, { executor: "isolate" });
  clock.advance(3 * 3_600_000);
  const fresh = queue.flow("fresh");
  fresh.add(step, { label: "f" });
  const freshId = await fresh.dispatch();
  await workUntilEmpty(queue, { executor: "isolate" });

  const pruned = await runCli(["prune-flows", "--hours", "2", "--db", tmp.dbPath]);
  assert.equal(pruned.code, 0, pruned.stderr);
  assert.equal(pruned.stdout.trim(), "Deleted 1 flow that ended more than 2 hours ago");
  assert.equal(await queue.flowStatus(oldId), null);
  assert.equal((await queue.flowStatus(freshId))?.state, "succeeded");
});
