/**
 * One span per attempt: `job <name>`, of kind CONSUMER, parented to the
 * trace context stored at dispatch and linked to the span of the job's
 * previous attempt when it was retried. Attributes follow the OpenTelemetry
 * messaging conventions. Without an SDK no span is started at all: the
 * attempt's hot path skips even the API's no-op span and its context.
 *
 * @internal
 * @module
 */
// A full specifier, as for zod: an app importing this from another folder need not list it.
// deno-lint-ignore no-import-prefix
import type { Attributes, Context, Link, Span } from "npm:@opentelemetry/api@1";
// deno-lint-ignore no-import-prefix
import { ProxyTracerProvider, SpanKind, SpanStatusCode, trace } from "npm:@opentelemetry/api@1";
import type { Outcome } from "./outcomes.ts";
import type { ClaimedJob } from "../stores/store.ts";
import {
  contextOf,
  fromTraceparent,
  INSTRUMENTATION_SCOPE,
  toTraceparent,
} from "../trace_context.ts";

/** The value of `messaging.system`. */
export const MESSAGING_SYSTEM = "renox-queue";

/** How an attempt's span ended, as its `renox.job.outcome` attribute says. */
export type SpanOutcome = Outcome["kind"] | "release" | "stopped" | "lost";

/**
 * An attempt's span, the context that makes it the handler's active span,
 * and its `traceparent` for what crosses a boundary (a Web Worker, the job
 * row on a retry), read only when asked: reading a span's ids is the
 * costly part of a span in some SDKs (Deno's).
 */
export class AttemptSpan {
  /** The span. */
  readonly span: Span;
  /** The context whose active span it is. */
  readonly context: Context;
  /** Whether the span records (an SDK is installed and sampled it). */
  readonly recording: boolean;
  /** Set once the span ended. */
  ended = false;
  #traceparent: string | null | undefined;

  /** Wraps a span just started under `parent`. */
  constructor(span: Span, parent: Context) {
    this.span = span;
    this.context = trace.setSpan(parent, span);
    this.recording = span.isRecording();
  }

  /** The span as a `traceparent`; null when it does not record. */
  get traceparent(): string | null {
    if (this.#traceparent === undefined) {
      this.#traceparent = this.recording ? toTraceparent(this.span.spanContext()) : null;
    }
    return this.#traceparent;
  }
}

/**
 * The `renox.job.outcome` of an attempt that ended in `outcome`: for a job
 * that runs again, `"release"` when its handler released it
 * (`ctx.release()`), `"stopped"` when it was put back through no fault of
 * its own (its worker stopping, its Web Worker terminated for another job),
 * else `"retry"` (an error).
 */
export function spanOutcomeOf(outcome: Outcome): SpanOutcome {
  if (outcome.kind !== "retry") return outcome.kind;
  if (outcome.error === null) return "release";
  return outcome.settlement.refundAttempt ? "stopped" : "retry";
}

/** The queue's tracer: the API's proxy, which records through whichever SDK is installed later. */
const tracer = trace.getTracer(INSTRUMENTATION_SCOPE);

/** Set once a tracer SDK was seen; from then on every attempt starts its span. */
let sdkSeen = false;

/**
 * Whether a tracer SDK is installed: Deno's (`OTEL_DENO=true`, which
 * registers its own provider) or one an app registered with
 * `trace.setGlobalTracerProvider()` (a delegate of the API's proxy). Looked
 * up again on each attempt until one is seen, since an app may install its
 * SDK after this module loaded; a provider from another copy of the API
 * counts as installed.
 */
function sdkInstalled(): boolean {
  if (!sdkSeen) {
    const provider = trace.getTracerProvider();
    sdkSeen = !(provider instanceof ProxyTracerProvider) ||
      provider.getDelegateTracer(INSTRUMENTATION_SCOPE) !== undefined;
  }
  return sdkSeen;
}

/**
 * Starts the span of one attempt; undefined without a tracer SDK, where a
 * span would record nothing (the handler then runs in the context it was
 * called in, as any code does without an SDK).
 */
export function startAttemptSpan(job: ClaimedJob): AttemptSpan | undefined {
  if (!sdkInstalled()) return undefined;
  const previous = fromTraceparent(job.lastSpan);
  const links: Link[] = previous === null
    ? []
    : [{ context: previous, attributes: { "renox.link": "previous attempt" } }];
  const attributes: Attributes = {
    "messaging.system": MESSAGING_SYSTEM,
    "messaging.operation.type": "process",
    "messaging.operation.name": "job",
    "messaging.destination.name": job.queue,
    "messaging.message.id": String(job.id),
    "renox.job.name": job.name,
    "renox.job.attempt": job.attempts,
  };
  if (job.batchId !== null) attributes["renox.batch.id"] = job.batchId;
  const parent = contextOf(job.trace);
  const span = tracer.startSpan(
    `job ${job.name}`,
    { kind: SpanKind.CONSUMER, attributes, links },
    parent,
  );
  return new AttemptSpan(span, parent);
}

/**
 * Ends an attempt's span once: with its outcome, and for a `"retry"` or a
 * `"fail"` (the handler's error or timeout) with `error` as the exception
 * and an error status; another outcome's `error` (why a job was put back)
 * is not the handler's. The exception of an encrypted job carries only its
 * type: its message may hold decrypted values.
 */
export function endAttemptSpan(
  attempt: AttemptSpan | undefined,
  outcome: SpanOutcome,
  error: Error | null,
  encrypted: boolean,
): void {
  if (attempt === undefined || attempt.ended) return;
  attempt.ended = true;
  const { span } = attempt;
  if (!attempt.recording) {
    span.end();
    return;
  }
  span.setAttribute("renox.job.outcome", outcome);
  if (error !== null && (outcome === "retry" || outcome === "fail")) {
    const type = safeName(error);
    span.setAttribute("error.type", type);
    if (encrypted) span.recordException({ name: type, message: "(hidden: the job is encrypted)" });
    else span.recordException(error);
    span.setStatus({
      code: SpanStatusCode.ERROR,
      message: encrypted ? type : `${type}: ${safeMessage(error)}`,
    });
  }
  span.end();
}

function safeName(error: Error): string {
  try {
    return typeof error.name === "string" && error.name !== "" ? error.name : "Error";
  } catch {
    return "Error";
  }
}

function safeMessage(error: Error): string {
  try {
    return String(error.message);
  } catch {
    return "";
  }
}
