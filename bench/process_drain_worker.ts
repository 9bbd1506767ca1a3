/**
 * A drain worker process of the multi-process drains: a separate `deno run`
 * that opens the bench's PostgreSQL schema (or Redis prefix), says it is ready, and on `go`
 * (a line on stdin) drains the queue with the isolate executor until it
 * finds it empty, then prints how many jobs it completed and exits.
 *
 * ```sh
 * deno run -A bench/process_drain_worker.ts --url URL --schema NAME --concurrency N
 * deno run -A bench/process_drain_worker.ts --url redis://… --schema PREFIX --concurrency N
 * ```
 *
 * @module
 */
import { fileURLToPath } from "node:url";
import { readLines } from "./lines.ts";
import { isRedisUrl } from "../src/stores/database_url.ts";
import { openPostgresQueue } from "./postgres_queue.ts";
import { openRedisQueue } from "./redis_queue.ts";
import { DRAIN_POLL_MS } from "./queue.ts";

/** How a drain worker process is asked to run. */
export interface DrainWorkerOptions {
  /** The PostgreSQL or Redis URL. */
  readonly url: string;
  /** The schema the jobs are in (on Redis, the store's key prefix). */
  readonly schema: string;
  /** The worker's concurrency. */
  readonly concurrency: number;
}

/** One line the worker process prints. */
export type DrainWorkerLine =
  | { readonly kind: "ready" }
  | { readonly kind: "done"; readonly completed: number };

/** The command that starts the process (stdin and stdout piped, stderr inherited). */
export function drainWorkerCommand(options: DrainWorkerOptions): Deno.Command {
  const script = fileURLToPath(import.meta.url);
  const config = fileURLToPath(new URL("../deno.json", import.meta.url));
  return new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      "--quiet",
      "--config",
      config,
      script,
      "--url",
      options.url,
      "--schema",
      options.schema,
      "--concurrency",
      String(options.concurrency),
    ],
    stdin: "piped",
    stdout: "piped",
    stderr: "inherit",
  });
}

/** Reads one line of the worker's output; null for a line that is not part of the protocol. */
export function parseDrainWorkerLine(line: string): DrainWorkerLine | null {
  const [kind, completed] = line.split(" ");
  if (kind === "ready" && completed === undefined) return { kind };
  if (kind === "done" && completed !== undefined) return { kind, completed: Number(completed) };
  return null;
}

function parseArgs(args: readonly string[]): DrainWorkerOptions {
  let url: string | undefined;
  let schema: string | undefined;
  let concurrency: number | undefined;
  for (let index = 0; index < args.length; index++) {
    const arg = args[index];
    if (arg === "--url") url = args[++index];
    else if (arg === "--schema") schema = args[++index];
    else if (arg === "--concurrency") concurrency = Number(args[++index]);
    else throw new Error(`process_drain_worker: unexpected argument ${arg}`);
  }
  if (
    url === undefined || schema === undefined || !(concurrency !== undefined && concurrency >= 1)
  ) {
    throw new Error("process_drain_worker: usage: --url URL --schema NAME --concurrency N");
  }
  return { url, schema, concurrency };
}

/** Opens the queue, waits for `go`, drains until empty, reports. */
async function runDrainWorker(options: DrainWorkerOptions): Promise<void> {
  await using queue = isRedisUrl(options.url)
    ? await openRedisQueue(options.url, options.schema)
    : await openPostgresQueue(options.url, options.schema);
  console.log("ready");
  for await (const line of readLines(Deno.stdin.readable)) {
    if (line !== "go") continue;
    const worker = queue.work({
      executor: "isolate",
      concurrency: options.concurrency,
      stopWhenEmpty: true,
      pollMs: DRAIN_POLL_MS,
    });
    worker.addEventListener("queue:error", ({ detail }) => {
      console.error(`process_drain_worker: ${detail.during}: ${detail.error.message}`);
    });
    await worker.done;
    console.log(`done ${worker.stats.completed}`);
    break;
  }
}

if (import.meta.main) await runDrainWorker(parseArgs(Deno.args));
