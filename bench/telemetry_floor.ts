/**
 * What the telemetry of one attempt costs without the queue: the runner's
 * own span and metric calls (`src/runner/tracing.ts`,
 * `src/runner/job_metrics.ts`) in a loop, next to the same span made with
 * the bare API and Deno's cheapest span. Run it under the SDK whose cost it
 * shows, e.g. `OTEL_DENO=true deno run -A bench/telemetry_floor.ts`; without
 * one it shows what the no-SDK path costs. Prints microseconds per attempt
 * on this thread (median and fastest of the rounds; an SDK's exporter
 * thread comes on top), so a drain's overhead can be set against its floor.
 *
 * @module
 */
import { context, ROOT_CONTEXT, SpanKind, trace } from "@opentelemetry/api";
import { JobMetrics } from "../src/runner/job_metrics.ts";
import { endAttemptSpan, startAttemptSpan } from "../src/runner/tracing.ts";
import type { ClaimedJob } from "../src/stores/store.ts";
import { median } from "./median.ts";

/** Attempts per round: fewer than Deno's export queue holds (2,048 spans), so none is dropped. */
const ATTEMPTS = 500;
/** Rounds per case, the cases taking turns so that a drift of the machine's load hits each alike. */
const ROUNDS = 15;
/** Pause before each round, so an exporter thread catches up and is not timed in the next round. */
const PAUSE_MS = 40;
/** Attempts per tick, as a drain at concurrency 32 settles them. */
const TICK = 32;

const job: ClaimedJob = {
  id: 1,
  queue: "default",
  name: "bench-noop",
  payload: "{}",
  priority: 0,
  attempts: 1,
  crashes: 0,
  recovered: false,
  retryUntil: null,
  lastError: null,
  createdAt: 0,
  batchId: null,
  token: 1,
  waitedMs: 3,
  trace: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
  lastSpan: null,
};

const jobMetrics = new JobMetrics();
const tracer = trace.getTracer("telemetry-floor");
const attributes = {
  "messaging.system": "renox-queue",
  "messaging.operation.type": "process",
  "messaging.operation.name": "job",
  "messaging.destination.name": "default",
  "messaging.message.id": "1",
  "renox.job.name": "bench-noop",
  "renox.job.attempt": 1,
};

const cases: Record<string, (i: number) => void> = {
  "an attempt's span, context and metrics (the runner's calls)": (i) => {
    const span = startAttemptSpan({ ...job, id: i });
    jobMetrics.started(job);
    if (span !== undefined) context.with(span.context, () => {});
    endAttemptSpan(span, "complete", null, false);
    jobMetrics.settled(job, "complete", 0.01);
    if (i % TICK === 0) jobMetrics.flush();
  },
  "an attempt's span only (the runner's calls)": (i) => {
    endAttemptSpan(startAttemptSpan({ ...job, id: i }), "complete", null, false);
  },
  "the same span with the bare API (7 attributes, 1 at end)": () => {
    const span = tracer.startSpan("job bench-noop", { kind: SpanKind.CONSUMER, attributes });
    span.setAttribute("renox.job.outcome", "complete");
    span.end();
  },
  "a span with no attributes (the SDK's floor)": () => {
    tracer.startSpan("job bench-noop", { kind: SpanKind.CONSUMER }, ROOT_CONTEXT).end();
  },
  "an attempt's metrics only (2 histograms, counters per tick)": (i) => {
    jobMetrics.started(job);
    jobMetrics.settled(job, "complete", 0.01);
    if (i % TICK === 0) jobMetrics.flush();
  },
};

const perAttemptUs = new Map<string, number[]>();
for (let round = 0; round < ROUNDS; round++) {
  for (const [name, attempt] of Object.entries(cases)) {
    await new Promise((resolve) => setTimeout(resolve, PAUSE_MS));
    const start = performance.now();
    for (let i = 0; i < ATTEMPTS; i++) attempt(i);
    const us = (performance.now() - start) * 1_000 / ATTEMPTS;
    perAttemptUs.set(name, [...perAttemptUs.get(name) ?? [], us]);
  }
}
jobMetrics.flush();
console.log(`OTEL_DENO=${Deno.env.get("OTEL_DENO") ?? "(unset)"}: µs per attempt on this thread`);
console.log(" median   fastest  case");
for (const [name, us] of perAttemptUs) {
  const fastest = Math.min(...us);
  console.log(`${median(us).toFixed(2).padStart(7)}  ${fastest.toFixed(2).padStart(8)}  ${name}`);
}
