/**
 * The W3C trace context a job carries: the `traceparent` active when it was
 * dispatched, stored in its row, and the one each attempt's span hands to
 * its handler (across the Web Worker boundary too). Read and written through
 * `npm:@opentelemetry/api`, which does nothing until an SDK (or Deno's
 * built-in one, `OTEL_DENO=true`) is installed.
 *
 * @internal
 * @module
 */
// A full specifier, as for zod: an app importing this from another folder need not list it.
// deno-lint-ignore no-import-prefix
import type { Context, SpanContext } from "npm:@opentelemetry/api@1";
// deno-lint-ignore no-import-prefix
import { context, ROOT_CONTEXT, trace, TraceFlags } from "npm:@opentelemetry/api@1";

/** The instrumentation scope every span and metric of the queue is recorded under. */
export const INSTRUMENTATION_SCOPE = "@renox/queue";

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;
const INVALID_TRACE = "00000000000000000000000000000000";
const INVALID_SPAN = "0000000000000000";

/** The `traceparent` of the span active now, or null outside one (or without an SDK). */
export function activeTraceparent(): string | null {
  const span = trace.getSpan(context.active());
  return span === undefined ? null : toTraceparent(span.spanContext());
}

/** `spanContext` as a `traceparent` header value, or null when it is not a valid one. */
export function toTraceparent(spanContext: SpanContext): string | null {
  const { traceId, spanId, traceFlags } = spanContext;
  if (!trace.isSpanContextValid(spanContext)) return null;
  return `00-${traceId}-${spanId}-${(traceFlags & 0xff).toString(16).padStart(2, "0")}`;
}

/** The remote span context a `traceparent` names, or null when it names none. */
export function fromTraceparent(traceparent: string | null | undefined): SpanContext | null {
  if (typeof traceparent !== "string") return null;
  const match = TRACEPARENT.exec(traceparent);
  if (match === null || match[1] === INVALID_TRACE || match[2] === INVALID_SPAN) return null;
  return {
    traceId: match[1]!,
    spanId: match[2]!,
    traceFlags: parseInt(match[3]!, 16) & TraceFlags.SAMPLED,
    isRemote: true,
  };
}

/** A context whose active span is the one `traceparent` names (the root context when none). */
export function contextOf(traceparent: string | null | undefined): Context {
  const spanContext = fromTraceparent(traceparent);
  return spanContext === null ? ROOT_CONTEXT : trace.setSpanContext(ROOT_CONTEXT, spanContext);
}

/** Runs `fn` with the span `traceparent` names as the active one (as it is, without one). */
export function withTraceparent<T>(traceparent: string | null | undefined, fn: () => T): T {
  if (fromTraceparent(traceparent) === null) return fn();
  return context.with(contextOf(traceparent), fn);
}
