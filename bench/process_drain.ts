/**
 * A drain across several worker processes on one PostgreSQL schema or one
 * Redis prefix: jobs are pre-queued, every process opens the queue and says
 * it is ready, then all are told to go at once; the time runs from `go`
 * until the last of them found the queue empty. Starting the processes is
 * not timed. The timing itself ({@linkcode timeProcessDrain}) serves any
 * worker process that speaks the same lines (a peer's too).
 *
 * @module
 */
import { isRedisUrl } from "../src/stores/database_url.ts";
import type { Queue } from "../mod.ts";
import { noop } from "./jobs.ts";
import { readLines } from "./lines.ts";
import { measureRate } from "./measurement.ts";
import { withPostgresQueue } from "./postgres_queue.ts";
import { drainWorkerCommand, parseDrainWorkerLine } from "./process_drain_worker.ts";
import { assertPending } from "./queue_fixture.ts";
import { payloads } from "./queue.ts";
import { withRedisQueue } from "./redis_queue.ts";

/** A worker process that has not said it is ready by then fails the run. */
const READY_TIMEOUT_MS = 30_000;
/** A drain that has not ended by then fails the run. */
const DRAIN_TIMEOUT_MS = 120_000;
/** How long a worker process may take to exit after its drain, before it is killed. */
const EXIT_TIMEOUT_MS = 5_000;

/** One worker process and what it said. */
interface DrainProcess {
  readonly child: Deno.ChildProcess;
  readonly stdin: WritableStreamDefaultWriter<Uint8Array>;
  readonly ready: Promise<void>;
  readonly done: Promise<number>;
  readonly reading: Promise<void>;
}

/**
 * Pre-queues `jobs` no-op jobs on a fresh schema (a `postgres://` URL) or
 * prefix (a `redis://` URL), starts `processes` worker processes at
 * `concurrency` each, and times them from `go` to the last one done;
 * returns jobs per second.
 */
export function processDrain(
  url: string,
  jobs: number,
  processes: number,
  concurrency: number,
): Promise<number> {
  const fixture: <T>(fn: (queue: Queue, place: string) => Promise<T>) => Promise<T> =
    isRedisUrl(url) ? (fn) => withRedisQueue(url, fn) : (fn) => withPostgresQueue(url, fn);
  return fixture(async (queue, place) => {
    await queue.dispatchMany(noop, payloads(jobs));
    const commands = Array.from(
      { length: processes },
      () => drainWorkerCommand({ url, schema: place, concurrency }),
    );
    const rate = await timeProcessDrain(
      commands,
      jobs,
      `The ${processes}-process drain at concurrency ${concurrency}`,
    );
    await assertPending(queue, 0);
    return rate;
  });
}

/**
 * Starts a drain worker process per command, waits until all are ready,
 * times them from `go` until every one said it is done, checks that they
 * completed `jobs` jobs together (`what` names the drain in the error), and
 * stops them; returns jobs per second.
 */
export async function timeProcessDrain(
  commands: readonly Deno.Command[],
  jobs: number,
  what: string,
): Promise<number> {
  const started: DrainProcess[] = [];
  try {
    for (const command of commands) started.push(start(command));
    await deadline(Promise.all(started.map(({ ready }) => ready)), READY_TIMEOUT_MS, "ready");
    const go = new TextEncoder().encode("go\n");
    let completed: number[] = [];
    const rate = await measureRate(jobs, async () => {
      await Promise.all(started.map(({ stdin }) => stdin.write(go)));
      completed = await deadline(
        Promise.all(started.map(({ done }) => done)),
        DRAIN_TIMEOUT_MS,
        "done",
      );
    });
    const total = completed.reduce((sum, each) => sum + each, 0);
    if (total !== jobs) {
      throw new Error(`${what} ran ${total} of ${jobs} jobs (${completed.join(" + ")})`);
    }
    return rate;
  } finally {
    await Promise.all(started.map(stop));
  }
}

function start(command: Deno.Command): DrainProcess {
  const child = command.spawn();
  const ready = Promise.withResolvers<void>();
  const done = Promise.withResolvers<number>();
  // Neither may reject unhandled when the run fails before it awaits them.
  ready.promise.catch(() => {});
  done.promise.catch(() => {});
  const reading = (async () => {
    for await (const text of readLines(child.stdout)) {
      const line = parseDrainWorkerLine(text);
      if (line?.kind === "ready") ready.resolve();
      else if (line?.kind === "done") done.resolve(line.completed);
    }
    const ended = new Error("A drain worker process ended before it was done");
    ready.reject(ended);
    done.reject(ended);
  })();
  return {
    child,
    stdin: child.stdin.getWriter(),
    ready: ready.promise,
    done: done.promise,
    reading,
  };
}

/** Closes a process's stdin, waits for it to exit, and kills it if it does not. */
async function stop(process: DrainProcess): Promise<void> {
  await process.stdin.close().catch(() => {});
  const exited = await deadline(process.child.status, EXIT_TIMEOUT_MS, "exit").then(
    () => true,
    () => false,
  );
  if (!exited) process.child.kill("SIGKILL");
  await process.reading.catch(() => {});
  await process.child.status;
}

/** `promise`, or a rejection once `ms` have passed. */
async function deadline<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`The drain worker processes were not ${what} within ${ms} ms`)),
          ms,
        );
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}
