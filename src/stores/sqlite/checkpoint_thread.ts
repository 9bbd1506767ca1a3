/**
 * Copying the WAL into the database file on a thread of its own. A
 * checkpoint flushes the WAL and then the database file to the disk, and a
 * checkpoint SQLite runs inside a commit holds that commit up for those
 * flushes: with SQLite's default of one every 1,000 pages, half a stream of
 * one-row commits' time (docs/performance.md, "Checkpoints on a thread of
 * their own"). Here a second connection, on a `node:worker_threads` thread,
 * runs `PRAGMA wal_checkpoint(PASSIVE)` every {@linkcode CHECKPOINT_EVERY}
 * calls of the store's connection that wrote as many rows, so the flushes
 * happen beside the commits. While the thread runs, a commit checkpoints every
 * {@linkcode THREAD_COMMIT_CHECKPOINT_PAGES} pages instead: only the writer
 * can start the WAL over from its beginning, once it finds it all copied,
 * which a thread copying beside a steady stream of commits never leaves it;
 * that commit then has only the frames the thread has not copied yet to
 * flush. A PASSIVE checkpoint never waits for a lock; while it runs, a
 * commit's own checkpoint is skipped until a later commit. It is SQLite's
 * own checkpoint, as safe to kill as any other.
 *
 * The thread is started with the first request, so a connection that makes
 * few calls never starts one; starting it holds the event loop for some
 * tens of ms, once, and the store sends it nothing before it says it is
 * ready (a message sent to such a thread before it listens is lost). It
 * does not keep the process alive (a `node:worker_threads` thread can be
 * unref'd; a Web Worker cannot). Such a thread loads only a `file:` or `data:` URL, and this
 * library may be loaded from `https:`, so the thread's code is
 * {@linkcode threadMain}'s own source, sent as a `data:` URL. When the
 * thread cannot start or open the file, the requests stop and the commits
 * checkpoint every 1,000 pages, alone.
 *
 * @internal
 * @module
 */
import { resolve } from "node:path";
import { Worker } from "node:worker_threads";
import type { DatabaseSync, StatementSync } from "node:sqlite";
import type { Durability } from "./connection.ts";

/**
 * How many calls of the store's connection go between two requests for a
 * checkpoint, and how many rows they must have written for one: a
 * connection that mostly reads or polls (a worker waiting for jobs, a lease
 * renewed now and then) never starts the thread, nor holds its event loop
 * for the start.
 */
export const CHECKPOINT_EVERY = 64;

/**
 * How many pages a commit lets the WAL take before it checkpoints, while
 * the thread runs (about 40 MiB). That checkpoint flushes only what the
 * thread has not copied yet, but its flushes still hold the commit up for
 * milliseconds.
 */
export const THREAD_COMMIT_CHECKPOINT_PAGES = 10_000;

/** SQLite's own: how many pages a commit lets the WAL take when no thread runs. */
const SQLITE_COMMIT_CHECKPOINT_PAGES = 1_000;

/** What the thread is told: copy what the WAL holds, or close the connection. */
type Request = "checkpoint" | "close";

/**
 * What the thread answers: its connection is open, a checkpoint ended, or
 * its connection is closed (or could not be opened).
 */
type Answer = "ready" | "checkpointed" | "closed";

/** What the thread is started with. */
interface ThreadData {
  /** The database file's absolute path. */
  readonly path: string;
  readonly durability: Durability;
}

/**
 * The thread's whole code (its source is all the thread gets, so it
 * imports what it needs itself). The store sends nothing before the
 * thread's `ready`, and the thread answers every request; what fails in it
 * is answered with `closed`, never thrown (Deno prints a thread's uncaught
 * error even to a parent that listens for it).
 */
async function threadMain(): Promise<void> {
  const { parentPort, workerData } = await import("node:worker_threads");
  const port = parentPort!;
  const answer = (message: Answer) => port.postMessage(message);
  const { path, durability } = workerData as ThreadData;
  let db: DatabaseSync;
  try {
    const { DatabaseSync } = await import("node:sqlite");
    const { existsSync } = await import("node:fs");
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
  answer("ready");
}

/** The thread's module: {@linkcode threadMain}'s source, called. */
const THREAD_MODULE = `(${threadMain.toString()})();`;

/** The checkpoint thread of one store connection (see the module's doc). */
export class CheckpointThread {
  readonly #db: DatabaseSync;
  readonly #data: ThreadData;
  #worker: Worker | null = null;
  /** Calls since the last request. */
  #calls = 0;
  /** The connection's `total_changes()` (rows it wrote) at the last request. */
  #changesAsked = 0;
  /** Reads the connection's `total_changes()`, prepared with the first look. */
  #changesRead: StatementSync | null = null;
  /** A checkpoint was asked for (or the thread is starting) and has not ended: no second request. */
  #asked = false;
  /** The thread could not start, closed its connection, or close() was called: no more requests. */
  #stopped = false;
  /** close() was called: the store's connection is about to close too. */
  #closing = false;
  /** Resolved once the thread is ready for requests, or will never be. */
  readonly #ready = Promise.withResolvers<void>();
  /** Resolved once the thread's connection is closed (or was never opened). */
  readonly #connectionClosed = Promise.withResolvers<void>();

  /** For the store's connection `db` to the file at `path`, flushed as `durability` says. */
  constructor(db: DatabaseSync, path: string, durability: Durability) {
    this.#db = db;
    this.#data = { path: resolve(path), durability };
  }

  /**
   * Counts one call of the store's connection; every
   * {@linkcode CHECKPOINT_EVERY}th asks for a checkpoint, when the calls
   * since the last request wrote as many rows.
   */
  countCall(): void {
    if (++this.#calls < CHECKPOINT_EVERY || this.#asked || this.#stopped) return;
    this.#calls = 0;
    this.#changesRead ??= this.#db.prepare("SELECT total_changes() AS changes");
    const changes = Number(this.#changesRead.get()!.changes);
    if (changes - this.#changesAsked < CHECKPOINT_EVERY) return;
    this.#changesAsked = changes;
    this.#asked = true;
    // A thread starting asks for its first checkpoint once it says it is ready.
    if (this.#worker === null) this.#worker = this.#start();
    else this.#worker.postMessage("checkpoint" satisfies Request);
  }

  /**
   * Ends the thread once it closed its connection, after the checkpoint it
   * is running (a PASSIVE checkpoint never waits for a lock, and ends).
   */
  async close(): Promise<void> {
    this.#stopped = true;
    this.#closing = true;
    const worker = this.#worker;
    if (worker === null) return;
    // Unref'd, the thread's answers would not keep a process with nothing else to do waiting.
    worker.ref();
    await this.#ready.promise;
    worker.postMessage("close" satisfies Request);
    await this.#connectionClosed.promise;
    await worker.terminate();
  }

  #start(): Worker | null {
    let worker: Worker;
    try {
      worker = new Worker(new URL(`data:text/javascript,${encodeURIComponent(THREAD_MODULE)}`), {
        workerData: this.#data,
      });
    } catch {
      this.#stopped = true;
      return null;
    }
    worker.unref();
    worker.on("message", (answer: Answer) => {
      if (answer === "ready") {
        this.#ready.resolve();
        if (this.#closing) return;
        this.#setCommitCheckpointPages(THREAD_COMMIT_CHECKPOINT_PAGES);
        worker.postMessage("checkpoint" satisfies Request);
      } else if (answer === "checkpointed") {
        this.#asked = false;
      } else {
        this.#ended();
      }
    });
    // Its code answers every failure of its own; an error here means the thread went down.
    worker.on("error", () => this.#ended());
    worker.on("exit", () => this.#ended());
    return worker;
  }

  /** The thread's connection is closed, or it never opened one, or the thread went down. */
  #ended(): void {
    this.#stopped = true;
    // Without the thread, the commits checkpoint as SQLite's default has them do.
    if (!this.#closing) this.#setCommitCheckpointPages(SQLITE_COMMIT_CHECKPOINT_PAGES);
    this.#ready.resolve();
    this.#connectionClosed.resolve();
  }

  /** Sets how many pages the store's connection lets the WAL take before a commit checkpoints. */
  #setCommitCheckpointPages(pages: number): void {
    try {
      this.#db.exec(`PRAGMA wal_autocheckpoint = ${pages}`);
    } catch {
      // The connection was closed before this thread: nothing to set any more.
    }
  }
}
