import assert from "node:assert/strict";
import { z } from "zod";
import { type QueueEventMap, QueueEventTarget } from "../src/events.ts";
import { defineJob } from "../src/job.ts";
import { Queue } from "../src/queue.ts";
import { workUntilEmpty } from "../src/testing.ts";
import { ManualClock, nextEvent } from "./_helpers.ts";
import { captureConsoleError, events, gate, record } from "./fixtures/runner/harness.ts";

type Detail<K extends keyof QueueEventMap> = QueueEventMap[K];

const startDetail = { id: 1, name: "job", queue: "default", attempt: 1 };

// QueueEventTarget on its own

Deno.test("QueueEventTarget.emit() sends a CustomEvent with the detail to each listener", () => {
  const target = new QueueEventTarget();
  const seen: Detail<"job:start">[] = [];
  target.addEventListener("job:start", (event) => seen.push(event.detail));
  target.emit("job:start", startDetail);
  assert.deepEqual(seen, [startDetail]);
});

Deno.test("QueueEventTarget.emit() also sends every event to the target it forwards to", () => {
  const parent = new QueueEventTarget();
  const child = new QueueEventTarget(parent);
  const onParent = record<Detail<"job:start">>(parent, "job:start");
  const onChild = record<Detail<"job:start">>(child, "job:start");
  child.emit("job:start", startDetail);
  assert.deepEqual(onParent, [startDetail]);
  assert.deepEqual(onChild, [startDetail]);
  assert.ok(child.hasListeners("job:start"));
});

Deno.test("a listener that throws becomes a queue:error and the other listeners still run", () => {
  const target = new QueueEventTarget();
  const errors = record<Detail<"queue:error">>(target, "queue:error");
  let after = 0;
  target.addEventListener("job:start", () => {
    throw new Error("listener bug");
  });
  target.addEventListener("job:start", () => after++);
  target.emit("job:start", startDetail);
  assert.equal(after, 1);
  assert.equal(errors.length, 1);
  assert.equal(errors[0]!.during, "a listener of job:start");
  assert.equal(errors[0]!.error.message, "listener bug");
});

Deno.test("a listener that throws a non-Error is reported with an Error", () => {
  const target = new QueueEventTarget();
  const errors = record<Detail<"queue:error">>(target, "queue:error");
  target.addEventListener("job:start", () => {
    throw "plain string";
  });
  target.emit("job:start", startDetail);
  assert.ok(errors[0]!.error instanceof Error);
  assert.match(errors[0]!.error.message, /plain string/);
});

Deno.test("a queue:error listener that throws is logged to stderr, not sent again", () => {
  const target = new QueueEventTarget();
  let calls = 0;
  target.addEventListener("queue:error", () => {
    calls++;
    throw new Error("error listener bug");
  });
  const logged = captureConsoleError(() =>
    target.emit("queue:error", { error: new Error("x"), during: "claim" })
  );
  assert.equal(calls, 1);
  assert.equal(logged.length, 1);
  assert.match(String(logged[0]![0]), /a listener of queue:error/);
});

Deno.test("a queue:error nobody listens to is logged to stderr with where it happened", () => {
  const target = new QueueEventTarget();
  const error = new Error("disk full");
  const logged = captureConsoleError(() => target.emit("queue:error", { error, during: "settle" }));
  assert.equal(logged.length, 1);
  assert.match(String(logged[0]![0]), /settle/);
  assert.equal(logged[0]![1], error);
});

Deno.test("an object with handleEvent can listen", () => {
  const target = new QueueEventTarget();
  const seen: unknown[] = [];
  target.addEventListener("job:start", { handleEvent: (event) => seen.push(event.type) });
  target.emit("job:start", startDetail);
  assert.deepEqual(seen, ["job:start"]);
});

Deno.test("removeEventListener() stops a listener, only for the event it names", () => {
  const target = new QueueEventTarget();
  const seen: string[] = [];
  const listener = (event: Event) => seen.push(event.type);
  target.addEventListener("job:start", listener);
  target.addEventListener("job:complete", listener);
  target.emit("job:start", startDetail);
  target.removeEventListener("job:start", listener);
  target.emit("job:start", startDetail);
  target.emit("job:complete", { ...startDetail, durationMs: 1 });
  assert.deepEqual(seen, ["job:start", "job:complete"]);
  target.removeEventListener("job:start", () => {}); // never added: a no-op
});

Deno.test("hasListeners() is false again once the last listener is removed", () => {
  const target = new QueueEventTarget();
  const listener = () => {};
  assert.equal(target.hasListeners("job:start"), false);
  target.addEventListener("job:start", listener);
  assert.equal(target.hasListeners("job:start"), true);
  target.removeEventListener("job:start", listener);
  assert.equal(target.hasListeners("job:start"), false);
});

Deno.test("a queue:error is still logged to stderr after its only listener was removed", () => {
  const target = new QueueEventTarget();
  const listener = () => {};
  target.addEventListener("queue:error", listener);
  target.removeEventListener("queue:error", listener);
  const logged = captureConsoleError(() =>
    target.emit("queue:error", { error: new Error("lost?"), during: "claim" })
  );
  assert.equal(logged.length, 1, "the error vanished: nobody listens and nothing was logged");
});

Deno.test("a queue:error delivered to a listener that then removes itself is not also logged", () => {
  const target = new QueueEventTarget();
  const heard: string[] = [];
  const listener = (event: CustomEvent<Detail<"queue:error">>) => {
    heard.push(event.detail.during);
    target.removeEventListener("queue:error", listener);
  };
  target.addEventListener("queue:error", listener);
  const logged = captureConsoleError(() =>
    target.emit("queue:error", { error: new Error("once"), during: "claim" })
  );
  assert.deepEqual(heard, ["claim"]);
  assert.equal(logged.length, 0);
});

// Through a queue and its worker

const quick = defineJob({
  name: "quick",
  schema: z.object({ n: z.number() }),
  async handle() {
    await new Promise((resolve) => setTimeout(resolve, 20));
  },
});

const flaky = defineJob({
  name: "flaky",
  schema: z.null(),
  maxAttempts: 2,
  backoff: [5_000],
  jitter: 0,
  handle(_payload, ctx) {
    throw new Error(`flaky attempt ${ctx.attempt}`);
  },
});

Deno.test("job:queued carries the id, queue and due time of each dispatched job", async () => {
  const clock = new ManualClock();
  await using queue = await Queue.open({ path: ":memory:", jobs: [quick], clock });
  const queued = record<Detail<"job:queued">>(queue, "job:queued");
  const id = await queue.dispatch(quick, { n: 1 }, { delayMs: 250, queue: "mail" });
  assert.deepEqual(queued, [{
    id,
    name: "quick",
    queue: "mail",
    attempt: 0,
    availableAt: clock.now() + 250,
  }]);
});

Deno.test("job:start, job:complete and worker:stop reach both the runner and its queue", async () => {
  await using queue = await Queue.open({ path: ":memory:", jobs: [quick] });
  const id = await queue.dispatch(quick, { n: 1 });
  const worker = queue.work({ stopWhenEmpty: true, pollMs: 5 });
  const onWorker = {
    start: record<Detail<"job:start">>(worker, "job:start"),
    complete: record<Detail<"job:complete">>(worker, "job:complete"),
    stop: record<Detail<"worker:stop">>(worker, "worker:stop"),
  };
  const onQueue = {
    start: record<Detail<"job:start">>(queue, "job:start"),
    complete: record<Detail<"job:complete">>(queue, "job:complete"),
    stop: record<Detail<"worker:stop">>(queue, "worker:stop"),
  };
  await worker.done;
  for (const seen of [onWorker, onQueue]) {
    assert.deepEqual(seen.start, [{ id, name: "quick", queue: "default", attempt: 1 }]);
    assert.equal(seen.complete.length, 1);
    const { durationMs, ...rest } = seen.complete[0]!;
    assert.deepEqual(rest, { id, name: "quick", queue: "default", attempt: 1 });
    assert.ok(durationMs >= 15, `durationMs ${durationMs}`);
    assert.deepEqual(seen.stop, [{ completed: 1, failed: 0, retried: 0, reason: "empty" }]);
  }
  assert.deepEqual(onWorker.stop[0], { ...worker.stats, reason: worker.stopReason });
});

Deno.test("job:retry carries the error and delay; job:failed the error and the attempts", async () => {
  const clock = new ManualClock();
  await using queue = await Queue.open({ path: ":memory:", jobs: [flaky], clock });
  const id = await queue.dispatch(flaky, null);
  const retries = record<Detail<"job:retry">>(queue, "job:retry");
  const failures = record<Detail<"job:failed">>(queue, "job:failed");
  await workUntilEmpty(queue);
  clock.advance(5_000);
  const worker = queue.work({ stopWhenEmpty: true, pollMs: 5 });
  const failuresOnWorker = record<Detail<"job:failed">>(worker, "job:failed");
  await worker.done;
  assert.equal(retries.length, 1);
  assert.equal(retries[0]!.id, id);
  assert.equal(retries[0]!.attempt, 1);
  assert.equal(retries[0]!.delayMs, 5_000);
  assert.equal(retries[0]!.error?.message, "flaky attempt 1");
  assert.equal(failures.length, 1);
  assert.equal(failures[0]!.attempt, 2);
  assert.equal(failures[0]!.error.message, "flaky attempt 2");
  assert.deepEqual(failuresOnWorker, failures);
});

Deno.test("a job event listener that throws never stops the worker and becomes a queue:error", async () => {
  await using queue = await Queue.open({ path: ":memory:", jobs: [quick] });
  await queue.dispatchMany(quick, [{ n: 1 }, { n: 2 }, { n: 3 }]);
  const errors = record<Detail<"queue:error">>(queue, "queue:error");
  const worker = queue.work({ stopWhenEmpty: true, pollMs: 5 });
  worker.addEventListener("job:start", () => {
    throw new Error("listener bug");
  });
  queue.addEventListener("job:complete", () => {
    throw new Error("queue listener bug");
  });
  await worker.done;
  assert.equal(worker.stats.completed, 3);
  assert.equal(errors.filter((e) => e.during === "a listener of job:start").length, 3);
  assert.equal(errors.filter((e) => e.during === "a listener of job:complete").length, 3);
});

Deno.test("a listener removed from the queue hears nothing more", async () => {
  await using queue = await Queue.open({ path: ":memory:", jobs: [quick] });
  const heard: number[] = [];
  const listener = (event: CustomEvent<Detail<"job:complete">>) => heard.push(event.detail.id);
  queue.addEventListener("job:complete", listener);
  const [first] = await queue.dispatchMany(quick, [{ n: 1 }]);
  await workUntilEmpty(queue);
  queue.removeEventListener("job:complete", listener);
  await queue.dispatch(quick, { n: 2 });
  const stats = await workUntilEmpty(queue);
  assert.equal(stats.completed, 1);
  assert.deepEqual(heard, [first]);
});

Deno.test("worker:stop fires once per worker, after its last job event", async () => {
  const release = gate();
  const held = defineJob({
    name: "held",
    schema: z.null(),
    async handle() {
      await release.promise;
    },
  });
  await using queue = await Queue.open({ path: ":memory:", jobs: [held] });
  await queue.dispatch(held, null);
  const order: string[] = [];
  const worker = queue.work({ pollMs: 5 });
  for (const type of ["job:start", "job:complete", "worker:stop"]) {
    worker.addEventListener(type, () => order.push(type));
  }
  await nextEvent(worker, "job:start");
  const stopped = events(queue, "worker:stop", 1);
  const stopping = worker.stop();
  release.resolve();
  await stopping;
  await stopped;
  await worker.stop(); // a second stop sends nothing more
  assert.deepEqual(order, ["job:start", "job:complete", "worker:stop"]);
});

// Listeners that remove themselves: once, AbortSignal, async

Deno.test("a { once: true } listener and one removed by its AbortSignal stop counting as listening", () => {
  const target = new QueueEventTarget();
  const heard: string[] = [];
  const onStart = () => heard.push("start");
  target.addEventListener("job:start", onStart, { once: true });
  target.addEventListener("queue:error", () => heard.push("once"), { once: true });
  const controller = new AbortController();
  target.addEventListener("queue:error", () => heard.push("signal"), {
    signal: controller.signal,
  });
  const whileHeard = captureConsoleError(() => {
    target.emit("job:start", startDetail);
    target.emit("job:start", startDetail);
    target.emit("queue:error", { error: new Error("heard"), during: "claim" });
  });
  assert.deepEqual(heard, ["start", "once", "signal"]);
  assert.equal(whileHeard.length, 0);
  assert.equal(target.hasListeners("job:start"), false, "a once listener still counted");
  assert.equal(target.hasListeners("queue:error"), true, "the signal listener is still there");
  controller.abort();
  assert.equal(target.hasListeners("queue:error"), false, "an aborted listener still counted");

  // Nobody listens any more: the error must reach stderr, not vanish.
  const original = console.error;
  const logged: unknown[][] = [];
  console.error = (...args: unknown[]) => logged.push(args);
  try {
    target.emit("queue:error", { error: new Error("unheard"), during: "settle" });
  } finally {
    console.error = original;
  }
  assert.equal(logged.length, 1, "a queue:error with nobody listening was not logged");
  assert.match(String(logged[0]![0]), /settle/);
  assert.deepEqual(heard, ["start", "once", "signal"]);

  // The same function can listen once again after it was heard.
  target.addEventListener("job:start", onStart, { once: true });
  target.emit("job:start", startDetail);
  assert.deepEqual(heard, ["start", "once", "signal", "start"]);
});

Deno.test("a listener added with an already aborted signal is neither called nor counted", () => {
  const target = new QueueEventTarget();
  let calls = 0;
  target.addEventListener("queue:error", () => calls++, { signal: AbortSignal.abort() });
  assert.equal(target.hasListeners("queue:error"), false);
  const logged = captureConsoleError(() =>
    target.emit("queue:error", { error: new Error("unheard"), during: "claim" })
  );
  assert.equal(calls, 0);
  assert.equal(logged.length, 1, "a queue:error with nobody listening was not logged");
});

Deno.test("an async listener that rejects becomes a queue:error and the worker keeps running", async () => {
  await using queue = await Queue.open({ path: ":memory:", jobs: [quick] });
  const ids = await queue.dispatchMany(quick, [{ n: 1 }, { n: 2 }]);
  const reported = events<Detail<"queue:error">>(
    queue,
    "queue:error",
    2,
    (detail) => detail.during === "a listener of job:start",
  );
  queue.addEventListener("job:start", async (event) => {
    await Promise.resolve();
    throw new Error(`async listener bug ${event.detail.id}`);
  });
  const worker = queue.work({ stopWhenEmpty: true, pollMs: 5 });
  await worker.done;
  assert.deepEqual(worker.stats, { completed: 2, failed: 0, retried: 0 });
  const errors = await reported;
  assert.deepEqual(
    errors.map((detail) => detail.error.message).sort(),
    ids.map((id) => `async listener bug ${id}`).sort(),
  );
});

Deno.test("an async queue:error listener that rejects is logged to stderr, not sent again", async () => {
  const target = new QueueEventTarget();
  let calls = 0;
  target.addEventListener("queue:error", async () => {
    calls++;
    await Promise.resolve();
    throw new Error("async error listener bug");
  });
  const original = console.error;
  const logged = Promise.withResolvers<unknown[]>();
  console.error = (...args: unknown[]) => logged.resolve(args);
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    target.emit("queue:error", { error: new Error("x"), during: "claim" });
    const args = await Promise.race([
      logged.promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error("nothing logged within 2 s")), 2_000);
      }),
    ]);
    assert.match(String(args[0]), /a listener of queue:error/);
    assert.equal((args[1] as Error).message, "async error listener bug");
  } finally {
    clearTimeout(timer);
    console.error = original;
  }
  assert.equal(calls, 1);
});
