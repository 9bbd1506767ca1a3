/**
 * The lines running handlers wrote (`ctx.log()`, captured console calls),
 * kept until the next tick writes them with its settle: one batched write
 * per tick, never one per line. Lines are written at least once a second
 * while a job runs, so they survive a crash of the attempt up to then. An
 * encrypted job's lines are sealed with its key before they leave memory.
 *
 * @internal
 * @module
 */
import type { PayloadCipher } from "../encryption.ts";
import type { LogCall } from "../executors/executor.ts";
import { logSealedFor } from "../job_logs.ts";
import type { ClaimedJob, LogWrites, NewLogLine } from "../stores/store.ts";

/** How often lines of running jobs are written, in ms: a tick is asked for after this. */
const WRITE_EVERY_MS = 1_000;
/** A longer message is cut to about this many UTF-8 bytes, saying how many were cut. */
const MAX_MESSAGE_BYTES = 8_192;
/**
 * Room a line leaves under its job's cap, for the store's line saying older
 * lines were dropped: a line this much under the cap is never dropped whole.
 */
const CAP_LINE_ROOM_BYTES = 256;
/** Room kept for the note that says what was cut. */
const CUT_NOTE_ROOM_BYTES = 64;

interface BufferedLine {
  readonly job: ClaimedJob;
  readonly encrypted: boolean;
  readonly at: number;
  readonly line: LogCall;
  readonly bytes: number;
}

/** A runner's unwritten lines. */
export class JobLogBuffer {
  readonly #cipher: PayloadCipher | null;
  readonly #maxBytesPerJob: number;
  readonly #wake: () => void;
  #lines: BufferedLine[] = [];
  #bytesByJob = new Map<number, number>();
  #timer: ReturnType<typeof setTimeout> | undefined;
  #takenAt = performance.now();
  /** Lines already sealed whose settle failed, written first with the next tick. */
  #unwritten: NewLogLine[] = [];

  /** `wake` asks the runner for a tick once lines are due. */
  constructor(cipher: PayloadCipher | null, maxBytesPerJob: number, wake: () => void) {
    this.#cipher = cipher;
    this.#maxBytesPerJob = maxBytesPerJob;
    this.#wake = wake;
  }

  /** Whether lines wait to be written and the last write was at least a second ago. */
  get due(): boolean {
    return this.#lines.length > 0 && performance.now() - this.#takenAt >= WRITE_EVERY_MS;
  }

  /** Keeps one line of `job`'s running attempt. */
  add(job: ClaimedJob, encrypted: boolean, at: number, call: LogCall): void {
    // Text every store keeps: PostgreSQL refuses NUL in text, and a lone surrogate has no UTF-8.
    const message = call.message.replaceAll("\0", "\uFFFD").toWellFormed();
    const line = cutToFit({ ...call, message }, this.#maxBytesPerJob - CAP_LINE_ROOM_BYTES);
    const bytes = byteLength(line.message) + (line.fields === null ? 0 : byteLength(line.fields));
    this.#lines.push({ job, encrypted, at, line, bytes });
    const held = (this.#bytesByJob.get(job.id) ?? 0) + bytes;
    this.#bytesByJob.set(job.id, held);
    // A handler logging faster than ticks write: keep memory under the cap too.
    if (held > 2 * this.#maxBytesPerJob) this.#dropOldest(job.id, at);
    if (this.#timer === undefined) {
      const waitMs = Math.max(0, WRITE_EVERY_MS - (performance.now() - this.#takenAt));
      this.#timer = setTimeout(() => {
        this.#timer = undefined;
        this.#wake();
      }, waitMs);
    }
  }

  /**
   * Hands every kept line over for the next settle (lines whose write failed
   * first), encrypted where its job is; null when there are none.
   */
  async take(): Promise<LogWrites | null> {
    this.#takenAt = performance.now();
    clearTimeout(this.#timer);
    this.#timer = undefined;
    const taken = this.#lines;
    this.#lines = [];
    this.#bytesByJob = new Map();
    const lines = [
      ...this.#unwritten,
      ...await Promise.all(taken.map((line) => this.#stored(line))),
    ];
    this.#unwritten = [];
    return lines.length === 0 ? null : { lines, maxBytesPerJob: this.#maxBytesPerJob };
  }

  /** Keeps the lines of a settle that failed, to be written with the next tick. */
  putBack(writes: LogWrites | null): void {
    if (writes !== null) this.#unwritten = [...writes.lines, ...this.#unwritten];
  }

  /** Stops the timer. */
  close(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #dropOldest(jobId: number, at: number): void {
    let held = this.#bytesByJob.get(jobId) ?? 0;
    let dropped = 0;
    let job: ClaimedJob | undefined;
    this.#lines = this.#lines.filter((line) => {
      if (line.job.id !== jobId || held <= this.#maxBytesPerJob) return true;
      held -= line.bytes;
      dropped += line.line.level === "cap" ? droppedBy(line.line.fields) : 1;
      job = line.job;
      return false;
    });
    this.#bytesByJob.set(jobId, held);
    if (job === undefined) return;
    const message = `log capped at ${this.#maxBytesPerJob} bytes per job: ${dropped} older line${
      dropped === 1 ? "" : "s"
    } dropped`;
    const fields = JSON.stringify({ dropped });
    this.#lines.unshift({
      job,
      encrypted: false,
      at,
      line: { level: "cap", message, fields },
      bytes: message.length + fields.length,
    });
  }

  async #stored({ job, encrypted, at, line, bytes }: BufferedLine): Promise<NewLogLine> {
    // The line saying the cap dropped older lines is of no attempt (0), as the store's own is.
    const attempt = line.level === "cap" ? 0 : job.attempts;
    const base = { jobId: job.id, attempt, at, level: line.level, bytes };
    if (!encrypted) return { ...base, message: line.message, fields: line.fields, encrypted };
    // An encrypted job runs only where its key is: without one, no plaintext is ever stored.
    if (this.#cipher === null) {
      throw new Error(`Cannot seal a log line of job ${job.id}: no APP_KEY`);
    }
    const sealed = await this.#cipher.encrypt(
      logSealedFor(job.id),
      JSON.stringify({ message: line.message, fields: line.fields }),
    );
    return { ...base, message: sealed, fields: null, encrypted: true };
  }
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * `call` as it is kept: a line over `lineBytes` (or a message over
 * {@linkcode MAX_MESSAGE_BYTES}) keeps the head of its message, which ends
 * with `… [cut: N bytes]`; fields that alone take over half of `lineBytes`
 * are dropped too, and the note says so (`[cut: fields of N bytes]`).
 */
function cutToFit(call: LogCall, lineBytes: number): LogCall {
  const messageBytes = byteLength(call.message);
  const fieldsBytes = call.fields === null ? 0 : byteLength(call.fields);
  if (messageBytes + fieldsBytes <= lineBytes && messageBytes <= MAX_MESSAGE_BYTES) return call;
  const dropFields = fieldsBytes > lineBytes / 2;
  const room = Math.min(MAX_MESSAGE_BYTES, lineBytes - (dropFields ? 0 : fieldsBytes)) -
    CUT_NOTE_ROOM_BYTES;
  const head = headOf(call.message, Math.max(0, room));
  const cut = messageBytes - byteLength(head);
  const what = [
    ...(cut > 0 ? [`${cut} bytes`] : []),
    ...(dropFields ? [`fields of ${fieldsBytes} bytes`] : []),
  ];
  const note = `${cut > 0 ? "…" : ""} [cut: ${what.join(", ")}]`;
  return { ...call, message: head + note, fields: dropFields ? null : call.fields };
}

/** The longest start of `text` that is at most `bytes` UTF-8 bytes, never half a character. */
function headOf(text: string, bytes: number): string {
  if (byteLength(text) === text.length) return text.slice(0, bytes);
  const encoded = encoder.encode(text);
  if (encoded.length <= bytes) return text;
  let end = bytes;
  while (end > 0 && (encoded[end]! & 0xc0) === 0x80) end--; // not inside a character
  return decoder.decode(encoded.subarray(0, end));
}

/** UTF-8 size of `text`: its length when every character is ASCII (the common case, no copy). */
function byteLength(text: string): number {
  return /[^ -~\t\n\r]/.test(text) ? encoder.encode(text).length : text.length;
}

/** How many lines a `cap` line says it dropped. */
function droppedBy(fields: string | null): number {
  const dropped = (JSON.parse(fields ?? "{}") as { dropped?: unknown }).dropped;
  return typeof dropped === "number" ? dropped : 0;
}
