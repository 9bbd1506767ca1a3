/**
 * The pick-up worker process: a separate `deno run` that opens the bench's
 * database, runs an idle worker on it (concurrency 1, Web Worker executor,
 * as the `work` command runs by default), and reports on stdout when each
 * pick-up job's handler starts and when the job completes. It stops when its
 * stdin closes.
 *
 * ```sh
 * deno run -A bench/pickup_worker.ts --db PATH --poll-ms N [--no-watch]
 * deno run -A bench/pickup_worker.ts --db postgres://… --schema NAME --poll-ms N [--no-watch]
 * deno run -A bench/pickup_worker.ts --db redis://… --schema PREFIX --poll-ms N [--no-watch]
 * ```
 *
 * `--no-watch` opens the database as a `file:` URI, which the SQLite store
 * does not watch, or on PostgreSQL and Redis hides the store's `watch()` so
 * that it never `LISTEN`s or subscribes: the worker then learns of new jobs
 * only by polling.
 *
 * @module
 */
import { fileURLToPath, pathToFileURL } from "node:url";
import { Queue } from "../mod.ts";
import { BENCH_JOBS_URL } from "./jobs.ts";
import { listenForPickups } from "./pickup_signal.ts";
import { isRedisUrl } from "../src/stores/database_url.ts";
import { isPostgresUrl } from "./postgres_url.ts";

/** How the pick-up worker process is asked to run. */
export interface PickupWorkerOptions {
  /** The database file (a plain path), or a `postgres://` or `redis://` URL. */
  readonly db: string;
  /** The PostgreSQL schema with a `postgres://` URL; the key prefix with a `redis://` one. */
  readonly schema?: string;
  /** The worker's `pollMs`. */
  readonly pollMs: number;
  /** Whether the store may watch the WAL file for other processes' commits. */
  readonly watch: boolean;
}

/** One line the worker process prints. */
export type PickupWorkerLine =
  | { readonly kind: "ready" }
  | { readonly kind: "start"; readonly id: number; readonly latencyMs: number }
  | { readonly kind: "complete"; readonly id: number };

/** The command that starts the worker process (stdin and stdout piped, stderr inherited). */
export function pickupWorkerCommand(options: PickupWorkerOptions): Deno.Command {
  const script = fileURLToPath(import.meta.url);
  const config = fileURLToPath(new URL("../deno.json", import.meta.url));
  const args = ["run", "-A", "--quiet", "--config", config, script];
  args.push("--db", options.db, "--poll-ms", String(options.pollMs));
  if (options.schema !== undefined) args.push("--schema", options.schema);
  if (!options.watch) args.push("--no-watch");
  return new Deno.Command(Deno.execPath(), {
    args,
    stdin: "piped",
    stdout: "piped",
    stderr: "inherit",
  });
}

/** Reads one line of the worker's output; null for a line that is not part of the protocol. */
export function parsePickupWorkerLine(line: string): PickupWorkerLine | null {
  const [kind, id, latency] = line.split(" ");
  if (kind === "ready" && id === undefined) return { kind };
  if (kind === "complete" && id !== undefined) return { kind, id: Number(id) };
  if (kind === "start" && id !== undefined && latency !== undefined) {
    return { kind, id: Number(id), latencyMs: Number(latency) };
  }
  return null;
}

function formatLine(line: PickupWorkerLine): string {
  switch (line.kind) {
    case "ready":
      return "ready";
    case "start":
      return `start ${line.id} ${line.latencyMs}`;
    case "complete":
      return `complete ${line.id}`;
  }
}

function parseArgs(args: readonly string[]): PickupWorkerOptions {
  let db: string | undefined;
  let schema: string | undefined;
  let pollMs: number | undefined;
  let watch = true;
  for (let index = 0; index < args.length; index++) {
    const arg = args[index];
    if (arg === "--db") db = args[++index];
    else if (arg === "--schema") schema = args[++index];
    else if (arg === "--poll-ms") pollMs = Number(args[++index]);
    else if (arg === "--no-watch") watch = false;
    else throw new Error(`pickup_worker: unexpected argument ${arg}`);
  }
  if (db === undefined || !(pollMs !== undefined && pollMs >= 1)) {
    throw new Error(
      "pickup_worker: usage: --db PATH|postgres://…|redis://… [--schema NAME] --poll-ms N " +
        "[--no-watch]",
    );
  }
  if ((isPostgresUrl(db) || isRedisUrl(db)) && schema === undefined) {
    throw new Error("pickup_worker: a postgres:// or redis:// URL needs --schema NAME");
  }
  return { db, pollMs, watch, ...(schema !== undefined && { schema }) };
}

/** Runs the worker until stdin closes. */
async function runPickupWorker(options: PickupWorkerOptions): Promise<void> {
  const print = (line: PickupWorkerLine) => console.log(formatLine(line));
  await using queue = isRedisUrl(options.db)
    // Imported only here, so that the SQLite bench never loads the client.
    ? await (await import("./redis_queue.ts")).openRedisQueue(
      options.db,
      options.schema!,
      { watch: options.watch },
    )
    : isPostgresUrl(options.db)
    // Imported only here, so that the SQLite bench never loads the driver.
    ? await (await import("./postgres_queue.ts")).openPostgresQueue(
      options.db,
      options.schema!,
      { watch: options.watch },
    )
    : await Queue.open({
      path: options.watch ? options.db : pathToFileURL(options.db).href,
      jobs: BENCH_JOBS_URL,
    });
  using _pickups = listenForPickups(({ id, latencyMs }) => print({ kind: "start", id, latencyMs }));
  const worker = queue.work({ executor: "workers", concurrency: 1, pollMs: options.pollMs });
  worker.addEventListener(
    "job:complete",
    ({ detail }) => print({ kind: "complete", id: detail.id }),
  );
  worker.addEventListener("queue:error", ({ detail }) => {
    console.error(`pickup_worker: ${detail.during}: ${detail.error.message}`);
  });
  print({ kind: "ready" });
  for await (const _ of Deno.stdin.readable) {
    // nothing is sent: the bench closes stdin to stop this process
  }
  await worker.stop({ graceMs: 1_000 });
}

if (import.meta.main) await runPickupWorker(parseArgs(Deno.args));
