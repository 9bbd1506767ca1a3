/**
 * What the dashboard answers when the queue throws while it serves a
 * request: one verdict for pages, the JSON API, actions and `GET /metrics`,
 * each of which only words it in its own format.
 *
 * @internal
 * @module
 */
import { QueueClosedError, QueueLostError, QueueMovedError } from "../errors.ts";
import type { Queue } from "../queue.ts";

/** The status of a failed request and the line that tells why. */
export interface FailureAnswer {
  /** The HTTP status: 400, 409, 503 or 500. */
  readonly status: number;
  /** The status and its reason, e.g. `"503 Service Unavailable: the queue is closed"`. */
  readonly text: string;
}

/** Whether the failed request gave the queue input it may refuse (a filter, a form), or none. */
export type RequestInput = "input" | "no input";

/**
 * A request the queue refused (a bad filter: 400), a closed queue or a
 * store that lost its data (503, naming the cause), a write to a queue
 * moved to another store (409, naming where), or an unexpected error (500,
 * reported as `queue:error` during `dashboard <during>`, told without
 * detail). A request with `"no input"` (`GET /metrics`) cannot be refused:
 * a `TypeError` or `RangeError` there is unexpected too.
 */
export function failureAnswer(
  queue: Queue,
  error: unknown,
  during: string,
  input: RequestInput,
): FailureAnswer {
  if (input === "input" && (error instanceof TypeError || error instanceof RangeError)) {
    return { status: 400, text: `400 Bad Request: ${error.message}` };
  }
  if (error instanceof QueueClosedError) {
    return { status: 503, text: "503 Service Unavailable: the queue is closed" };
  }
  if (error instanceof QueueLostError) {
    return { status: 503, text: `503 Service Unavailable: ${error.message}` };
  }
  if (error instanceof QueueMovedError) {
    // Reads go on, writes are refused for good: say where the queue went, as the app is told.
    return { status: 409, text: `409 Conflict: ${error.message}` };
  }
  const reported = error instanceof Error ? error : new Error(String(error));
  queue.emit("queue:error", { error: reported, during: `dashboard ${during}` });
  return {
    status: 500,
    text: "500 Internal Server Error: the dashboard failed; see the app's log",
  };
}
