/**
 * Copying the WAL into the database file on a thread of its own. A
 * checkpoint flushes the WAL and then the database file to the disk, and a
 * checkpoint SQLite runs inside a commit holds that commit up for those
 * flushes: with SQLite's default of one every 1,000 pages, half a stream of
 * one-row commits' time (docs/performance.md, "Checkpoints on a thread of
 * their own"). Here a second connection, on a `node:worker_threads` thread,
 * runs `PRAGMA wal_checkpoint(PASSIVE)` every {@linkcode CHECKPOINT_EVERY}
 * calls of the store's connection, so the flushes happen beside the
 * commits. A commit still checkpoints every `WAL_CHECKPOINT_PAGES` pages
 * (`./wal_checkpoint.ts`): only the writer can start the WAL over from its
 * beginning, once it finds it all copied, which a thread copying beside a
 * steady stream of commits never leaves it; that commit then has only the
 * frames the thread has not copied yet to flush. A PASSIVE checkpoint never
 * waits for a lock; while it runs, a commit's own checkpoint is skipped
 * until a later commit. It is SQLite's own checkpoint, as safe to kill as
 * any other.
 *
 * The thread is started with the first request, so a connection that makes
 * few calls never starts one; starting it holds the event loop for some
 * tens of ms, once. It does not keep the process alive (a
 * `node:worker_threads` thread can be unref'd; a Web Worker cannot). Such a
 * thread loads only a `file:` or `data:` URL, and this library may be loaded
 * from `https:`, so the thread's code is {@linkcode threadMain}'s own
 * source, sent as a `data:` URL. When the thread cannot start or open the
 * file, the requests stop and the commits' own checkpoints do the work alone.
 *
 * @internal
 * @module
 */
import { resolve } from "node:path";
import { Worker } from "node:worker_threads";
import { waitAtMost } from "../close_wait.ts";
import type { Durability } from "./connection.ts";

/** How many calls of the store's connection go between two requests for a checkpoint. */
export const CHECKPOINT_EVERY = 64;

/**
 * How long close() waits for the thread to close its connection, and then
 * for the thread to end once told to: a checkpoint it is running ends first.
 */
const THREAD_CLOSE_WAIT_MS = 5_000;

/** What the thread is told: copy what the WAL holds, or close the connection. */
type Request = "checkpoint" | "close";

/** What the thread answers: a checkpoint ended, or its connection is closed or never opened. */
type Answer = "checkpointed" | "closed";

/** What the thread is started with. */
interface ThreadData {
  /** The database file's absolute path. */
  readonly path: string;
  readonly durability: Durability;
}

/**
 * The thread's whole code. It must stand alone (its source is all the
 * thread gets): it imports what it needs itself, and answers every request.
 */
async function threadMain(): Promise<void> {
  const { parentPort, workerData } = await import("node:worker_threads");
  const { DatabaseSync } = await import("node:sqlite");
  const { existsSync } = await import("node:fs");
  const port = parentPort!;
  const { path, durability } = workerData as ThreadData;
  const answer = (message: Answer) => port.postMessage(message);
  let db: InstanceType<typeof DatabaseSync>;
  try {
    // Opening makes a file that is not there; a `mode=rw` URI would not, but Deno's permission
    // check reads a URI as a path, and refuses it under --allow-read=<folder>.
    if (!existsSync(path)) throw new Error(`${path} is gone`);
    db = new DatabaseSync(path);
    db.exec(`PRAGMA synchronous = ${durability === "full" ? "FULL" : "NORMAL"}`);
  } catch {
    // The file is gone, or this process may not open it: the commits' checkpoints remain.
    answer("closed");
    return;
  }
  port.on("message", (request: Request) => {
    if (request === "close") {
      db.close();
      answer("closed");
      return;
    }
    try {
      db.exec("PRAGMA wal_checkpoint(PASSIVE)");
    } catch {
      // A full disk or an I/O error: the store's own writes and checkpoints report it.
    }
    answer("checkpointed");
  });
}

/** The checkpoint thread of one store connection (see the module's doc). */
export class CheckpointThread {
  readonly #data: ThreadData;
  #worker: Worker | null = null;
  /** Calls since the last request. */
  #calls = 0;
  /** A checkpoint was asked for and has not ended: no second request meanwhile. */
  #asked = false;
  /** The thread could not start, closed its connection, or close() was called: no more requests. */
  #stopped = false;
  /** Resolved once the thread's connection is closed (or was never opened). */
  readonly #connectionClosed = Promise.withResolvers<void>();
  /** Resolved once the thread has ended. */
  readonly #ended = Promise.withResolvers<void>();

  /** For the database file at `path`, flushed as `durability` says. */
  constructor(path: string, durability: Durability) {
    this.#data = { path: resolve(path), durability };
  }

  /** Counts one call of the store's connection; every {@linkcode CHECKPOINT_EVERY}th asks for a checkpoint. */
  countCall(): void {
    if (++this.#calls < CHECKPOINT_EVERY || this.#asked || this.#stopped) return;
    this.#calls = 0;
    this.#asked = true;
    (this.#worker ??= this.#start())?.postMessage("checkpoint" satisfies Request);
  }

  /**
   * Ends the thread once it closed its connection, waiting at most
   * {@linkcode THREAD_CLOSE_WAIT_MS} for each.
   */
  async close(): Promise<void> {
    this.#stopped = true;
    const worker = this.#worker;
    if (worker === null) return;
    worker.postMessage("close" satisfies Request);
    await waitAtMost(this.#connectionClosed.promise, THREAD_CLOSE_WAIT_MS);
    void worker.terminate();
    await waitAtMost(this.#ended.promise, THREAD_CLOSE_WAIT_MS);
  }

  #start(): Worker | null {
    const source = `(${threadMain.toString()})();`;
    let worker: Worker;
    try {
      worker = new Worker(new URL(`data:text/javascript,${encodeURIComponent(source)}`), {
        workerData: this.#data,
      });
    } catch {
      this.#stopped = true;
      return null;
    }
    worker.unref();
    const stop = () => {
      this.#stopped = true;
      this.#connectionClosed.resolve();
    };
    worker.on("message", (answer: Answer) => {
      if (answer === "checkpointed") this.#asked = false;
      else stop();
    });
    // Its code answers every failure of its own; an error here means the thread went down.
    worker.on("error", stop);
    worker.on("exit", () => {
      stop();
      this.#ended.resolve();
    });
    return worker;
  }
}
