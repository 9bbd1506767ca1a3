/**
 * The lines a Web Worker's attempts logged since its last message to the
 * pool, capped per attempt as the runner caps them: once an attempt's lines
 * pass twice the per-job cap, its oldest go until the rest fit under it, and
 * one `cap` line (the form the runner and the stores write) says how many
 * went. A handler that logs in a synchronous loop never yields, so without
 * the cap every line would wait here until the loop ends.
 *
 * @internal
 * @module
 */
import type { LogCall } from "./executor.ts";

/** A line as it crosses to the pool, with the pool's id for its attempt. */
export interface WorkerLogLine {
  readonly runId: number;
  readonly line: LogCall;
}

interface HeldLine extends WorkerLogLine {
  /** What the line counts against the cap (see {@linkcode countedBytes}). */
  readonly bytes: number;
}

/**
 * The runner cuts a longer message to this many characters before it counts
 * it (src/runner/job_logs.ts); counted here as that many at most.
 */
const MAX_COUNTED_CHARS = 8_192;

/** Lines waiting to be sent, capped per attempt. */
export class WorkerLogLines {
  readonly #maxBytesPerJob: number;
  #lines: HeldLine[] = [];
  #bytesByRun = new Map<number, number>();

  /** `maxBytesPerJob` is the worker's `maxLogBytes`. */
  constructor(maxBytesPerJob: number) {
    this.#maxBytesPerJob = maxBytesPerJob;
  }

  /** Whether no line waits. */
  get empty(): boolean {
    return this.#lines.length === 0;
  }

  /** Keeps one line of attempt `runId`, dropping its oldest lines past twice the cap. */
  add(runId: number, line: LogCall): void {
    const bytes = countedBytes(line);
    this.#lines.push({ runId, line, bytes });
    const held = (this.#bytesByRun.get(runId) ?? 0) + bytes;
    this.#bytesByRun.set(runId, held);
    if (held > 2 * this.#maxBytesPerJob) this.#dropOldest(runId);
  }

  /** Every waiting line, oldest first; none wait afterwards. */
  take(): WorkerLogLine[] {
    const lines = this.#lines.map(({ runId, line }) => ({ runId, line }));
    this.#lines = [];
    this.#bytesByRun = new Map();
    return lines;
  }

  /** Drops attempt `runId`'s oldest lines until the rest fit under the cap; a `cap` line counts them. */
  #dropOldest(runId: number): void {
    let held = this.#bytesByRun.get(runId)!;
    let dropped = 0;
    this.#lines = this.#lines.filter((entry) => {
      if (entry.runId !== runId || held <= this.#maxBytesPerJob) return true;
      held -= entry.bytes;
      dropped += entry.line.level === "cap" ? droppedBy(entry.line) : 1;
      return false;
    });
    const message = `log capped at ${this.#maxBytesPerJob} bytes per job: ${dropped} older line${
      dropped === 1 ? "" : "s"
    } dropped`;
    const fields = JSON.stringify({ dropped });
    const bytes = message.length + fields.length;
    this.#lines.unshift({ runId, line: { level: "cap", message, fields }, bytes });
    this.#bytesByRun.set(runId, held + bytes);
  }
}

/**
 * What a line counts against the cap here: never more than the runner counts
 * for it (a UTF-16 length is at most the UTF-8 size; a message is counted up
 * to the length the runner cuts it to), so this cap never drops a line the
 * runner would keep.
 */
function countedBytes(line: LogCall): number {
  return Math.min(line.message.length, MAX_COUNTED_CHARS) + (line.fields?.length ?? 0);
}

/** How many lines a `cap` line says were dropped. */
function droppedBy(line: LogCall): number {
  const dropped = (JSON.parse(line.fields ?? "{}") as { dropped?: unknown }).dropped;
  return typeof dropped === "number" ? dropped : 0;
}
