/**
 * The cron job of {@linkcode Queue.serverless}: on hosts that keep an
 * isolate alive only while it serves requests and cron ticks (Deno Deploy),
 * a top-level `Deno.cron` drains the queue for up to `maxTimeMs` each tick.
 *
 * @internal
 * @module
 */
import { shown } from "../shown.ts";
import type { DrainOptions, ServerlessOptions } from "./options.ts";

/** `Deno.cron`'s overload with options, as far as the queue uses it. */
type Cron = (
  name: string,
  schedule: string,
  options: { signal?: AbortSignal },
  handler: () => Promise<void>,
) => Promise<void>;

/**
 * The names of the cron jobs `serverless()` registered in this isolate and
 * not unregistered yet: `Deno.cron` takes a name once.
 */
const registered = new Set<string>();

/** What {@linkcode Queue.serverless} says when the runtime has no `Deno.cron`. */
export const NO_CRON_MESSAGE =
  'serverless: Deno.cron is not available: run with --unstable-cron, or add "unstable": ["cron"] to the app\'s deno.json';

/**
 * Registers the drain cron job: each tick drains for up to `maxTimeMs` with
 * the options' concurrency and queues. Throws when `Deno.cron` is missing or
 * an option is bad (checked by `check` before anything is registered).
 */
export function registerDrainCron(
  options: ServerlessOptions,
  drain: (options: DrainOptions) => Promise<unknown>,
  check: (options: DrainOptions) => void,
): Promise<void> {
  const schedule = options.cron ?? "* * * * *";
  if (typeof schedule !== "string" || schedule.trim() === "") {
    throw new TypeError(`serverless: cron must be a cron expression: got ${shown(schedule)}`);
  }
  const name = options.name ?? "renox-queue drain";
  if (typeof name !== "string" || name.trim() === "") {
    throw new TypeError(`serverless: name must be a non-empty string: got ${shown(name)}`);
  }
  const drainOptions: DrainOptions = {
    maxTimeMs: options.maxTimeMs ?? options.drainMs ?? 50_000,
    ...(options.concurrency !== undefined && { concurrency: options.concurrency }),
    ...(options.queues !== undefined && { queues: options.queues }),
  };
  try {
    check(drainOptions);
  } catch (error) {
    const message = (error as Error).message.replace(/^drain:/, "serverless:");
    throw error instanceof RangeError ? new RangeError(message) : new TypeError(message);
  }
  const cron = (Deno as unknown as { cron?: Cron }).cron;
  if (typeof cron !== "function") throw new Error(NO_CRON_MESSAGE);
  if (registered.has(name)) {
    throw new TypeError(
      `serverless: a cron job named "${name}" is registered already: each serverless() call registers one of its own, so give this one another name option`,
    );
  }
  const cronOptions = options.signal === undefined ? {} : { signal: options.signal };
  let unregistered: Promise<void>;
  try {
    unregistered = cron(name, schedule, cronOptions, async () => {
      await drain(drainOptions);
    });
  } catch (error) {
    throw new TypeError(
      `serverless: Deno.cron refused the job "${name}" on "${schedule}": ${
        (error as Error).message
      }`,
      { cause: error },
    );
  }
  registered.add(name);
  return unregistered.finally(() => registered.delete(name));
}
