/**
 * A guard against a known crash of the PostgreSQL driver (postgres.js
 * 3.4.9, upstream issues porsager/postgres#1154 and #1208, fixes not yet
 * released): when a connection closes under a transaction (the server
 * restarts, `pg_terminate_backend`), the driver's own `ROLLBACK` is written
 * to the closed socket from a timer, and the `TypeError` (or the socket's
 * "ended by the other party" error) escapes every `await` and ends the
 * process. The transaction itself has already rejected with the
 * connection's error, which the store reports, so the stray error is
 * dropped. So is a connection error of a driver promise nobody awaits, such
 * as a query of a pool the store ended after losing its connections (the
 * driver's own array types query, the worst of them, is never sent: see
 * `./array_types.ts`).
 * Only errors raised inside the driver's connection code with those
 * messages or codes are dropped: anything else still reaches the app.
 * Installed while a PostgreSQL store is open.
 *
 * @internal
 * @module
 */

let stores = 0;

/** A stack that passes through the driver's connection code. */
const DRIVER_STACK = /postgres[/@\\].*connection\.js/;

/** Whether `error` is the driver writing to a socket its connection already lost. */
function isStrayWrite(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const stack = String(error.stack ?? "");
  if (!DRIVER_STACK.test(stack)) return false;
  return (error instanceof TypeError && /reading 'write'/.test(error.message)) ||
    /socket has been ended by the other party|write after end|EPIPE/i.test(error.message);
}

/**
 * The codes of a connection's end: the driver's own, and the server's
 * `admin_shutdown` (`pg_terminate_backend`, a fast shutdown),
 * `crash_shutdown` and `cannot_connect_now` (a server starting or stopping).
 */
const CONNECTION_ENDS = new Set([
  "CONNECTION_DESTROYED",
  "CONNECTION_CLOSED",
  "CONNECTION_ENDED",
  "57P01",
  "57P02",
  "57P03",
]);

/** Whether `reason` is a connection error of a driver promise nobody awaits (a query of a pool being ended). */
export function isStrayRejection(reason: unknown): boolean {
  if (isStrayWrite(reason)) return true;
  if (!(reason instanceof Error)) return false;
  const code = (reason as { code?: unknown }).code;
  return DRIVER_STACK.test(String(reason.stack ?? "")) && CONNECTION_ENDS.has(String(code));
}

const onError = (event: ErrorEvent) => {
  if (isStrayWrite(event.error)) event.preventDefault();
};
const onRejection = (event: PromiseRejectionEvent) => {
  if (isStrayRejection(event.reason)) event.preventDefault();
};

/** Installs the guard for one more open store; the result removes it again. */
export function guardStrayWrites(): () => void {
  if (stores++ === 0) {
    globalThis.addEventListener("error", onError);
    globalThis.addEventListener("unhandledrejection", onRejection);
  }
  let removed = false;
  return () => {
    if (removed) return;
    removed = true;
    if (--stores === 0) {
      globalThis.removeEventListener("error", onError);
      globalThis.removeEventListener("unhandledrejection", onRejection);
    }
  };
}
