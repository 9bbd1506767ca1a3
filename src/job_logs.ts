/**
 * Job logs as the API hands them out: what a handler wrote with
 * `ctx.log()` (and, with `captureConsole`, printed), per attempt, oldest
 * first. An encrypted job's lines are stored sealed with the queue's key,
 * bound to the job's id, and opened here.
 *
 * @module
 */
import { optionBag } from "./option_bags.ts";
import type { PayloadCipher } from "./encryption.ts";
import { shown } from "./shown.ts";
import type { LogLineRow, StatsStore } from "./stores/store.ts";

/** One line of a job's log, as {@linkcode Queue.logs} returns it. */
export interface JobLogLine {
  /** The attempt that wrote it; 0 for the line saying the cap dropped older lines. */
  readonly attempt: number;
  /** When it was written. */
  readonly at: Date;
  /**
   * `"info"` for `ctx.log()`, the `console` method for a captured call
   * (`"log"`, `"warn"`, …), `"cap"` for the line saying older lines were dropped.
   */
  readonly level: string;
  /** The text. */
  readonly message: string;
  /** The fields given to `ctx.log()`, or null. */
  readonly fields: Record<string, unknown> | null;
  /**
   * True when the line is encrypted and could not be opened (no `APP_KEY`,
   * a key since dropped, or a line changed at rest): `message` then says so
   * instead.
   */
  readonly sealed: boolean;
}

/** Options for {@linkcode Queue.logs}. */
export interface LogsOptions {
  /**
   * Open an encrypted job's lines with the queue's keys; with `false` they
   * come back `sealed`, their text unread (what the dashboard does).
   * @default {true}
   */
  open?: boolean;
}

/** What an encrypted job's log lines are bound to (the AES-GCM additional data): its id. */
export function logSealedFor(jobId: number): string {
  return `job-log:${jobId}`;
}

/** Reads job `jobId`'s lines from `store`, opened with `cipher` unless `options.open` is false. */
export async function readJobLog(
  store: Pick<StatsStore, "logs">,
  jobId: number,
  options: LogsOptions | undefined,
  cipher: PayloadCipher | null,
): Promise<JobLogLine[]> {
  const open = optionBag(options, "logs", ["open"])?.open ?? true;
  if (typeof open !== "boolean") {
    throw new TypeError(`logs: open must be true or false: got ${shown(open)}`);
  }
  return await openLogLines(await store.logs(jobId), open ? cipher : null);
}

/** Stored lines as the API hands them out, opening sealed ones with `cipher`. */
export async function openLogLines(
  rows: readonly LogLineRow[],
  cipher: PayloadCipher | null,
): Promise<JobLogLine[]> {
  return await Promise.all(rows.map(async (row) => {
    const base = { attempt: row.attempt, at: new Date(row.at), level: row.level };
    if (!row.encrypted) {
      return { ...base, message: row.message, fields: parseFields(row.fields), sealed: false };
    }
    try {
      if (cipher === null) throw new Error("no APP_KEY");
      const opened = JSON.parse(await cipher.decrypt(logSealedFor(row.jobId), row.message)) as {
        message: string;
        fields: string | null;
      };
      return {
        ...base,
        message: opened.message,
        fields: parseFields(opened.fields),
        sealed: false,
      };
    } catch {
      const message = cipher === null
        ? "(encrypted line, not opened)"
        : "(encrypted line: it cannot be opened: sealed with a key this queue does not have, or changed since)";
      return { ...base, message, fields: null, sealed: true };
    }
  }));
}

function parseFields(text: string | null): Record<string, unknown> | null {
  if (text === null) return null;
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === "object" && value !== null && !Array.isArray(value)
      ? value as Record<string, unknown>
      : { value };
  } catch {
    return { text };
  }
}
