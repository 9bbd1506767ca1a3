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
 * One thread serves every store connection of the process (or of the Web
 * Worker) that asks, with a connection of its own for each: a thread is an
 * isolate, some 12 MiB, and a process may open many stores. It is started
 * with the first request, so a process whose connections make few calls
 * never starts one; starting it holds the event loop for some tens of ms,
 * and nothing is sent to it before it says it listens (a message sent to
 * such a thread before then is lost). It ends once the last connection
 * that asked closed. It does not keep the process alive (a
 * `node:worker_threads` thread can be unref'd; a Web Worker cannot). Such
 * a thread loads only a `file:` or `data:` URL, and this library may be
 * loaded from `https:`, so the thread's code is {@linkcode threadMain}'s
 * own source, sent as a `data:` URL. When the thread cannot start or open
 * a connection's file, that connection's requests stop and its commits
 * checkpoint every 1,000 pages, alone; when it goes down, so do those of
 * every connection it served (a store that asks later starts a new one).
 * A store's close waits behind the checkpoints asked for before it, at most
 * one per connection the thread serves.
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

/** What a store connection's handle tells the thread, about its own connection `id` there. */
type Request =
  | {
    readonly type: "open";
    readonly id: number;
    /** The database file's absolute path. */
    readonly path: string;
    readonly durability: Durability;
  }
  | { readonly type: "checkpoint"; readonly id: number }
  | { readonly type: "close"; readonly id: number };

/**
 * What the thread answers: it listens (once, before it hears anything), or
 * of connection `id`: it is open, a checkpoint ended, or it is closed (or
 * could not be opened).
 */
type Answer =
  | { readonly type: "listening" }
  | { readonly type: "ready" | "checkpointed" | "closed"; readonly id: number };

/** What a handle hears about its connection in the thread. */
type ConnectionAnswer = Extract<Answer, { id: number }>["type"];

/**
 * The thread's whole code (its source is all the thread gets, so it
 * imports what it needs itself): one connection per store connection that
 * asked, each checkpointed when its store asks. Nothing is sent to it
 * before it says it listens, and it answers every request; what fails in it
 * is answered with `closed`, never thrown (Deno prints a thread's uncaught
 * error even to a parent that listens for it).
 */
async function threadMain(): Promise<void> {
  const { parentPort } = await import("node:worker_threads");
  const port = parentPort!;
  const answer = (message: Answer) => port.postMessage(message);
  let sqlite: typeof import("node:sqlite") | null = null;
  let fs: typeof import("node:fs") | null = null;
  try {
    sqlite = await import("node:sqlite");
    fs = await import("node:fs");
  } catch {
    // This process may not load them: every connection asked for is answered closed.
  }
  const connections = new Map<number, DatabaseSync>();
  port.on("message", (request: Request) => {
    const { id } = request;
    if (request.type === "open") {
      let db: DatabaseSync | null = null;
      try {
        // Opening makes a file that is not there; a `mode=rw` URI would not, but Deno's
        // permission check reads a URI as a path, and refuses it under --allow-read=<folder>.
        if (!fs!.existsSync(request.path)) throw new Error(`${request.path} is gone`);
        db = new sqlite!.DatabaseSync(request.path);
        db.exec(`PRAGMA synchronous = ${request.durability === "full" ? "FULL" : "NORMAL"}`);
        connections.set(id, db);
        answer({ type: "ready", id });
      } catch {
        // The file is gone, or this process may not open it: the commits' checkpoints remain.
        db?.close();
        answer({ type: "closed", id });
      }
      return;
    }
    const db = connections.get(id);
    if (request.type === "close" || db === undefined) {
      connections.delete(id);
      db?.close();
      answer({ type: "closed", id });
      return;
    }
    try {
      db.exec("PRAGMA wal_checkpoint(PASSIVE)");
    } catch {
      // A full disk or an I/O error: the store's own writes and checkpoints report it.
    }
    answer({ type: "checkpointed", id });
  });
  answer({ type: "listening" });
}

/** The thread's module: {@linkcode threadMain}'s source, called. */
const THREAD_MODULE = `(${threadMain.toString()})();`;

/**
 * The process's checkpoint thread: started by the first store connection
 * that asks for it, shared by every one that asks while it runs, ended once
 * the last of them closed. It holds the process only while a close waits
 * for its answer.
 */
class ThreadHost {
  /** The thread running now, or null. */
  static #running: ThreadHost | null = null;

  /**
   * The running thread, or a new one (starting it holds the caller some
   * tens of ms); null when no thread can be started here.
   */
  static running(): ThreadHost | null {
    if (ThreadHost.#running !== null) return ThreadHost.#running;
    let worker: Worker;
    try {
      worker = new Worker(new URL(`data:text/javascript,${encodeURIComponent(THREAD_MODULE)}`));
    } catch {
      return null;
    }
    ThreadHost.#running = new ThreadHost(worker);
    return ThreadHost.#running;
  }

  readonly #worker: Worker;
  /** Whether the thread said it listens: requests made before wait in `#unsent`. */
  #listening = false;
  readonly #unsent: Request[] = [];
  /** Each registered connection's listener, by id. */
  readonly #connections = new Map<number, (answer: ConnectionAnswer) => void>();
  /** The closes waiting for the thread's answer, by id. */
  readonly #closes = new Map<number, () => void>();
  /** The thread went down, or was ended after its last connection closed. */
  #ended = false;

  private constructor(worker: Worker) {
    this.#worker = worker;
    worker.unref();
    worker.on("message", (answer: Answer) => {
      if (answer.type === "listening") {
        this.#listening = true;
        for (const request of this.#unsent.splice(0)) worker.postMessage(request);
        return;
      }
      this.#connections.get(answer.id)?.(answer.type);
      if (answer.type === "closed") this.#closes.get(answer.id)?.();
    });
    // Its code answers every failure of its own; an error here means the thread went down.
    worker.on("error", () => this.#wentDown());
    worker.on("exit", () => this.#wentDown());
  }

  /** Opens connection `id` to the file at `path` in the thread; `onAnswer` hears of it from then on. */
  open(
    id: number,
    path: string,
    durability: Durability,
    onAnswer: (answer: ConnectionAnswer) => void,
  ): void {
    this.#connections.set(id, onAnswer);
    if (this.#ended) return onAnswer("closed");
    this.#send({ type: "open", id, path, durability });
  }

  /** Asks for a checkpoint of connection `id`'s file. */
  checkpoint(id: number): void {
    this.#send({ type: "checkpoint", id });
  }

  /**
   * Closes connection `id` in the thread, after the checkpoint it may be
   * running (a PASSIVE checkpoint never waits for a lock, and ends), holding
   * the process until then; the last connection's close ends the thread.
   */
  async close(id: number): Promise<void> {
    if (!this.#ended) {
      const closed = Promise.withResolvers<void>();
      this.#closes.set(id, closed.resolve);
      if (this.#closes.size === 1) this.#worker.ref();
      this.#send({ type: "close", id });
      await closed.promise;
      this.#closes.delete(id);
      if (this.#closes.size === 0) this.#worker.unref();
    }
    this.#connections.delete(id);
    if (this.#connections.size > 0) return;
    this.#end();
    // terminate() cannot stop SQLite's native code, and no checkpoint runs now.
    await this.#worker.terminate();
  }

  #send(request: Request): void {
    if (this.#ended) return;
    if (this.#listening) this.#worker.postMessage(request);
    else this.#unsent.push(request);
  }

  /** No request is sent from now on, and a connection that asks next starts a new thread. */
  #end(): void {
    this.#ended = true;
    if (ThreadHost.#running === this) ThreadHost.#running = null;
  }

  /** Every connection in it is closed; closes waiting for an answer have it. */
  #wentDown(): void {
    if (this.#ended) return;
    this.#end();
    for (const onAnswer of this.#connections.values()) onAnswer("closed");
    for (const closed of this.#closes.values()) closed();
  }
}

/** The checkpoint thread as one store connection uses it (see the module's doc). */
export class CheckpointThread {
  /** The last id given to a connection. */
  static #lastId = 0;
  readonly #id = ++CheckpointThread.#lastId;
  readonly #db: DatabaseSync;
  readonly #path: string;
  readonly #durability: Durability;
  /** The thread this connection asked, once it asked. */
  #host: ThreadHost | null = null;
  /** Calls since the last request. */
  #calls = 0;
  /** The connection's `total_changes()` (rows it wrote) at the last request. */
  #changesAsked = 0;
  /** Reads the connection's `total_changes()`, prepared with the first look. */
  #changesRead: StatementSync | null = null;
  /** A checkpoint was asked for (or the connection is opening) and has not ended: no second request. */
  #asked = false;
  /** The thread could not start, closed its connection, or close() was called: no more requests. */
  #stopped = false;
  /** close() was called: the store's connection is about to close too. */
  #closing = false;
  /** Settles once close() has closed the connection in the thread: every call of close() waits for it. */
  #closed: Promise<void> | null = null;

  /** For the store's connection `db` to the file at `path`, flushed as `durability` says. */
  constructor(db: DatabaseSync, path: string, durability: Durability) {
    this.#db = db;
    this.#path = resolve(path);
    this.#durability = durability;
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
    if (this.#host !== null) return this.#host.checkpoint(this.#id);
    // A connection opening in the thread asks for its first checkpoint once it is ready.
    this.#host = ThreadHost.running();
    if (this.#host === null) this.#stopped = true;
    else this.#host.open(this.#id, this.#path, this.#durability, (answer) => this.#heard(answer));
  }

  /**
   * Closes its connection in the thread, after the checkpoint it may be
   * running; the thread ends with the last one.
   */
  close(): Promise<void> {
    this.#stopped = true;
    this.#closing = true;
    this.#closed ??= this.#host?.close(this.#id) ?? Promise.resolve();
    return this.#closed;
  }

  #heard(answer: ConnectionAnswer): void {
    if (answer === "ready") {
      if (this.#closing) return;
      this.#setCommitCheckpointPages(THREAD_COMMIT_CHECKPOINT_PAGES);
      this.#host!.checkpoint(this.#id);
    } else if (answer === "checkpointed") {
      this.#asked = false;
    } else {
      // Its connection is closed, could not be opened, or the thread went down.
      this.#stopped = true;
      // Without the thread, the commits checkpoint as SQLite's default has them do.
      if (!this.#closing) this.#setCommitCheckpointPages(SQLITE_COMMIT_CHECKPOINT_PAGES);
    }
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
