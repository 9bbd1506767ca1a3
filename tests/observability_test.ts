/**
 * Traces, metrics and job logs: one span per attempt parented to the
 * dispatching span (across a real process boundary and into Web Workers),
 * linked on retry, with the messaging conventions' attributes; job logs
 * written with the tick's settle, capped, encrypted for encrypted jobs, and
 * kept across a crash up to the last tick. Spans are seen through the SDK's
 * own in-memory exporter.
 *
 * @module
 */
import assert from "node:assert/strict";
import { context, metrics, SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import {
  AggregationTemporality,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from "@opentelemetry/sdk-metrics";
import { z } from "zod";
import { defineJob, generateAppKey, type JobLogLine, PermanentError } from "../mod.ts";
import { ChildScript } from "./_child.ts";
import { ManualClock, nextEvent, waitUntil, within } from "./_helpers.ts";
import { type StoreContext, storeTest } from "./_stores.ts";
import { Queue } from "../src/queue.ts";
import * as jobs from "./fixtures/observability/jobs.ts";
import * as noSdkJobs from "./fixtures/observability/no_sdk_jobs.ts";
import { traced } from "./fixtures/observability/worker_sdk_jobs.ts";

const exporter = new InMemorySpanExporter();
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
trace.setGlobalTracerProvider(
  new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }),
);
const tracer = trace.getTracer("observability test");
const JOBS_URL = new URL("./fixtures/observability/jobs.ts", import.meta.url).href;
const NO_SDK_JOBS_URL = new URL("./fixtures/observability/no_sdk_jobs.ts", import.meta.url).href;
const KEY = generateAppKey();

/** The attempt spans of job `id`, in the order they ended. */
function attemptSpans(id: number): ReadableSpan[] {
  return exporter.getFinishedSpans().filter((span) =>
    span.attributes["messaging.message.id"] === String(id)
  );
}

/**
 * Asserts that the job whose id `lines` logged as "follow-up" ran in trace
 * `traceId`, its attempt span a child of `attempt`.
 */
function assertFollowUpUnder(
  lines: readonly JobLogLine[],
  traceId: string,
  attempt: ReadableSpan,
): void {
  const followUp = lines.find((line) => line.message === "follow-up")!.fields!.id as number;
  const [child] = attemptSpans(followUp);
  assert.equal(child!.spanContext().traceId, traceId);
  assert.equal(child!.parentSpanContext?.spanId, attempt.spanContext().spanId);
}

const encoder = new TextEncoder();

/**
 * What job `id`'s stored log lines count against its cap: the UTF-8 bytes
 * of each line's message and fields, read as stored through the store (for
 * lines not sealed, whose stored text is what was counted).
 */
async function storedLogBytes(db: StoreContext, id: number): Promise<number> {
  const lines = await (await db.store()).logs(id);
  assert.ok(lines.every((line) => !line.encrypted));
  return lines.reduce(
    (sum, { message, fields }) =>
      sum + encoder.encode(message).length + (fields === null ? 0 : encoder.encode(fields).length),
    0,
  );
}

/** Runs `fn` inside a fresh span; returns its result and the span's ids. */
async function inSpan<T>(
  fn: () => Promise<T>,
): Promise<{ result: T; traceId: string; spanId: string }> {
  return await tracer.startActiveSpan("request", async (span) => {
    try {
      const result = await fn();
      return { result, ...span.spanContext() };
    } finally {
      span.end();
    }
  });
}

/** Releases its first attempt (`ctx.release()`), succeeds on the second. */
const releasing = defineJob({
  name: "releasing",
  schema: z.null(),
  maxAttempts: 2,
  handle(_, ctx) {
    if (ctx.attempt === 1) ctx.release(0);
  },
});

const secretive = defineJob({
  name: "secretive",
  schema: z.object({ secret: z.string() }),
  encrypted: true,
  maxAttempts: 1,
  handle({ secret }, ctx) {
    ctx.log(`the secret is ${secret}`, { secret });
    throw new PermanentError(`failed holding ${secret}`);
  },
});

storeTest(
  "an attempt runs in a CONSUMER span `job <name>` parented to the dispatching span",
  async (db) => {
    exporter.reset();
    const queue = await db.open({ jobs: [jobs.chatty] });
    const { result: id, traceId, spanId } = await inSpan(() =>
      queue.dispatch(jobs.chatty, { lines: 1 })
    );
    await queue.work({ executor: "isolate", stopWhenEmpty: true }).done;
    const [span, ...more] = attemptSpans(id);
    assert.equal(more.length, 0, "one span per attempt");
    assert.equal(span!.name, "job chatty");
    assert.equal(span!.kind, SpanKind.CONSUMER);
    assert.equal(span!.spanContext().traceId, traceId);
    assert.equal(span!.parentSpanContext?.spanId, spanId);
    assert.deepEqual(
      {
        system: span!.attributes["messaging.system"],
        destination: span!.attributes["messaging.destination.name"],
        operation: span!.attributes["messaging.operation.type"],
        attempt: span!.attributes["renox.job.attempt"],
        outcome: span!.attributes["renox.job.outcome"],
      },
      {
        system: "renox-queue",
        destination: "default",
        operation: "process",
        attempt: 1,
        outcome: "complete",
      },
    );
    assert.equal(span!.status.code, SpanStatusCode.UNSET);
  },
);

storeTest(
  "chains and batches carry the dispatching trace to every job they queue",
  async (db) => {
    exporter.reset();
    const queue = await db.open({ jobs: [jobs.chatty] });
    const { result: ids, traceId } = await inSpan(async () => {
      const chain = await queue.chain().then(jobs.chatty, { lines: 1 }).then(jobs.chatty, {
        lines: 2,
      }).dispatch();
      const batch = await queue.batch("b").push(jobs.chatty, { lines: 3 }).then(jobs.chatty, {
        lines: 4,
      }).dispatch();
      const many = await queue.dispatchMany(jobs.chatty, [{ lines: 5 }, { lines: 6 }]);
      return { chain, batch, many };
    });
    await queue.work({ executor: "isolate", stopWhenEmpty: true }).done;
    const spans = exporter.getFinishedSpans().filter((span) =>
      span.spanContext().traceId === traceId
    );
    // Two links of the chain, the batch's job and its `then`, two of dispatchMany.
    assert.equal(spans.filter((span) => span.name === "job chatty").length, 6);
    assert.ok(ids.many.every((id) => attemptSpans(id).length === 1));
  },
);

storeTest(
  "a retried attempt's span links to the previous attempt's, and its error sets the status",
  async (db) => {
    exporter.reset();
    const queue = await db.open({ jobs: [jobs.flaky] });
    const { result: id } = await inSpan(() => queue.dispatch(jobs.flaky, null));
    await queue.work({ executor: "isolate", stopWhenEmpty: true, pollMs: 10 }).done;
    const [first, second] = attemptSpans(id);
    assert.ok(first !== undefined && second !== undefined, "two attempts, two spans");
    assert.equal(first.attributes["renox.job.outcome"], "retry");
    assert.equal(first.status.code, SpanStatusCode.ERROR);
    const exception = first.events.find((event) => event.name === "exception");
    assert.equal(exception?.attributes?.["exception.message"], "first attempt fails");
    assert.equal(second.attributes["renox.job.attempt"], 2);
    assert.equal(second.attributes["renox.job.outcome"], "complete");
    assert.deepEqual(second.links.map((link) => link.context.spanId), [first.spanContext().spanId]);
    assert.equal(second.parentSpanContext?.spanId, first.parentSpanContext?.spanId);
  },
);

storeTest("a timed-out attempt's span has an error status and records the timeout", async (db) => {
  exporter.reset();
  const slow = defineJob({
    name: "slow",
    schema: z.null(),
    maxAttempts: 1,
    timeoutMs: 50,
    async handle(_, ctx) {
      await new Promise((resolve) => ctx.signal.addEventListener("abort", resolve));
    },
  });
  const queue = await db.open({ jobs: [slow] });
  const id = await queue.dispatch(slow, null);
  await queue.work({ executor: "isolate", stopWhenEmpty: true }).done;
  const [span] = attemptSpans(id);
  assert.equal(span!.attributes["renox.job.outcome"], "fail");
  assert.equal(span!.status.code, SpanStatusCode.ERROR);
  assert.equal(span!.attributes["error.type"], "JobTimeoutError");
  const exception = span!.events.find((event) => event.name === "exception");
  assert.equal(exception?.attributes?.["exception.type"], "JobTimeoutError");
});

storeTest(
  "a running job cancelled with queue.cancel() ends its attempt span as cancelled, in either executor",
  async (db) => {
    for (const executor of ["isolate", "workers"] as const) {
      exporter.reset();
      const queue = await db.open({ jobs: JOBS_URL });
      const worker = queue.work({ executor, workers: 1 });
      const started = nextEvent<{ id: number }>(queue, "job:start");
      const id = await queue.dispatch(jobs.hangs, null);
      assert.equal((await started).id, id);
      const settled = nextEvent<{ id: number }>(queue, "job:cancelled", (d) => d.id === id);
      assert.equal(await queue.cancel(id, { reason: "not needed" }), "cancelling");
      await settled;
      await worker.stop();
      const spans = attemptSpans(id);
      assert.equal(spans.length, 1, `${executor}: one ended span`);
      assert.equal(spans[0]!.attributes["renox.job.outcome"], "cancelled", executor);
      assert.equal(spans[0]!.status.code, SpanStatusCode.UNSET, executor);
      await queue.close();
    }
  },
);

storeTest(
  "a job put back when a stop's grace ran out says why in job:retry; its span ends as stopped",
  async (db) => {
    exporter.reset();
    const queue = await db.open({ jobs: [jobs.hangs] });
    const worker = queue.work({ executor: "isolate" });
    const started = nextEvent<{ id: number }>(queue, "job:start");
    const id = await queue.dispatch(jobs.hangs, null);
    assert.equal((await started).id, id);
    const retried = nextEvent<{ id: number; error: Error | null }>(queue, "job:retry");
    await worker.stop({ graceMs: 0 });
    const { error } = await retried;
    assert.equal(error?.message, "worker stopped during the attempt");
    const [span, ...more] = attemptSpans(id);
    assert.equal(more.length, 0);
    assert.equal(span!.attributes["renox.job.outcome"], "stopped");
    assert.equal(span!.status.code, SpanStatusCode.UNSET, "a put-back is not the handler's error");
  },
);

storeTest("an encrypted job's span and log never show its decrypted values", async (db) => {
  exporter.reset();
  const queue = await db.open({ jobs: [secretive], appKey: KEY });
  const id = await queue.dispatch(secretive, { secret: "hunter2-swordfish" });
  await queue.work({ executor: "isolate", stopWhenEmpty: true }).done;
  const [span] = attemptSpans(id);
  assert.equal(span!.attributes["renox.job.outcome"], "fail");
  assert.equal(span!.status.code, SpanStatusCode.ERROR);
  assert.ok(!JSON.stringify(span!.events).includes("hunter2"), JSON.stringify(span!.events));
  assert.ok(!(span!.status.message ?? "").includes("hunter2"));
  const [line] = await queue.logs(id);
  assert.equal(line!.message, "the secret is hunter2-swordfish");
  assert.deepEqual(line!.fields, { secret: "hunter2-swordfish" });
  const stored = await (await db.store()).logs(id);
  assert.equal(stored.length, 1);
  assert.ok(!stored[0]!.message.includes("hunter2") && stored[0]!.fields === null);
  if (db.file !== null) {
    await queue.close();
    for (const suffix of ["", "-wal"]) {
      const bytes = await Deno.readFile(db.file + suffix).catch(() => new Uint8Array());
      // The failed job keeps its error text; the log line ("the secret is …") is sealed.
      const text = new TextDecoder("latin1").decode(bytes);
      assert.ok(!text.includes("the secret is"), `log line readable in ${suffix || "file"}`);
    }
  }
});

storeTest(
  "ctx.log() lines are kept per attempt, with their fields, and read back by queue.logs()",
  async (db) => {
    exporter.reset();
    const queue = await db.open({ jobs: [jobs.flaky, jobs.chatty] });
    const id = await queue.dispatch(jobs.flaky, null);
    await queue.work({ executor: "isolate", stopWhenEmpty: true, pollMs: 10 }).done;
    const lines = await queue.logs(id);
    assert.deepEqual(
      lines.map(({ attempt, level, message, fields }) => ({ attempt, level, message, fields })),
      [
        { attempt: 1, level: "info", message: "attempt 1 starts", fields: null },
        { attempt: 2, level: "info", message: "attempt 2 starts", fields: null },
      ],
    );
    assert.ok(lines.every((line) => line.at instanceof Date && !line.sealed));
    assert.deepEqual(await queue.logs(id + 1000), []);
    await assert.rejects(() => queue.logs(-1), RangeError);
  },
);

storeTest(
  "ctx.log() refuses a message that is not a string and fields that are not JSON",
  async (db) => {
    exporter.reset();
    const bad = defineJob({
      name: "bad-log",
      schema: z.string(),
      maxAttempts: 1,
      handle(kind, ctx) {
        if (kind === "number") ctx.log(42 as unknown as string);
        // JSON.stringify gives undefined for it: in a Web Worker this reached the main thread's
        // log buffer and ended the process.
        if (kind === "no-json") ctx.log("no json", { toJSON: () => undefined });
        const cyclic: Record<string, unknown> = {};
        cyclic.self = cyclic;
        ctx.log("cyclic", cyclic);
      },
    });
    const queue = await db.open({ jobs: [bad] });
    const [a, b, c] = await queue.dispatchMany(bad, ["number", "cyclic", "no-json"]);
    await queue.work({ executor: "isolate", stopWhenEmpty: true }).done;
    const failed = await Promise.all([a, b, c].map((id) => queue.failedJob(id!)));
    assert.match(failed[0]!.error, /ctx\.log: message must be a string: got number/);
    assert.match(failed[1]!.error, /ctx\.log: fields must be JSON-serializable/);
    assert.match(
      failed[2]!.error,
      /ctx\.log: fields must be JSON-serializable to an object: its toJSON\(\) gave undefined/,
    );
  },
);

storeTest(
  "ctx.log() keeps a line with a NUL character or a lone surrogate, and the tick's other lines",
  async (db) => {
    exporter.reset();
    const odd = defineJob({
      name: "odd-log",
      schema: z.null(),
      handle(_payload, ctx) {
        ctx.log("before");
        ctx.log("nul \0 here", { also: "nul \0 in a field" });
        ctx.log("half \uD800 a pair");
        ctx.log("after");
      },
    });
    const queue = await db.open({ jobs: [odd] });
    const id = await queue.dispatch(odd, null);
    await queue.work({ executor: "isolate", stopWhenEmpty: true, pollMs: 10 }).done;
    const lines = await queue.logs(id);
    assert.deepEqual(lines.map(({ message, fields }) => ({ message, fields })), [
      { message: "before", fields: null },
      { message: "nul \uFFFD here", fields: { also: "nul \0 in a field" } },
      { message: "half \uFFFD a pair", fields: null },
      { message: "after", fields: null },
    ]);
  },
);

storeTest(
  "a job's log is capped: the oldest lines go, and one line says how many",
  async (db) => {
    exporter.reset();
    const queue = await db.open({ jobs: [jobs.chatty] });
    const text = "x".repeat(90);
    const id = await queue.dispatch(jobs.chatty, { lines: 100, text });
    await queue.work({ executor: "isolate", stopWhenEmpty: true, maxLogBytes: 2_048 }).done;
    const lines = await queue.logs(id);
    const [cap, ...kept] = lines;
    assert.equal(cap!.level, "cap");
    assert.equal(cap!.attempt, 0);
    const dropped = (cap!.fields as { dropped: number }).dropped;
    assert.equal(dropped + kept.length, 100);
    assert.match(
      cap!.message,
      new RegExp(`log capped at 2048 bytes per job: ${dropped} older lines dropped`),
    );
    assert.equal(kept.at(-1)!.message, `${text} 100`, "the newest line is kept");
    const bytes = await storedLogBytes(db, id);
    assert.ok(bytes <= 2_048, `stored ${bytes} bytes`);
  },
);

storeTest(
  "the line saying the cap dropped older lines has attempt 0, also when the lines were dropped before any was written",
  async (db) => {
    const queue = await db.open({ jobs: [jobs.chatty] });
    // Three lines logged at once, twice the cap together: the worker drops two before writing.
    const text = "x".repeat(1_500);
    const id = await queue.dispatch(jobs.chatty, { lines: 3, text });
    await queue.work({ executor: "isolate", stopWhenEmpty: true, maxLogBytes: 2_048 }).done;
    const lines = await queue.logs(id);
    assert.deepEqual(
      lines.map(({ attempt, level, message, fields }) => ({ attempt, level, message, fields })),
      [
        {
          attempt: 0,
          level: "cap",
          message: "log capped at 2048 bytes per job: 2 older lines dropped",
          fields: { dropped: 2 },
        },
        { attempt: 1, level: "info", message: `${text} 3`, fields: { n: 3 } },
      ],
    );
  },
);

storeTest(
  "a log line over maxLogBytes keeps its head and says how much was cut",
  async (db) => {
    exporter.reset();
    const long = defineJob({
      name: "long-log",
      schema: z.null(),
      handle(_payload, ctx) {
        ctx.log(`start ${"é".repeat(3_000)} end`); // 6,010 bytes of UTF-8
        ctx.log("with fields", { blob: "y".repeat(5_000) });
        ctx.log("after");
      },
    });
    const queue = await db.open({ jobs: [long] });
    const id = await queue.dispatch(long, null);
    await queue.work({ executor: "isolate", stopWhenEmpty: true, maxLogBytes: 2_048 }).done;
    const [first, second, third, ...rest] = await queue.logs(id);
    assert.deepEqual(rest, []);
    const match = first!.message.match(/^start (é+)… \[cut: (\d+) bytes\]$/);
    assert.ok(match, first!.message);
    const keptBytes = new TextEncoder().encode(`start ${match[1]}`).length;
    assert.equal(keptBytes + Number(match[2]), 6_010);
    assert.ok(keptBytes >= 1_024, `kept ${keptBytes} bytes`);
    // Fields over half the cap go too, and the note says so.
    assert.equal(second!.message, "with fields [cut: fields of 5011 bytes]");
    assert.equal(second!.fields, null);
    assert.equal(third!.message, "after");
  },
);

storeTest(
  "a Web Worker job logging three million lines keeps the process's memory bounded and its log capped",
  async (db) => {
    exporter.reset();
    const queue = await db.open({ jobs: JOBS_URL });
    const lines = 3_000_000;
    const id = await queue.dispatch(jobs.chatty, { lines });
    const before = Deno.memoryUsage().rss;
    let peak = before;
    const sampler = setInterval(() => peak = Math.max(peak, Deno.memoryUsage().rss), 20);
    try {
      await queue.work({ executor: "workers", workers: 1, stopWhenEmpty: true }).done;
    } finally {
      clearInterval(sampler);
    }
    peak = Math.max(peak, Deno.memoryUsage().rss);
    const grownMb = (peak - before) / 1_048_576;
    assert.ok(grownMb < 400, `the process grew by ${grownMb.toFixed(0)} MB`);
    assert.equal((await queue.finishedJob(id))?.state, "completed");
    const [cap, ...kept] = await queue.logs(id);
    assert.equal(cap!.level, "cap");
    const dropped = (cap!.fields as { dropped: number }).dropped;
    assert.equal(dropped + kept.length, lines, "every line is kept or counted as dropped");
    assert.match(cap!.message, new RegExp(`^log capped at 65536 bytes per job: ${dropped} older`));
    assert.deepEqual(
      kept.map((line) => line.message),
      Array.from({ length: kept.length }, (_, n) => `line ${lines - kept.length + 1 + n}`),
      "the newest lines are kept, in order",
    );
    const bytes = await storedLogBytes(db, id);
    assert.ok(bytes <= 65_536, `stored ${bytes} bytes`);
  },
);

storeTest(
  "the logs of a job go with its history: pruned by a settle once its kept record expired",
  async (db) => {
    exporter.reset();
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    const queue = await db.open({ jobs: [jobs.chatty], clock });
    const gone = await queue.dispatch(jobs.chatty, { lines: 2 });
    await queue.work({ executor: "isolate", stopWhenEmpty: true }).done;
    assert.equal((await queue.logs(gone)).length, 2);
    clock.advance(24 * 60 * 60 * 1_000 + 60_000);
    const next = await queue.dispatch(jobs.chatty, { lines: 1 });
    await queue.work({ executor: "isolate", stopWhenEmpty: true }).done;
    assert.deepEqual(await queue.logs(gone), []);
    assert.equal((await queue.logs(next)).length, 1);
  },
);

Deno.test("spans cross a real process boundary: dispatched in one process, worked in another", async () => {
  exporter.reset();
  const dir = await Deno.makeTempDir();
  try {
    const path = `${dir}/queue.db`;
    await (await Queue.open({ path, jobs: JOBS_URL })).close();
    await using child = new ChildScript(
      new URL("./fixtures/observability/dispatch_in_span.ts", import.meta.url),
      [path],
    );
    const sent = JSON.parse(await child.line("{", 30_000)) as {
      traceId: string;
      spanId: string;
      id: number;
    };
    assert.equal((await child.exit(30_000)).code, 0, child.stderr);
    await using queue = await Queue.open({ path, jobs: JOBS_URL });
    await queue.work({ executor: "isolate", stopWhenEmpty: true }).done;
    const [span] = attemptSpans(sent.id);
    assert.equal(span!.spanContext().traceId, sent.traceId);
    assert.equal(span!.parentSpanContext?.spanId, sent.spanId);
    assert.equal(span!.parentSpanContext?.isRemote, true);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("in a Web Worker the handler's spans nest under the attempt span, and console output is captured", async () => {
  exporter.reset();
  const dir = await Deno.makeTempDir();
  try {
    await using queue = await Queue.open({ path: `${dir}/queue.db`, jobs: JOBS_URL });
    const { result: id, traceId } = await inSpan(() => queue.dispatch(jobs.nested, null));
    await queue.work({ executor: "workers", workers: 1, stopWhenEmpty: true, captureConsole: true })
      .done;
    const [span] = attemptSpans(id);
    const lines = await queue.logs(id);
    const inner = lines.find((line) => line.message === "inner span");
    assert.deepEqual(inner?.fields, { traceId, parentSpanId: span!.spanContext().spanId });
    const printed = lines.find((line) => line.level === "log");
    assert.equal(printed?.message, "printed by the handler 42");
    // What the handler dispatched is traced under its attempt too.
    assertFollowUpUnder(lines, traceId, span!);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("in a Web Worker without console capture or a tracer of its own, what a handler dispatches is traced under its attempt", async () => {
  exporter.reset();
  const dir = await Deno.makeTempDir();
  try {
    await using queue = await Queue.open({ path: `${dir}/queue.db`, jobs: NO_SDK_JOBS_URL });
    const { result: id, traceId } = await inSpan(() => queue.dispatch(noSdkJobs.handsOn, null));
    await queue.work({ executor: "workers", workers: 1, stopWhenEmpty: true }).done;
    const [span] = attemptSpans(id);
    const lines = await queue.logs(id);
    assertFollowUpUnder(lines, traceId, span!);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("logs survive a crash of the attempt that wrote them, up to its last tick", async () => {
  exporter.reset();
  const dir = await Deno.makeTempDir();
  try {
    const path = `${dir}/queue.db`;
    const queue = await Queue.open({ path, jobs: JOBS_URL });
    const id = await queue.dispatch(jobs.hangs, null);
    await queue.close();
    const child = new ChildScript(
      new URL("./fixtures/observability/work_and_crash.ts", import.meta.url),
      [path],
    );
    try {
      await child.line("started", 30_000);
      await using reader = await Queue.open({ path, jobs: JOBS_URL });
      // Written with a tick at most about a second after the line: wait for it, then kill.
      await within(
        (async () => {
          while ((await reader.logs(id)).length === 0) {
            await new Promise((resolve) => setTimeout(resolve, 50));
          }
        })(),
        30_000,
        "the line to be written",
      );
      await child[Symbol.asyncDispose](); // SIGKILL, mid-attempt
      const [line] = await reader.logs(id);
      assert.deepEqual([line!.message, line!.fields, line!.attempt], ["before the crash", {
        step: 1,
      }, 1]);
    } finally {
      await child[Symbol.asyncDispose]();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a queue opened and a worker started before the app installs its MeterProvider report to it once it is installed", async () => {
  await using queue = await Queue.open({ path: ":memory:", jobs: [jobs.chatty] });
  const worker = queue.work({ executor: "isolate", pollMs: 10 });
  const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 3_600_000 });
  const provider = new MeterProvider({ readers: [reader] });
  metrics.setGlobalMeterProvider(provider);
  try {
    /** The queue's metrics the provider collects now, by name. */
    const collected = async () => {
      exporter.reset();
      await reader.forceFlush();
      return new Map(
        exporter.getMetrics().flatMap((resource) => resource.scopeMetrics)
          .filter((scope) => scope.scope.name === "@renox/queue")
          .flatMap((scope) => scope.metrics)
          .map((metric) => [metric.descriptor.name, metric]),
      );
    };
    await queue.dispatch(jobs.chatty, { lines: 0 }, { delayMs: 60_000 });
    const gauges = await waitUntil(async () => {
      const found = await collected();
      return found.has("renox.jobs.delayed") && found;
    }, { what: "the queue's gauges were collected", everyMs: 50 });
    assert.ok(gauges.has("renox.jobs.pending") && gauges.has("renox.jobs.running"));
    assert.equal(gauges.get("renox.jobs.delayed")!.dataPoints[0]?.value, 1);
    // The worker took the new provider's instruments with the same look.
    const completed = nextEvent(queue, "job:complete");
    await queue.dispatch(jobs.chatty, { lines: 0 });
    await completed;
    const found = await collected();
    assert.equal(found.get("renox.jobs.completed")?.dataPoints[0]?.value, 1);
    assert.ok(found.has("renox.job.duration") && found.has("renox.job.wait"));
  } finally {
    await worker.stop();
    await provider.shutdown();
    metrics.disable();
  }
});

Deno.test("the per-queue gauges read 0 once a queue they counted emptied, not their last value", async () => {
  const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 3_600_000 });
  const provider = new MeterProvider({ readers: [reader] });
  metrics.setGlobalMeterProvider(provider);
  try {
    await using queue = await Queue.open({ path: ":memory:", jobs: [jobs.chatty] });
    const gauges = async () => {
      exporter.reset();
      await reader.forceFlush();
      const found = exporter.getMetrics().flatMap((resource) => resource.scopeMetrics)
        .filter((scope) => scope.scope.name === "@renox/queue")
        .flatMap((scope) => scope.metrics);
      return Object.fromEntries(
        ["pending", "delayed", "running"].map((state) => [
          state,
          found.find((metric) => metric.descriptor.name === `renox.jobs.${state}`)?.dataPoints
            .filter((point) => point.attributes["messaging.destination.name"] === "default")
            .map((point) => point.value),
        ]),
      );
    };
    await queue.dispatchMany(jobs.chatty, [{ lines: 0 }, { lines: 0 }]);
    await queue.dispatch(jobs.chatty, { lines: 0 }, { delayMs: 60_000 });
    assert.deepEqual(await gauges(), { pending: [2], delayed: [1], running: [0] });
    await queue.clear();
    await queue.work({ executor: "isolate", stopWhenEmpty: true, pollMs: 10 }).done;
    assert.deepEqual(await gauges(), { pending: [0], delayed: [0], running: [0] });
  } finally {
    await provider.shutdown();
    metrics.disable();
  }
});

Deno.test("metrics go through the OpenTelemetry API: counters, histograms and per-queue gauges", async () => {
  const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 3_600_000 });
  const provider = new MeterProvider({ readers: [reader] });
  metrics.setGlobalMeterProvider(provider);
  try {
    await using queue = await Queue.open({
      path: ":memory:",
      jobs: [jobs.chatty, jobs.flaky, jobs.doomed, releasing],
    });
    await queue.dispatchMany(jobs.chatty, [{ lines: 0 }, { lines: 0 }]);
    await queue.dispatch(jobs.flaky, null);
    await queue.dispatch(jobs.doomed, null);
    await queue.dispatch(releasing, null);
    await queue.work({ executor: "isolate", stopWhenEmpty: true, pollMs: 10 }).done;
    await queue.dispatch(jobs.chatty, { lines: 0 }, { delayMs: 60_000 });
    await reader.forceFlush();
    const found = exporter.getMetrics().flatMap((resource) =>
      resource.scopeMetrics.filter((scope) => scope.scope.name === "@renox/queue")
        .flatMap((scope) => scope.metrics)
    );
    const byName = new Map(found.map((metric) => [metric.descriptor.name, metric]));
    const total = (name: string, job: string) =>
      byName.get(name)?.dataPoints
        .filter((point) => point.attributes["renox.job.name"] === job)
        .reduce((sum, point) => sum + (point.value as number), 0);
    assert.equal(total("renox.jobs.completed", "chatty"), 2);
    assert.equal(total("renox.jobs.completed", "flaky"), 1);
    assert.equal(total("renox.jobs.retried", "flaky"), 1);
    assert.equal(total("renox.jobs.failed", "doomed"), 1);
    const duration = byName.get("renox.job.duration")!;
    assert.equal(duration.descriptor.unit, "s");
    const timed = (job: string) =>
      duration.dataPoints.filter((point) => point.attributes["renox.job.name"] === job).reduce(
        (sum, point) => sum + (point.value as { count: number }).count,
        0,
      );
    const runs = ["chatty", "flaky", "doomed"].reduce((sum, job) => sum + timed(job), 0);
    assert.equal(runs, 5, "2 chatty, 2 flaky attempts, 1 doomed");
    // A release is an attempt, but not a timed one: here, in the rollup and in Prometheus alike.
    assert.equal(total("renox.jobs.completed", "releasing"), 1);
    assert.equal(timed("releasing"), 1, "the attempt that released is not timed");
    const rollup = (await queue.metrics()).byJob.find((type) => type.name === "releasing");
    assert.deepEqual([rollup?.completed, rollup?.retried, rollup?.runs], [1, 0, 1]);
    assert.equal(byName.get("renox.job.wait")!.descriptor.unit, "s");
    const delayed = byName.get("renox.jobs.delayed")!.dataPoints.find((point) =>
      point.attributes["messaging.destination.name"] === "default"
    );
    assert.equal(delayed?.value, 1);
    assert.ok(byName.has("renox.jobs.pending") && byName.has("renox.jobs.running"));
  } finally {
    await provider.shutdown();
    metrics.disable();
  }
});

Deno.test("Web Workers: with the JS SDK installed in the jobs module too, a handler's own spans nest under its attempt's span", async () => {
  exporter.reset();
  const spansFile = await Deno.makeTempFile();
  Deno.env.set("RENOX_TEST_SPANS_FILE", spansFile);
  try {
    await using queue = await Queue.open({
      path: ":memory:",
      jobs: new URL("./fixtures/observability/worker_sdk_jobs.ts", import.meta.url).href,
    });
    const id = await queue.dispatch(traced, {});
    await queue.work({ executor: "workers", workers: 1, stopWhenEmpty: true }).done;
    const [attempt] = attemptSpans(id);
    const inWorker = (await Deno.readTextFile(spansFile)).trim().split("\n").map((line) =>
      JSON.parse(line) as { name: string; traceId: string; spanId: string; parent: string }
    );
    const work = inWorker.find((span) => span.name === "handler work")!;
    const nested = inWorker.find((span) => span.name === "nested work")!;
    assert.equal(work.traceId, attempt!.spanContext().traceId);
    assert.equal(work.parent, attempt!.spanContext().spanId, "under the attempt's span");
    assert.equal(nested.traceId, work.traceId);
    assert.equal(nested.parent, work.spanId, "under the handler's own span");
  } finally {
    Deno.env.delete("RENOX_TEST_SPANS_FILE");
    await Deno.remove(spansFile);
  }
});
