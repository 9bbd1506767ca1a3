/**
 * A child process of the scale bench (`deno task bench --only scale`), so
 * that the parent can sample its resident memory from outside:
 *
 * ```sh
 * deno run -A bench/scale_child.ts dispatch <database file> <jobs> <chunk>
 * deno run -A bench/scale_child.ts drain <database file> <concurrency>
 * ```
 *
 * `dispatch` stores `jobs` no-op jobs with `dispatchMany`, `chunk` per call,
 * and prints `done <ms> <jobs> <V8 heap bytes>`. `drain` opens the queue,
 * prints `ready`, and on `go` (a line on stdin) drains it with the isolate
 * executor until it finds it empty, printing `at <ms since go> <completed>`
 * every {@linkcode PROGRESS_MS} and `done <ms since go> <completed> <V8 heap
 * bytes>` at the end. The V8 heap is `Deno.memoryUsage().heapTotal`: what V8
 * holds for the JS heap, used or not.
 *
 * @module
 */
import { fileURLToPath } from "node:url";
import { Queue } from "../mod.ts";
import { BENCH_JOBS_URL, noop } from "./jobs.ts";
import { readLines } from "./lines.ts";
import { DRAIN_POLL_MS } from "./queue.ts";

/** How often a draining child says how many jobs it has completed, in ms. */
export const PROGRESS_MS = 10;

/** One line a child prints. */
export type ScaleChildLine =
  | { readonly kind: "ready" }
  | { readonly kind: "at"; readonly ms: number; readonly completed: number }
  | {
    readonly kind: "done";
    readonly ms: number;
    readonly completed: number;
    readonly heapTotal: number;
  };

/** What a child is asked to do. */
export type ScaleChildTask =
  | {
    readonly kind: "dispatch";
    readonly path: string;
    readonly jobs: number;
    readonly chunk: number;
  }
  | { readonly kind: "drain"; readonly path: string; readonly concurrency: number };

/**
 * The command that starts a child for `task` (stdin and stdout piped,
 * stderr inherited), with `--v8-flags=v8Flags` unless that is null.
 */
export function scaleChildCommand(task: ScaleChildTask, v8Flags: string | null): Deno.Command {
  const script = fileURLToPath(import.meta.url);
  const config = fileURLToPath(new URL("../deno.json", import.meta.url));
  const args = task.kind === "dispatch"
    ? [task.path, String(task.jobs), String(task.chunk)]
    : [task.path, String(task.concurrency)];
  return new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      "--quiet",
      ...(v8Flags === null ? [] : [`--v8-flags=${v8Flags}`]),
      "--config",
      config,
      script,
      task.kind,
      ...args,
    ],
    stdin: "piped",
    stdout: "piped",
    stderr: "inherit",
  });
}

/** Reads one line of a child's output; null for a line that is not part of the protocol. */
export function parseScaleChildLine(line: string): ScaleChildLine | null {
  const [kind, ms, completed, heapTotal] = line.split(" ");
  if (kind === "ready" && ms === undefined) return { kind };
  if (kind === "at" && ms !== undefined) {
    return { kind, ms: Number(ms), completed: Number(completed) };
  }
  if (kind === "done" && heapTotal !== undefined) {
    return { kind, ms: Number(ms), completed: Number(completed), heapTotal: Number(heapTotal) };
  }
  return null;
}

function parseTask(args: readonly string[]): ScaleChildTask {
  const [kind, path, first, second] = args;
  const whole = (text: string | undefined) => /^[0-9]+$/.test(text ?? "") ? Number(text) : NaN;
  if (kind === "dispatch" && path !== undefined && whole(first) > 0 && whole(second) > 0) {
    return { kind, path, jobs: whole(first), chunk: whole(second) };
  }
  if (kind === "drain" && path !== undefined && whole(first) > 0 && second === undefined) {
    return { kind, path, concurrency: whole(first) };
  }
  throw new TypeError(
    "usage: scale_child.ts dispatch <database file> <jobs> <chunk> | drain <database file> <concurrency>",
  );
}

/** Stores `jobs` no-op jobs, `chunk` per `dispatchMany` call, each chunk made when it is sent. */
async function dispatchAll(queue: Queue, jobs: number, chunk: number): Promise<void> {
  const started = performance.now();
  for (let sent = 0; sent < jobs; sent += chunk) {
    const size = Math.min(chunk, jobs - sent);
    await queue.dispatchMany(noop, Array.from({ length: size }, (_, n) => ({ n: sent + n })));
  }
  console.log(`done ${performance.now() - started} ${jobs} ${Deno.memoryUsage().heapTotal}`);
}

/** Waits for `go`, then drains until empty, saying how far it got every {@linkcode PROGRESS_MS}. */
async function drainAll(queue: Queue, concurrency: number): Promise<void> {
  console.log("ready");
  for await (const line of readLines(Deno.stdin.readable)) {
    if (line !== "go") continue;
    const started = performance.now();
    const worker = queue.work({
      executor: "isolate",
      concurrency,
      stopWhenEmpty: true,
      pollMs: DRAIN_POLL_MS,
    });
    worker.addEventListener("queue:error", ({ detail }) => {
      console.error(`scale_child: ${detail.during}: ${detail.error.message}`);
    });
    const timer = setInterval(() => {
      console.log(`at ${performance.now() - started} ${worker.stats.completed}`);
    }, PROGRESS_MS);
    await worker.done;
    clearInterval(timer);
    const heapTotal = Deno.memoryUsage().heapTotal;
    console.log(`done ${performance.now() - started} ${worker.stats.completed} ${heapTotal}`);
    break;
  }
}

async function runScaleChild(task: ScaleChildTask): Promise<void> {
  await using queue = await Queue.open({ path: task.path, jobs: BENCH_JOBS_URL });
  if (task.kind === "dispatch") await dispatchAll(queue, task.jobs, task.chunk);
  else await drainAll(queue, task.concurrency);
}

if (import.meta.main) await runScaleChild(parseTask(Deno.args));
