import assert from "node:assert/strict";
import { z } from "zod";
import type { QueueEventMap } from "../../../src/events.ts";
import { defineJob } from "../../../src/job.ts";
import { Queue } from "../../../src/queue.ts";
import { SqliteStore } from "../../../src/stores/sqlite/mod.ts";
import { ChildScript, runToEnd } from "../../_child.ts";
import { nextEvent, tempDir, within } from "../../_helpers.ts";

/** A fixture script under tests/fixtures/watch/. */
class Child extends ChildScript {
  constructor(script: string, args: readonly string[]) {
    super(new URL(`../../fixtures/watch/${script}`, import.meta.url), args);
  }
}

/** A watch listener that counts its calls and can be waited on. */
function watcher() {
  const calls: number[] = [];
  let next = Promise.withResolvers<number>();
  return {
    calls,
    listener() {
      const at = Date.now();
      calls.push(at);
      next.resolve(at);
      next = Promise.withResolvers();
    },
    /** The time of the next call, or a rejection after `ms`. */
    nextCall(ms: number): Promise<number> {
      return within(next.promise, ms, "a watch call");
    },
  };
}

Deno.test("SqliteStore.watch() calls its listener when another process commits to the file, until disposed", async () => {
  await using dir = await tempDir();
  await using store = await SqliteStore.open(dir.dbPath);
  await using child = new Child("push_jobs.ts", [dir.dbPath]);
  await child.line("ready");
  // Watching starts once the child has opened the file, so only its commits can call.
  const disposed = watcher();
  const control = watcher();
  const handle = store.watch(disposed.listener);
  using _control = store.watch(control.listener);

  const called = disposed.nextCall(30_000);
  await child.send("push\n");
  const calledAt = await called;
  const pushedAt = Number((await child.line("pushed")).split(" ")[2]);
  console.log(`watch: called ${calledAt - pushedAt} ms after the other process's push began`);
  assert.ok(calledAt >= pushedAt, "the call came before the push, so something else caused it");
  assert.equal((await store.counts(Date.now()))[0]?.pending, 1, "the job is visible here");

  handle[Symbol.dispose]();
  handle[Symbol.dispose](); // twice is harmless
  const callsBefore = disposed.calls.length;
  // The control listener shares the same file watch: when it hears the next commit, a listener
  // still registered would have been called in the same turn.
  const heard = control.nextCall(1_000);
  await child.send("push\n");
  await heard;
  await child.line("pushed");
  assert.equal(disposed.calls.length, callsBefore, "a disposed listener was called");
  assert.equal((await child.exit(10_000)).code, 0);
});

Deno.test("disposing the last watch handle closes the file watch, so a process can exit", async () => {
  await using dir = await tempDir();
  await using child = new Child("watch_then_exit.ts", [dir.dbPath, "dispose"]);
  await child.line("watched");
  // An open Deno.watchFs keeps the event loop alive: the child would never exit.
  const status = await within(child.status, 10_000, "the exit of a child whose watches ended");
  assert.equal(status.code, 0);
});

Deno.test("an in-memory store's watch never calls, opens no file watch, and disposes safely", async () => {
  // In a child: with its watches kept, the process still exits, so no watcher was opened.
  {
    await using child = new Child("watch_then_exit.ts", [":memory:", "keep"]);
    await child.line("watched");
    const status = await within(child.status, 10_000, "the exit of a child watching :memory:");
    assert.equal(status.code, 0);
  }
  await using store = await SqliteStore.open(":memory:");
  const watch = watcher();
  const handle = store.watch(watch.listener);
  const now = Date.now();
  await store.insertJobs([{
    queue: "default",
    name: "unwatched",
    payload: "null",
    priority: 0,
    availableAt: now,
    retryUntil: null,
    createdAt: now,
  }]);
  // A negative check: give a (nonexistent) file event a moment to arrive.
  await assert.rejects(watch.nextCall(100), /nothing within 100 ms/);
  assert.deepEqual(watch.calls, []);
  handle[Symbol.dispose]();
  handle[Symbol.dispose]();
});

Deno.test("a worker polling every 2 min picks up a job another process dispatched before its next poll", async () => {
  await using dir = await tempDir();
  const watched = defineJob({ name: "watched", schema: z.null(), handle() {} });
  await using queue = await Queue.open({ path: dir.dbPath, jobs: [watched] });
  await using child = new Child("push_jobs.ts", [dir.dbPath, "watched"]);
  await child.line("ready");
  // work() runs its first claim before it returns: from here the worker sleeps for 2 min.
  await using worker = queue.work({ pollMs: 120_000, graceMs: 1_000 });
  // Far within the poll interval: the WAL watch, not the poll, woke it.
  const started = nextEvent<QueueEventMap["job:start"]>(worker, "job:start", () => true, 60_000);
  const completed = nextEvent<QueueEventMap["job:complete"]>(worker, "job:complete");
  await child.send("push\n");
  const startedAt = await started.then(() => Date.now());
  const [, id, pushedAt] = (await child.line("pushed")).split(" ").map(Number);
  const pickupMs = startedAt - pushedAt!;
  console.log(`cross-process pick-up with pollMs 10000: ${pickupMs} ms`);
  assert.equal((await completed).id, id);
  assert.equal((await child.exit(10_000)).code, 0);
});

Deno.test("SQLite: a queue opened on a relative path watches and empties its own WAL after Deno.chdir(): a worker is woken by another connection's dispatch, and the quiet WAL is emptied", async () => {
  await using dir = await tempDir();
  await using elsewhere = await tempDir();
  const end = await runToEnd(
    new URL("../../fixtures/watch/relative_path_chdir.ts", import.meta.url),
    [dir.dir, elsewhere.dir],
    { timeoutMs: 180_000 },
  );
  assert.equal(end.code, 0, end.stderr);
  assert.equal(end.stdout, "woken\nemptied\n");
  assert.deepEqual([...Deno.readDirSync(elsewhere.dir)], [], "nothing was made elsewhere");
});
