/**
 * Turning a dispatch into the rows a store inserts: the job checked against
 * the registry, its options resolved, each payload checked, capped and (for
 * an encrypted job) sealed; unique and debounced jobs keyed; jobs that wait
 * for another's outcome made relative. Nothing here writes: every error is
 * thrown before anything is stored.
 *
 * @internal
 * @module
 */
import type { Clock } from "../clock.ts";
import type { PayloadCipher } from "../encryption.ts";
import {
  type DispatchOptions,
  isJobDefinition,
  type JobDefinition,
  resolveDispatch,
} from "../job.ts";
import { encodePayload } from "../payload.ts";
import { groupOf } from "./group_key.ts";
import { shown } from "../shown.ts";
import type { JobRegistry } from "../registry.ts";
import { activeTraceparent } from "../trace_context.ts";
import type { JobGroup, KeyedJobRow, NewJobRow, WaitingJobRow } from "../stores/store.ts";

/**
 * One payload of a dispatch made in a Web Worker, checked and encoded there
 * ({@linkcode JobRows.encode}) with the same job definitions, for the main
 * thread to store ({@linkcode JobRows.encodedRows}): what depends on the
 * payload as the handler passed it (its schema check and JSON text, its
 * group, its unique id) is worked out where that value is, not on a copy
 * `postMessage` made of it.
 */
export interface EncodedPayload {
  /** The JSON text to store (not sealed). */
  readonly payload: string;
  /** Its group, when the job has one. */
  readonly group: JobGroup | null;
  /** Its `uniqueId`, for a unique or debounced job dispatched on its own; else null. */
  readonly uniqueId: string | null;
}

/** Where a job added to batch `batchId` is placed in error messages. */
export function intoBatch(batchId: number): string {
  return ` into batch ${batchId}`;
}

/** Which jobs may be dispatched: a queue's registry (`QueueFake` takes any job). */
export type KnownJobs = Pick<JobRegistry, "has">;

/** What seals an encrypted job's payload: the queue's cipher (`QueueFake` stores nothing, so seals nothing). */
export type PayloadSealer = Pick<PayloadCipher, "encrypt">;

/** Builds the rows of the jobs a queue dispatches. */
export class JobRows {
  readonly #registry: KnownJobs;
  readonly #clock: Clock;
  readonly #maxPayloadBytes: number;
  readonly #cipher: PayloadSealer | null;

  /** `cipher` seals encrypted jobs' payloads; it is set whenever such a job is registered. */
  constructor(
    registry: KnownJobs,
    clock: Clock,
    maxPayloadBytes: number,
    cipher: PayloadSealer | null,
  ) {
    this.#registry = registry;
    this.#clock = clock;
    this.#maxPayloadBytes = maxPayloadBytes;
    this.#cipher = cipher;
  }

  /** The cap on a payload's JSON text, in bytes (a Web Worker checks with the same). */
  get maxPayloadBytes(): number {
    return this.#maxPayloadBytes;
  }

  /**
   * One row per payload of `job`, due after `options.delayMs`. `role`
   * follows the job's name in error messages (` as link 2 of a chain`).
   * `flowNode`: the rows are a flow's nodes, the one place a job that
   * declares its parents may go.
   */
  async rows(
    job: JobDefinition,
    payloads: readonly unknown[],
    options: DispatchOptions | undefined,
    role = "",
    flowNode = false,
  ): Promise<NewJobRow[]> {
    return await this.sealAll(job, this.plainRows(job, payloads, options, role, flowNode));
  }

  /** Seals the payloads of the rows of an encrypted job (any other job's are returned as they are). */
  async sealAll(job: JobDefinition, rows: NewJobRow[]): Promise<NewJobRow[]> {
    if (!job.encrypted) return rows;
    const sealed = await Promise.all(
      rows.map((row) => this.#cipher!.encrypt(job.name, row.payload)),
    );
    return rows.map((row, index) => ({ ...row, payload: sealed[index]! }));
  }

  /**
   * {@linkcode JobRows.rows} without sealing: the payloads as checked JSON
   * text, even for an encrypted job (seal them before storing).
   */
  plainRows(
    job: JobDefinition,
    payloads: readonly unknown[],
    options: DispatchOptions | undefined,
    role = "",
    flowNode = false,
  ): NewJobRow[] {
    return this.#build(job, payloads, options, role, flowNode, (payload, where, placed) => ({
      payload: encodePayload(job, payload, this.#maxPayloadBytes, placed),
      group: groupOf(job, payload, where),
    }));
  }

  /**
   * In a Web Worker: checks a dispatch of `job` (into batch `batchId`, or on
   * its own when that is null) exactly as {@linkcode JobRows.plainRows}
   * does, throwing the same errors, and returns each payload encoded for
   * the main thread to store.
   */
  encode(
    job: JobDefinition,
    payloads: readonly unknown[],
    options: DispatchOptions | undefined,
    batchId: number | null,
  ): EncodedPayload[] {
    const rows = this.plainRows(job, payloads, options, batchId === null ? "" : intoBatch(batchId));
    // Keys are made only for a dispatch on its own, as `Dispatch` makes them.
    const keyed = batchId === null &&
      (job.uniqueForMs !== undefined || job.debounceMs !== undefined);
    return rows.map((row, index) => ({
      payload: row.payload,
      group: row.group ?? null,
      uniqueId: keyed
        ? uniqueIdOf(job, payloads[index], payloadRole("", index, rows.length))
        : null,
    }));
  }

  /**
   * In the main thread: the rows of payloads a Web Worker encoded
   * ({@linkcode JobRows.encode}), not sealed; every check but the
   * payloads' own is made again, on this thread's clock.
   */
  encodedRows(
    job: JobDefinition,
    encoded: readonly EncodedPayload[],
    options: DispatchOptions | undefined,
    role = "",
  ): NewJobRow[] {
    return this.#build(job, encoded, options, role, false, (entry) => {
      const { payload, group } = entry as EncodedPayload;
      return { payload, group };
    });
  }

  /**
   * The rows, with `encodeAt` giving each payload's stored text and group;
   * of several payloads, its errors name the payload's index (`where`
   * starts them, `placed` is the role that places it, {@linkcode payloadRole}).
   */
  #build(
    job: JobDefinition,
    payloads: readonly unknown[],
    options: DispatchOptions | undefined,
    role: string,
    flowNode: boolean,
    encodeAt: (
      payload: unknown,
      where: string,
      placed: string,
    ) => { payload: string; group: JobGroup | null },
  ): NewJobRow[] {
    if (!isJobDefinition(job) || !this.#registry.has(job)) {
      const name = shown(typeof job?.name === "string" ? job.name : job);
      throw new TypeError(
        `Cannot dispatch ${name}${role}: it is not a job registered with this queue (export it from the jobs module)`,
      );
    }
    if (!Array.isArray(payloads)) {
      throw new TypeError(`Cannot dispatch "${job.name}"${role}: payloads must be an array`);
    }
    const where = `Cannot dispatch "${job.name}"${role}`;
    if (job.parents !== undefined && !flowNode) {
      throw new TypeError(
        `${where}: it declares the parents whose outputs it reads (defineJob({ parents })), so it runs only as a flow's node: add it with flow.add(job, payload, { after })`,
      );
    }
    // `map` skips the holes of a sparse array (`new Array(3)`), which would store nothing.
    for (let index = 0; index < payloads.length; index++) {
      if (!(index in payloads)) {
        throw new TypeError(`${where}: payloads[${index}] is missing (a hole in the array)`);
      }
    }
    const createdAt = this.#clock.now();
    const { queue, availableAt, priority, expireAt, retryUntil } = resolveDispatch(
      job,
      options,
      where,
      createdAt,
    );
    const trace = activeTraceparent();
    return payloads.map((payload, index) => {
      const placed = payloadRole(role, index, payloads.length);
      const encoded = encodeAt(payload, `Cannot dispatch "${job.name}"${placed}`, placed);
      return {
        queue,
        name: job.name,
        payload: encoded.payload,
        priority,
        availableAt,
        retryUntil,
        expireAt,
        createdAt,
        trace,
        group: encoded.group,
      };
    });
  }

  /** Seals the payload of a row of an encrypted job (the rest is returned as it is). */
  async seal(job: JobDefinition, row: NewJobRow): Promise<NewJobRow> {
    if (!job.encrypted) return row;
    return { ...row, payload: await this.#cipher!.encrypt(job.name, row.payload) };
  }

  /**
   * The rows of a unique or debounced job with their keys (its name and
   * `uniqueId(payload)`); null for a job that is neither. A debounced job is
   * due `debounceMs` later than its row, or at `debounceMaxWaitMs` after its
   * dispatch where that comes first.
   */
  keyed(
    job: JobDefinition,
    payloads: readonly unknown[],
    rows: readonly NewJobRow[],
  ): KeyedJobRow[] | null {
    return this.#keyed(
      job,
      rows,
      (index) => uniqueIdOf(job, payloads[index], payloadRole("", index, payloads.length)),
    );
  }

  /** {@linkcode JobRows.keyed} for payloads a Web Worker encoded: their unique ids came with them. */
  encodedKeyed(
    job: JobDefinition,
    encoded: readonly EncodedPayload[],
    rows: readonly NewJobRow[],
  ): KeyedJobRow[] | null {
    return this.#keyed(job, rows, (index) => encoded[index]!.uniqueId!);
  }

  #keyed(
    job: JobDefinition,
    rows: readonly NewJobRow[],
    uniqueIdAt: (index: number) => string,
  ): KeyedJobRow[] | null {
    if (job.uniqueForMs === undefined && job.debounceMs === undefined) return null;
    return rows.map((row, index): KeyedJobRow => {
      // JSON: unambiguous for any name and id, and free of NUL, which PostgreSQL text refuses.
      const key = JSON.stringify([job.name, uniqueIdAt(index)]);
      if (job.uniqueForMs !== undefined) {
        const releaseOnStart = job.uniqueUntil === "processing";
        return {
          ...row,
          key: { kind: "unique", key, expiresAt: row.createdAt + job.uniqueForMs, releaseOnStart },
        };
      }
      const latestAt = job.debounceMaxWaitMs === undefined
        ? null
        : row.createdAt + job.debounceMaxWaitMs;
      // The first dispatch is capped as each later one is (keys.ts): never past the max wait.
      const debouncedAt = row.availableAt + job.debounceMs!;
      return {
        ...row,
        availableAt: latestAt === null ? debouncedAt : Math.min(debouncedAt, latestAt),
        key: { kind: "debounce", key, latestAt },
      };
    });
  }
}

/**
 * A job row that waits for another's outcome: its delay and retry window
 * become relative. A grouped job cannot wait so (the rows that wait keep no
 * group, and every node of a flow is stored as one): refused, naming it.
 */
export function toWaiting(row: NewJobRow): WaitingJobRow {
  if (row.group !== null && row.group !== undefined) {
    throw new TypeError(
      `Cannot dispatch "${row.name}": a job with a group cannot wait for another job's outcome (a chain link after the first, a batch's then, catch or finally, any node of a flow, a root too, or its catch): dispatch it on its own, or as a chain's first link or a batch job`,
    );
  }
  return {
    queue: row.queue,
    name: row.name,
    payload: row.payload,
    priority: row.priority,
    delayMs: row.availableAt - row.createdAt,
    retryForMs: row.retryUntil === null ? null : row.retryUntil - row.createdAt,
    expireInMs: row.expireAt === null || row.expireAt === undefined
      ? null
      : row.expireAt - row.createdAt,
    trace: row.trace ?? null,
  };
}

/**
 * Where payload `index` of `count` sits, after `role` in an error message:
 * ` (payloads[2])` when the call has several, else `role` alone.
 */
function payloadRole(role: string, index: number, count: number): string {
  return count > 1 ? `${role} (payloads[${index}])` : role;
}

/** A unique or debounced job's `uniqueId` for one payload, checked; `role` places it in errors. */
function uniqueIdOf(job: JobDefinition, payload: unknown, role: string): string {
  let id: unknown;
  try {
    id = job.uniqueId(payload);
  } catch (error) {
    throw new TypeError(
      `Cannot dispatch "${job.name}"${role}: its uniqueId threw: ${
        (error as Error)?.message ?? error
      }`,
      { cause: error },
    );
  }
  if (typeof id !== "string" || id.length > 255) {
    throw new TypeError(
      `Cannot dispatch "${job.name}"${role}: uniqueId must return a string of at most 255 characters: got ${
        typeof id === "string" ? `${id.length} characters` : typeof id
      }`,
    );
  }
  return id;
}
