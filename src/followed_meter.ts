/**
 * The queue's meter of the global OpenTelemetry `MeterProvider`, followed.
 * The metrics API has no proxy provider, as the trace API has: a meter
 * taken before the app installs its SDK stays a no-op for good, so a
 * `Queue` opened or a worker started first would never report. What keeps
 * a meter for long (a queue's gauges, a worker's counters and histograms)
 * follows it here instead: it gets the meter at once, and the new one
 * within {@linkcode LOOK_EVERY_MS} of the global provider changing.
 *
 * The provider is looked up on a timer, once per period for the whole
 * process however many queues and workers follow it, and never on the path
 * of a dispatch or a job: without an SDK, a job makes the same no-op calls
 * it made before.
 *
 * @internal
 * @module
 */
// A full specifier, as for zod: an app importing this from another folder need not list it.
// deno-lint-ignore no-import-prefix
import { type Meter, type MeterProvider, metrics } from "npm:@opentelemetry/api@1";
import { INSTRUMENTATION_SCOPE } from "./trace_context.ts";

/** How often the global provider is looked up while anything follows it, in ms. */
export const LOOK_EVERY_MS = 1_000;

/** What uses the meter, each told the new one when the provider changes. */
const followers = new Set<{ readonly use: (meter: Meter) => void }>();
/** The provider the followers' meter came from; undefined while nothing follows. */
let followed: MeterProvider | undefined;
let timer: ReturnType<typeof setInterval> | undefined;

/**
 * Calls `use` with the queue's meter now, and again with the new one each
 * time the app installs (or removes) a global `MeterProvider`, until the
 * function it returns is called.
 */
export function followMeter(use: (meter: Meter) => void): () => void {
  lookUp();
  const follower = { use };
  followers.add(follower);
  use(followed!.getMeter(INSTRUMENTATION_SCOPE));
  if (timer === undefined) {
    const interval = setInterval(lookUp, LOOK_EVERY_MS);
    // An app that forgot to close its queue still exits.
    Deno.unrefTimer(interval);
    timer = interval;
  }
  return () => {
    if (!followers.delete(follower) || followers.size > 0) return;
    clearInterval(timer);
    timer = undefined;
    followed = undefined;
  };
}

/** Hands the new provider's meter to every follower if the global provider changed. */
function lookUp(): void {
  const provider = metrics.getMeterProvider();
  if (provider === followed) return;
  followed = provider;
  const meter = provider.getMeter(INSTRUMENTATION_SCOPE);
  for (const follower of followers) follower.use(meter);
}
