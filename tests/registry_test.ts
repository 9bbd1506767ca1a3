import assert from "node:assert/strict";
import { relative } from "node:path";
import { fileURLToPath } from "node:url";
import { z } from "zod";
import { defineJob, type JobDefinition, Queue } from "../mod.ts";
import { workUntilEmpty } from "../src/testing.ts";
import { alwaysFails, received, recordOrder } from "./fixtures/queue/jobs.ts";

const JOBS_URL = import.meta.resolve("./fixtures/queue/jobs.ts");

Deno.test("Queue.open() loads the job definitions a jobs module exports", async () => {
  await using queue = await Queue.open({ path: ":memory:", jobs: JOBS_URL });
  const before = received.length;
  await queue.dispatch(recordOrder, { orderId: 41 });
  await queue.dispatch(alwaysFails, { n: 1 });
  // In this isolate, so the handler's record is visible here (a Web Worker has its own).
  const stats = await workUntilEmpty(queue, { executor: "isolate" });
  assert.deepEqual(stats, { completed: 1, failed: 1, retried: 0 });
  assert.deepEqual(received.slice(before), [{ orderId: 41 }]);
});

Deno.test("Queue.open() takes the jobs module as a URL object too", async () => {
  await using queue = await Queue.open({ path: ":memory:", jobs: new URL(JOBS_URL) });
  assert.equal(typeof await queue.dispatch(recordOrder, { orderId: 1 }), "number");
});

Deno.test("Queue.open() skips a jobs module's exports that are not jobs", async () => {
  const fixture = await import(JOBS_URL);
  await using queue = await Queue.open({ path: ":memory:", jobs: JOBS_URL });
  await assert.rejects(
    queue.dispatch(fixture.notAJob as JobDefinition, {} as never),
    /not a job registered with this queue/,
  );
});

Deno.test("Queue.open() refuses a jobs module that exports no job", async () => {
  const url = import.meta.resolve("./fixtures/queue/no_jobs.ts");
  await assert.rejects(Queue.open({ path: ":memory:", jobs: url }), (error: unknown) => {
    assert.ok(error instanceof Error);
    assert.ok(error.message.includes(url), error.message);
    assert.match(error.message, /exports no job: export the results of defineJob\(\)/);
    return true;
  });
});

Deno.test("Queue.open() refuses a jobs module with two different jobs of one name", async () => {
  const url = import.meta.resolve("./fixtures/queue/duplicate_jobs.ts");
  await assert.rejects(
    Queue.open({ path: ":memory:", jobs: url }),
    /Two different jobs are named "fixture\.dup": names must be unique/,
  );
});

Deno.test("Queue.open() refuses a jobs module it cannot import, naming it", async () => {
  const url = import.meta.resolve("./fixtures/queue/missing_module.ts");
  await assert.rejects(Queue.open({ path: ":memory:", jobs: url }), (error: unknown) => {
    assert.ok(error instanceof Error);
    assert.match(error.message, /^Cannot import the jobs module /);
    assert.ok(error.message.includes("missing_module.ts"), error.message);
    return true;
  });
});

Deno.test("Queue.open() refuses an array holding something that is not a job", async () => {
  const copy = { ...recordOrder };
  for (const jobs of [[recordOrder, copy], [recordOrder, null], [recordOrder, "send-receipt"]]) {
    await assert.rejects(
      Queue.open({ path: ":memory:", jobs: jobs as JobDefinition[] }),
      (error: unknown) => {
        assert.ok(error instanceof TypeError);
        assert.equal(
          error.message,
          "jobs[1] is not a job or a schedule: make it with defineJob() or defineSchedule()",
        );
        return true;
      },
    );
  }
});

Deno.test("Queue.open() refuses two different jobs of one name in an array", async () => {
  const a = defineJob({ name: "same-name", schema: z.null(), handle() {} });
  const b = defineJob({ name: "same-name", schema: z.null(), handle() {} });
  await assert.rejects(
    Queue.open({ path: ":memory:", jobs: [a, b] }),
    /Two different jobs are named "same-name"/,
  );
});

Deno.test("Queue.open() accepts the same definition listed twice", async () => {
  await using queue = await Queue.open({ path: ":memory:", jobs: [recordOrder, recordOrder] });
  assert.equal(typeof await queue.dispatch(recordOrder, { orderId: 2 }), "number");
});

Deno.test("Queue.open() refuses jobs that are neither a URL nor an array", async () => {
  for (const jobs of [undefined, {}, 42]) {
    await assert.rejects(
      Queue.open({ path: ":memory:", jobs: jobs as unknown as JobDefinition[] }),
      (error: unknown) => {
        assert.ok(error instanceof TypeError);
        assert.match(error.message, /jobs must be a jobs module URL or an array/);
        return true;
      },
    );
  }
});

Deno.test("A worker takes jobs from every queue the registered jobs name by default", async () => {
  const ran: string[] = [];
  const mail = defineJob({
    name: "mail",
    queue: "mail",
    schema: z.null(),
    handle: () => void ran.push("mail"),
  });
  const report = defineJob({
    name: "report",
    queue: "reports",
    schema: z.null(),
    handle: () => void ran.push("report"),
  });
  const plain = defineJob({
    name: "plain",
    schema: z.null(),
    handle: () => void ran.push("plain"),
  });
  await using queue = await Queue.open({ path: ":memory:", jobs: [mail, report, plain] });
  await queue.dispatch(report, null);
  await queue.dispatch(mail, null);
  await queue.dispatch(plain, null);
  const stats = await workUntilEmpty(queue);
  assert.equal(stats.completed, 3);
  assert.deepEqual(ran, ["plain", "mail", "report"], "default first, then by queue name");
});

Deno.test("Queue.open() resolves a relative jobs path against the current folder, not the library's", async () => {
  const path = relative(Deno.cwd(), fileURLToPath(JOBS_URL));
  assert.ok(!path.startsWith("/") && !/^[a-z]+:/i.test(path), path);
  await using queue = await Queue.open({ path: ":memory:", jobs: `./${path}` });
  assert.equal(typeof await queue.dispatch(recordOrder, { orderId: 2 }), "number");
});
