/**
 * The Redis store's connection: one client for every call, and a second one
 * opened on the first watcher for the wake-up channel. The store's rules are
 * functions of one library, loaded on the first call and again when the
 * server does not know them (a restart without persistence, a
 * `FUNCTION FLUSH`); a call whose reply was lost rejects, never re-sent.
 *
 * @internal
 * @module
 */
// A full specifier: an app importing this module from another folder resolves bare names with
// its own import map, which need not list this dependency.
// deno-lint-ignore no-import-prefix
import { ClientOfflineError, createClient, SimpleError } from "npm:@redis/client@^6.4";
import { AsyncLocalStorage } from "node:async_hooks";
import { QueueClosedError, QueueLostError, QueueMovedError } from "../../errors.ts";
import { redactPassword } from "../database_url.ts";
import { CLOSE_WAITS_MS, closedUnderTransaction, waitAtMost } from "../close_wait.ts";
import { type FunctionLibrary, functionLibrary, type LuaScript } from "./lua.ts";
import { DispatchShift } from "../steady_shift.ts";

/** The client of `@redis/client`, as the store uses it. */
type Client = ReturnType<typeof createClient>;

/** Where and how a connection connects. */
export interface ConnectionSettings {
  /** `redis://` or `rediss://`, without the `prefix` parameter. */
  readonly url: string;
  /** How long connecting may take before a call rejects, in ms. */
  readonly connectTimeoutMs: number;
}

/** What every script's input carries besides its own fields. */
export interface CallContext {
  /** The caller's now. */
  readonly now: number;
}

/** One client, its scripts loaded on demand, and a subscriber opened for watchers. */
export class RedisConnection {
  readonly #settings: ConnectionSettings;
  /** The client of every call: replaced when its handshake hangs (see {@linkcode watchHandshake}). */
  #client: Client;
  /** Stops watching the current client's handshake. */
  #unwatchHandshake: () => void = () => {};
  readonly #metaKey: string;
  readonly #channel: string;
  #subscriber: Client | null = null;
  readonly #listeners = new Set<() => void>();
  #closed = false;
  /** Set by close(): no transaction begins, and the connection closes once those open have ended. */
  #closing = false;
  /**
   * The transactions begun and not yet ended, each settling when it ends,
   * with the controller close() aborts once it has waited for them
   * {@linkcode CLOSE_WAITS_MS}.
   */
  readonly #transactions = new Map<Promise<unknown>, AbortController>();
  /** The client's last error (a failed reconnect says why), for a call that waited in vain. */
  #lastError: unknown = null;
  /** Whether the store goes by the server's clock. */
  readonly databaseClock: boolean;
  /** The shift onto the server's clock its last dispatch used, the next one's hint. */
  readonly dispatchShift: DispatchShift = new DispatchShift();
  /** The epoch every call checks; null until the store read it. */
  epoch: string | null = null;
  /** The prefix every key starts with, braces included (`{renox}`). */
  readonly prefix: string;
  /**
   * Set inside a transaction's callback (the transaction, while open), to
   * refuse calls that would escape the transaction; unset again for the
   * transaction's own writes.
   */
  readonly #insideTransaction = new AsyncLocalStorage<{ readonly open: boolean } | null>();

  private constructor(settings: ConnectionSettings, client: Client, prefix: string, db: boolean) {
    this.#settings = settings;
    this.#client = client;
    this.prefix = prefix;
    this.#metaKey = `${prefix}:meta`;
    this.#channel = `${prefix}:wake`;
    this.databaseClock = db;
    this.#adopt(client);
  }

  /**
   * Makes `client` the one every call uses: its errors name a later outage,
   * and a handshake that hangs replaces it with a new one.
   */
  #adopt(client: Client): void {
    client.on("error", (error) => this.#lastError = error);
    client.on("ready", () => this.#lastError = null); // a later outage names its own cause
    this.#unwatchHandshake = watchHandshake(client, this.#handshakeWaitMs, () => {
      if (this.#closed || this.#client !== client) return;
      const fresh = newClient(this.#settings);
      this.#adopt(fresh);
      this.#client = fresh;
      client.destroy(); // no call waits on it: calls are refused until it is ready
      fresh.connect().catch(() => {/* it connects again on its own, calls wait for it */});
      this.#lastError = new Error(
        `a connection was made, but the server did not answer its handshake within ${this.#handshakeWaitMs} ms`,
      );
    });
  }

  /** How long a connection made may go without the server's answer to its handshake, in ms. */
  get #handshakeWaitMs(): number {
    return Math.max(this.#settings.connectTimeoutMs, HANDSHAKE_WAIT_MIN_MS);
  }

  /** Connects to `settings.url`; keys go under `prefix` (a hash tag, braces included). */
  static async open(
    settings: ConnectionSettings,
    prefix: string,
    databaseClock: boolean,
  ): Promise<RedisConnection> {
    const client = newClient(settings);
    // The client retries a refused first connection forever: give up after connectTimeoutMs, or
    // at once when the server refuses what the URL asks for (a password, a database).
    const refused = Promise.withResolvers<never>();
    // An error event without a listener would end the process; a call that fails rejects.
    let lastError: unknown = null;
    let opening = true;
    client.on("error", (error) => {
      lastError = error;
      if (opening && isRefusal(error)) {
        refused.reject(new Error(`the server refused it: ${error.message}`));
      }
    });
    let timer: ReturnType<typeof setTimeout> | undefined;
    const connected = client.connect();
    const timedOut = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const detail = (lastError as Error | null)?.message ?? "no answer";
        reject(new Error(`no connection within ${settings.connectTimeoutMs} ms: ${detail}`));
      }, settings.connectTimeoutMs);
    });
    try {
      await Promise.race([connected, timedOut, refused.promise]);
    } catch (error) {
      connected.catch(() => {});
      client.destroy();
      throw error;
    } finally {
      clearTimeout(timer);
      opening = false;
    }
    return new RedisConnection(settings, client, prefix, databaseClock);
  }

  /** How long a call waits for the connection, in ms, and a dispatch for a key a transaction holds. */
  get connectTimeoutMs(): number {
    return this.#settings.connectTimeoutMs;
  }

  /** The client, for plain commands (reads of `INFO`, cleanup). */
  get client(): Client {
    if (this.#closed) throw new QueueClosedError("use the Redis store");
    return this.#client;
  }

  /**
   * Runs `script` with `input` (the prelude's fields added: `now`, `db`,
   * `epoch`) and returns its JSON reply parsed, or null when it returns nothing.
   */
  async call<T>(script: LuaScript, input: CallContext & Record<string, unknown>): Promise<T> {
    if (this.#insideTransaction.getStore()?.open === true) {
      // Worded as the SQL stores word it. Its writes would not be the transaction's, and a
      // dispatch of a key the transaction holds would wait for it, and so for itself.
      throw new Error(
        "Cannot use the queue inside its own transaction callback: it would run outside the transaction; use the tx handle (tx.dispatch)",
      );
    }
    const argument = JSON.stringify({
      ...input,
      db: this.databaseClock,
      ...(this.epoch === null ? {} : { epoch: this.epoch }),
    });
    const deadline = Date.now() + this.#settings.connectTimeoutMs;
    let reply: unknown;
    for (;;) {
      try {
        reply = await this.#evaluate(script, argument);
        break;
      } catch (error) {
        // Closed meanwhile (a wait for a result, say): said as the SQL stores say it.
        if (error instanceof QueueClosedError) throw error;
        if (isConnectionError(error)) {
          // Sent, its reply lost: the store decides whether to send it again.
          if (!(error instanceof ClientOfflineError)) throw this.#unreachable(error);
          // Not sent, the client reconnecting: every call waits for the connection up to
          // connectTimeoutMs (docs/redis.md), as a dispatch does, rather than failing at once.
          await this.#untilReady(error, deadline);
        } else if (LOADING.test(replyText(error))) {
          // A restarted server loading its data ran nothing: the call waits for it as it waits
          // for a connection.
          if (Date.now() >= deadline) throw this.#stillLoading(error);
          await sleep(Math.min(LOADING_POLL_MS, deadline - Date.now()));
        } else {
          throw this.#scriptError(script, error);
        }
      }
    }
    return (reply === null || reply === undefined ? null : JSON.parse(String(reply))) as T;
  }

  /**
   * Runs `script` as {@linkcode RedisConnection.call} does; when the call's
   * outcome is unknown (the connection dropped before its reply), calls it
   * once more with the same input once the client is connected again. For
   * the scripts of `dispatch_script.ts`: the input gets `token`, the call's
   * own, which makes the second run give back the first one's reply,
   * `keepS`, how long the server must keep that reply, and on the second
   * run `resent` (only then may the token's reply be there to look for).
   */
  async callIdempotent<T>(
    script: LuaScript,
    input: CallContext & Record<string, unknown>,
  ): Promise<T> {
    // The server keeps the first reply as long as the second call may come, and a margin.
    const withKeep = {
      ...input,
      token: crypto.randomUUID(),
      keepS: Math.ceil(this.#settings.connectTimeoutMs / 1000) + 30,
    };
    try {
      return await this.call<T>(script, withKeep);
    } catch (error) {
      // Never sent (no connection within connectTimeoutMs): nothing to send again.
      if (!isConnectionError(error) || NOT_SENT.has(error as Error)) throw error;
      await this.whenReconnected(error);
      return await this.call<T>(script, { ...withKeep, resent: true });
    }
  }

  /**
   * Runs `callback`, the callback of `transaction`: while that is open, a
   * call made from it, or from work it started, is refused (see
   * {@linkcode RedisConnection.transactionWrite} for the transaction's own).
   * Only this connection's: another store's calls run.
   */
  transactionCallback<T>(transaction: { readonly open: boolean }, callback: () => T): T {
    return this.#insideTransaction.run(transaction, callback);
  }

  /**
   * Runs `transaction` (a transaction, from its begin to its end), which
   * close() waits for, as the SQL stores' close does, for
   * {@linkcode CLOSE_WAITS_MS} at most: then it aborts `closing`, for the
   * transaction to roll back and reject, and waits for that. Refused once
   * the store is closing.
   */
  async keptOpenFor<T>(transaction: (closing: AbortSignal) => Promise<T>): Promise<T> {
    if (this.#closing) throw new QueueClosedError("start a transaction");
    const closing = new AbortController();
    const running = transaction(closing.signal);
    this.#transactions.set(running, closing);
    try {
      return await running;
    } finally {
      this.#transactions.delete(running);
    }
  }

  /** Runs `write`, a write of the open transaction whose callback calls it: not refused. */
  transactionWrite<T>(write: () => T): T {
    return this.#insideTransaction.run(null, write);
  }

  /** Resolves once the client is ready again, or rejects naming `cause` after `connectTimeoutMs`. */
  async whenReconnected(cause: unknown): Promise<void> {
    await this.#untilReady(cause, Date.now() + this.#settings.connectTimeoutMs);
  }

  /**
   * Resolves once the client is ready, or rejects at `deadline` saying the
   * server cannot be reached, with the client's last error (else `cause`).
   */
  async #untilReady(cause: unknown, deadline: number): Promise<void> {
    while (!this.client.isReady) {
      if (Date.now() >= deadline) {
        const error = this.#unreachable(
          this.#lastError ?? cause,
          `no answer within ${this.#settings.connectTimeoutMs} ms`,
        );
        NOT_SENT.add(error);
        throw error;
      }
      await sleep(20);
    }
  }

  /**
   * A connection failure as an error that says the server cannot be
   * reached, naming it (password hidden) and keeping the client's error as
   * the cause; its `code` marks it for the runner's outage detection.
   */
  #unreachable(error: unknown, after?: string): Error {
    const cause = (error as { code?: unknown })?.code === UNREACHABLE
      ? (error as Error).cause ?? error
      : error;
    const detail = (cause as Error)?.message ?? String(cause);
    const wrapped = new Error(
      `Cannot reach the Redis server at ${redactPassword(this.#settings.url)}: ${
        after === undefined ? detail : `${after} (${detail})`
      } (the server is down, restarting or cut the connection; calls work again once it is back)`,
      { cause },
    );
    return Object.assign(wrapped, { code: UNREACHABLE });
  }

  async #evaluate(script: LuaScript, argument: string): Promise<unknown> {
    const client = this.client;
    const library = await functionLibrary();
    // Called first, loaded only when the server does not know it: a server out of memory
    // refuses FUNCTION LOAD, but runs the functions another process loaded before.
    const fcall = () =>
      client.sendCommand(["FCALL", library.functions.get(script)!, "1", this.#metaKey, argument]);
    try {
      return await fcall();
    } catch (error) {
      if (!/Function not found/i.test(replyText(error))) throw error;
      // The server lost the library (a restart without persistence, FUNCTION FLUSH): the call
      // did not run; load it and call again.
      await this.#load(library);
      return await fcall();
    }
  }

  /**
   * A script's error, worded for the user: the epoch error gives a
   * {@linkcode QueueLostError}, an abandoned transaction's keeps its own
   * words, and a move's fence gives a {@linkcode QueueMovedError}; any other names the server and its reply,
   * the store's function only as detail. A server that cannot run it now
   * gives code `REDIS_UNAVAILABLE`, for the runner's outage detection (the
   * script did not run).
   */
  #scriptError(script: LuaScript, error: unknown): Error {
    const message = replyText(error);
    const lost = message.match(/RENOX_EPOCH (.*)/);
    if (lost) return new QueueLostError(lost[1]!, { cause: error });
    const abandoned = message.match(/RENOX_ABANDONED (.*)/);
    if (abandoned) return new Error(abandoned[1], { cause: error });
    const moved = message.match(/RENOX_MOVED (\d+) (.*)/);
    if (moved) return new QueueMovedError(moved[2]!, Number(moved[1]), { cause: error });
    const wrapped = new Error(
      `The Redis server at ${
        redactPassword(this.#settings.url)
      } refused the queue's call: ${message} (in the store's function "${script.name}")`,
      { cause: error },
    );
    return NOT_NOW.test(message) ? Object.assign(wrapped, { code: REDIS_UNAVAILABLE }) : wrapped;
  }

  /** A `LOADING` reply still given at the call's deadline, as an error that says so. */
  #stillLoading(error: unknown): Error {
    const wrapped = new Error(
      `The Redis server at ${
        redactPassword(this.#settings.url)
      } is still loading its data: no answer within ${this.#settings.connectTimeoutMs} ms (${
        replyText(error)
      }) (calls work again once it has loaded)`,
      { cause: error },
    );
    return Object.assign(wrapped, { code: REDIS_UNAVAILABLE });
  }

  /** Loads `library` on the server (the same code under the same name loads again as it was). */
  async #load(library: FunctionLibrary): Promise<void> {
    await this.client.sendCommand(["FUNCTION", "LOAD", "REPLACE", library.code]);
  }

  /**
   * Calls `listener` on every message of the wake-up channel until the
   * result is disposed. The first watcher opens the subscriber connection.
   */
  watch(listener: () => void): Disposable {
    this.#listeners.add(listener);
    if (this.#subscriber === null && !this.#closed) this.#subscribe();
    return {
      [Symbol.dispose]: () => {
        this.#listeners.delete(listener);
      },
    };
  }

  /**
   * Opens the subscriber connection and subscribes it to the wake-up
   * channel; a handshake that hangs replaces it with a new one.
   */
  #subscribe(): void {
    const subscriber = newClient(this.#settings);
    subscriber.on("error", () => {});
    this.#subscriber = subscriber;
    watchHandshake(subscriber, this.#handshakeWaitMs, () => {
      if (this.#closed || this.#subscriber !== subscriber) return;
      subscriber.destroy();
      this.#subscribe();
    });
    const wake = () => {
      if (this.#closed) return;
      for (const each of [...this.#listeners]) {
        try {
          each();
        } catch {
          // A listener that throws keeps no other from its wake-up.
        }
      }
    };
    subscriber.connect()
      .then(() => subscriber.subscribe(this.#channel, wake))
      // A wake-up published before the subscription took hold reached no one: look once now (a
      // fresh queue's dispatchAndWait() of a job that another process ends within milliseconds).
      .then(wake)
      .catch(() => {/* best effort: workers keep polling */});
  }

  /**
   * Closes both connections once the open transactions have ended, aborting
   * those still open after {@linkcode CLOSE_WAITS_MS} (they roll back); later
   * calls fail.
   */
  async close(): Promise<void> {
    this.#closing = true; // no transaction begins from here on
    if (this.#transactions.size > 0) {
      await waitAtMost(Promise.allSettled(this.#transactions.keys()), CLOSE_WAITS_MS);
      for (const closing of this.#transactions.values()) closing.abort(closedUnderTransaction());
      await Promise.allSettled(this.#transactions.keys());
    }
    if (this.#closed) return;
    this.#closed = true;
    this.#unwatchHandshake();
    const subscriber = this.#subscriber;
    this.#subscriber = null;
    await Promise.allSettled([
      this.#client.close(),
      ...(subscriber === null ? [] : [subscriber.close()]),
    ]);
  }
}

/**
 * Whether `error` is the server's answer to the connection's handshake that
 * no retry changes: a wrong or missing password, a user without the right,
 * a database number the server does not have. A server still loading its
 * data, or busy, answers otherwise, and is waited for.
 */
function isRefusal(error: unknown): error is SimpleError {
  return error instanceof SimpleError &&
    /^(NOAUTH|WRONGPASS|NOPERM)\b|^ERR (DB index is out of range|invalid password|AUTH)/.test(
      error.message,
    );
}

function newClient(settings: ConnectionSettings): Client {
  return createClient({
    url: settings.url,
    socket: { connectTimeout: settings.connectTimeoutMs },
    // Reject calls while disconnected rather than queueing them for later.
    disableOfflineQueue: true,
    // Redis Enterprise's maintenance hand-offs (on by default with RESP3) read the environment
    // (REDIS_DEBUG_MAINTENANCE) on every connect and push, which an app granted only its own
    // variables cannot; the store rides out a dropped connection on its own.
    maintNotifications: "disabled",
  });
}

/**
 * Calls `hung` when `client` has connected and is still not ready `waitMs`
 * later: the server (a frozen one, a proxy whose backend is gone) took the
 * connection and never answered its handshake, which the client would wait
 * for as long as the socket stays open (its `connectTimeout` ends at the
 * TCP connect). Returns what stops the watch.
 */
function watchHandshake(client: Client, waitMs: number, hung: () => void): () => void {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const stop = () => clearTimeout(timer);
  client.on("connect", () => {
    stop();
    timer = setTimeout(() => {
      if (!client.isReady) hung();
    }, waitMs);
  });
  client.on("ready", stop);
  client.on("end", stop);
  return stop;
}

/**
 * The least time a connection made may wait for the server's answer to its
 * handshake, in ms: above the 5 s a server busy with another client's long
 * script takes to answer BUSY, and any pause of a loaded event loop.
 */
const HANDSHAKE_WAIT_MIN_MS = 6_000;

/** The `code` of a call's error when the server could not be reached (the call may have run). */
const UNREACHABLE = "REDIS_UNREACHABLE";

/** Errors of calls that were never sent: no connection came within `connectTimeoutMs`. */
const NOT_SENT = new WeakSet<Error>();

/** Whether `error` is the connection's (the call may or may not have run), not the script's. */
export function isConnectionError(error: unknown): boolean {
  if ((error as { code?: unknown })?.code === UNREACHABLE) return true;
  const name = (error as Error)?.name ?? "";
  const message = String((error as Error)?.message ?? "");
  return /Socket|Connection|ClientClosed|ClientOffline|Disconnect/i.test(name) ||
    /socket|connection|offline|ECONN|EPIPE/i.test(message);
}

/** Replies of a server that cannot run scripts now (loading its data, busy, a replica, a failover). */
const NOT_NOW = /^(LOADING|BUSY|MASTERDOWN|TRYAGAIN|CLUSTERDOWN|READONLY) /;

/** The reply of a restarted server still loading its data: a call waits it out (docs/redis.md). */
const LOADING = /^LOADING /;

/** How often a call asks again while the server loads its data, in ms. */
const LOADING_POLL_MS = 100;

/** The code of an error whose call the server could not run now (it did not run). */
const REDIS_UNAVAILABLE = "REDIS_UNAVAILABLE";

/** The text of a reply's (or any) error. */
function replyText(error: unknown): string {
  return String((error as Error)?.message ?? error);
}

/** Resolves after `ms`. */
function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
