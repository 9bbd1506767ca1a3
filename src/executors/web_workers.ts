/**
 * Runs handlers in a pool of Web Workers: true parallelism, and timeouts that
 * really stop the work. Each Web Worker imports the jobs module once and runs
 * many jobs; the main thread keeps every store write.
 *
 * @module
 */
import type { AppKeys } from "../encryption.ts";
import type { DispatchOptions } from "../job.ts";
import type { EncodedPayload } from "../dispatch/job_rows.ts";
import type { ExecutionRequest, ExecutionResult, Executor, FailedHookRequest } from "./executor.ts";
import { asError } from "../errors.ts";
import { withTraceparent } from "../trace_context.ts";
import { workerThreads } from "./_thread_probe.ts";
import {
  BeginCell,
  fromWire,
  type FromWorker,
  toWire,
  type ToWorker,
  type WireRun,
} from "./_worker_messages.ts";

/**
 * Stores what handlers dispatch, by job name, with the payloads as the Web
 * Worker checked and encoded them: on their own, or into batch `batchId`
 * when that is not null.
 */
export type DispatchByName = (
  name: string,
  payloads: EncodedPayload[],
  options: DispatchOptions | undefined,
  batchId: number | null,
) => Promise<number[]>;

/** Options for {@linkcode WebWorkerPool}. */
export interface WebWorkerPoolOptions {
  /** The jobs module's URL, imported by each Web Worker. */
  readonly jobsUrl: string;
  /** Web Workers to keep. */
  readonly size: number;
  /** After an attempt is aborted, how long it may take to stop before its Web Worker is terminated. */
  readonly graceMs: number;
  /** The keys that open encrypted payloads, or null. */
  readonly appKeys: AppKeys | null;
  /**
   * Write what handlers print with `console.*` into their job's log too.
   * @default {false}
   */
  readonly captureConsole?: boolean;
  /**
   * The worker's cap on a job's log, in bytes: each Web Worker holds no more
   * than twice this of an attempt's unsent lines, dropping the oldest.
   * @default {65536}
   */
  readonly maxLogBytes?: number;
  /** Where handlers' `ctx.queue.dispatch` and `ctx.addToBatch` calls go. */
  readonly dispatch: DispatchByName;
  /** The queue's cap on a payload, which handlers' dispatches are checked against in the Web Worker. */
  readonly maxPayloadBytes: number;
  /**
   * Makes the executor that runs every job once a Web Worker fails before it
   * is ready (it cannot load its script or the jobs module, e.g. without read
   * permission): the isolate executor.
   */
  readonly fallback: () => Executor;
  /** Told once, with the cause, when the pool falls back. */
  readonly onFallback: (error: Error) => void;
  /**
   * Told, with the cause, when a Web Worker started in place of one that
   * ended fails before it is ready while others run: the pool goes on with
   * one fewer.
   */
  readonly onShrink: (error: Error) => void;
}

interface PendingRun {
  readonly jobId: number;
  /** The attempt as asked, to run it elsewhere if its Web Worker never starts. */
  readonly request: ExecutionRequest;
  readonly resolve: (result: ExecutionResult) => void;
  /** Listens on the attempt's signal until it settles. */
  readonly onAbort: () => void;
  aborted: boolean;
  killTimer: ReturnType<typeof setTimeout> | undefined;
  /** Its begin cell in its Web Worker's ({@linkcode BeginCell}), or -1 when none was free. */
  readonly cell: number;
  /** The timers of its steps that run with a timeout, by the Web Worker's timer id. */
  stepTimers?: Map<number, (ranPast: boolean) => void>;
}

interface PoolWorker {
  readonly worker: Worker;
  /** Its thread's name (`worker-N`), or null where threads cannot be seen. */
  readonly thread: string | null;
  readonly runs: Map<number, PendingRun>;
  /** The begin cells shared with it ({@linkcode BeginCell}). */
  readonly cells: Int32Array;
  /** Its cells free for a new attempt. */
  readonly freeCells: number[];
  /**
   * The cells of attempts given up before their handler began, by run id:
   * free again once the Web Worker reports that run (it ends without calling
   * the handler).
   */
  readonly abandoned: Map<number, number>;
  readonly hooks: Map<
    number,
    { request: FailedHookRequest; resolve(): void; reject(error: Error): void }
  >;
  /** Whether it loaded the jobs module: a failure before that is the pool's, not a job's. */
  ready: boolean;
  /** Ends its wait for the jobs module to load ({@linkcode LOAD_WAIT_MS}); null once ready. */
  loading: ReturnType<typeof setTimeout> | null;
  /** Of its runs, how many were aborted and have not stopped yet. */
  aborting: number;
  /** Attempts to post together at the end of this tick. */
  outgoing: WireRun[];
  retired: boolean;
}

/**
 * How long a Web Worker may take to load the jobs module before it counts as
 * failed to start, in ms: a module whose top-level await never settles in a
 * Web Worker would otherwise hold the worker back for good, claiming nothing.
 */
const LOAD_WAIT_MS = 20_000;
/** The cap on a job's log without `maxLogBytes`, the worker's default. */
const DEFAULT_MAX_LOG_BYTES = 65_536;
/** How often the pool looks for Web Workers that ended on their own (`self.close()`). */
const LIVENESS_MS = 500;

/**
 * Begin cells per Web Worker ({@linkcode BeginCell}): attempts held by one
 * Web Worker at once beyond this have no cell, and are treated as begun
 * (terminated with the Web Worker when aborted, charged when it dies).
 */
const BEGIN_CELLS = 4_096;
/** How often the pool looks whether a terminated thread has ended. */
const TERMINATE_CHECK_MS = 250;
/**
 * How long a terminated thread may take to end before it counts as stuck: a
 * loaded machine can take over a second to end one that is not stuck.
 */
const TERMINATE_WAIT_MS = 3_000;

/**
 * A pool of Web Workers. An attempt aborted on timeout that does not stop
 * within `graceMs` has its Web Worker terminated and replaced; jobs sharing
 * that Web Worker are put back without losing an attempt. A Web Worker that
 * dies (uncaught error, `self.close()`) counts a crash for the jobs it ran.
 * A Web Worker that fails before it is ready (its script or the jobs module
 * cannot load) is no job's fault: the pool says so once and runs every job
 * in its fallback executor (the isolate) from then on.
 * A Web Worker stuck in a synchronous loop cannot be terminated by Deno:
 * `stuck` then resolves, and the process should finish its other jobs and
 * exit to be restarted.
 */
export class WebWorkerPool implements Executor {
  /** Resolves when a Web Worker thread could not be stopped. */
  readonly stuck: Promise<Error>;
  /** Resolves once every Web Worker the pool started with loaded the jobs module, or it fell back. */
  readonly ready: Promise<void>;
  #reportReady!: () => void;
  readonly #options: WebWorkerPoolOptions;
  readonly #workers: PoolWorker[] = [];
  readonly #timers = new Set<ReturnType<typeof setTimeout>>();
  readonly #liveness: ReturnType<typeof setInterval> | undefined;
  #reportStuck!: (error: Error) => void;
  #nextId = 0;
  #closed = false;
  /** Runs every job once a Web Worker failed to start; null while the pool works. */
  #fallback: Executor | null = null;

  /** Starts `options.size` Web Workers. */
  constructor(options: WebWorkerPoolOptions) {
    this.#options = options;
    this.stuck = new Promise((resolve) => this.#reportStuck = resolve);
    this.ready = new Promise((resolve) => this.#reportReady = resolve);
    for (let i = 0; i < options.size; i++) this.#workers.push(this.#spawn());
    if (this.#workers.some(({ thread }) => thread !== null)) {
      this.#liveness = setInterval(() => this.#findDead(), LIVENESS_MS);
    }
  }

  /** True once the pool fell back: its fallback runs handlers in this isolate. */
  get inThisIsolate(): boolean {
    return this.#fallback?.inThisIsolate ?? false;
  }

  /** Runs one attempt in the least busy Web Worker. */
  run(request: ExecutionRequest): Promise<ExecutionResult> {
    if (this.#fallback !== null) return this.#fallback.run(request);
    const { signal } = request;
    const slot = this.#pick();
    const runId = ++this.#nextId;
    return new Promise((resolve) => {
      const onAbort = () => this.#abort(slot, runId, signal.reason);
      const cell = slot.freeCells.pop() ?? -1;
      if (cell >= 0) Atomics.store(slot.cells, cell, BeginCell.Queued);
      const pending: PendingRun = {
        jobId: request.id,
        request,
        resolve,
        onAbort,
        aborted: false,
        killTimer: undefined,
        cell,
      };
      slot.runs.set(runId, pending);
      this.#send(slot, [
        runId,
        request.id,
        request.name,
        request.queueName,
        request.payload,
        request.attempt,
        request.batchId,
        request.scheduled,
        request.traceparent ?? null,
        request.flowParents ?? null,
        cell,
      ]);
      if (signal.aborted) onAbort();
      else signal.addEventListener("abort", onAbort);
    });
  }

  /** Runs a job's `failed` hook in a Web Worker. */
  runFailedHook(request: FailedHookRequest): Promise<void> {
    if (this.#fallback !== null) return this.#fallback.runFailedHook(request);
    const { error, ...wire } = request;
    const slot = this.#pick();
    const runId = ++this.#nextId;
    return new Promise((resolve, reject) => {
      slot.hooks.set(runId, { request, resolve, reject });
      this.#post(slot, {
        type: "failed-hook",
        runId,
        request: wire,
        error: toWire(error),
      });
    });
  }

  /** Terminates every Web Worker; attempts still running are put back. */
  async close(): Promise<void> {
    await this.#fallback?.close();
    this.#closed = true;
    clearInterval(this.#liveness);
    for (const timer of this.#timers) clearTimeout(timer);
    this.#timers.clear();
    for (const slot of [...this.#workers]) {
      this.#end(slot, (runId) => ({
        kind: "interrupted",
        error: new Error(`The Web Worker pool closed during run ${runId}`),
      }));
    }
  }

  #spawn(): PoolWorker {
    const before = workerThreads();
    const worker = new Worker(new URL("./_worker_entry.ts", import.meta.url), { type: "module" });
    const after = workerThreads();
    const born = before === null || after === null ? [] : [...after].filter((n) => !before.has(n));
    const beginCells = new SharedArrayBuffer(BEGIN_CELLS * Int32Array.BYTES_PER_ELEMENT);
    const slot: PoolWorker = {
      worker,
      thread: born.length === 1 ? born[0]! : null,
      runs: new Map(),
      cells: new Int32Array(beginCells),
      freeCells: Array.from({ length: BEGIN_CELLS }, (_, index) => BEGIN_CELLS - 1 - index),
      abandoned: new Map(),
      hooks: new Map(),
      ready: false,
      loading: null,
      aborting: 0,
      outgoing: [],
      retired: false,
    };
    const loading = slot.loading = setTimeout(() => {
      this.#timers.delete(loading);
      slot.loading = null;
      this.#failedToStart(
        slot,
        `Web Worker did not load the jobs module within ${
          LOAD_WAIT_MS / 1000
        } s (a top-level await that never settles?)`,
      );
    }, LOAD_WAIT_MS);
    this.#timers.add(loading);
    worker.onmessage = ({ data }: MessageEvent<FromWorker>) => this.#receive(slot, data);
    worker.onerror = (event) => {
      event.preventDefault(); // an error in a Web Worker must not end this process
      if (!slot.ready) this.#failedToStart(slot, `Web Worker failed to start: ${event.message}`);
      else this.#retire(slot, "died", `Web Worker died: ${event.message}`);
    };
    this.#post(slot, {
      type: "init",
      jobsUrl: this.#options.jobsUrl,
      appKeys: this.#options.appKeys,
      captureConsole: this.#options.captureConsole ?? false,
      maxLogBytes: this.#options.maxLogBytes ?? DEFAULT_MAX_LOG_BYTES,
      maxPayloadBytes: this.#options.maxPayloadBytes,
      beginCells,
    });
    return slot;
  }

  /** Ends `slot`'s wait for the jobs module to load ({@linkcode LOAD_WAIT_MS}). */
  #stopLoadWait(slot: PoolWorker): void {
    if (slot.loading === null) return;
    clearTimeout(slot.loading);
    this.#timers.delete(slot.loading);
    slot.loading = null;
  }

  #receive(slot: PoolWorker, message: FromWorker): void {
    switch (message.type) {
      case "ready":
        slot.ready = true;
        this.#stopLoadWait(slot);
        this.#post(slot, { type: "go" });
        if (this.#workers.every((each) => each.ready)) this.#reportReady();
        return;
      case "init-failed":
        this.#failedToStart(
          slot,
          `Web Worker failed to load the jobs module: ${fromWire(message.error).message}`,
        );
        return;
      case "results":
        for (const runId of message.done) {
          const pending = slot.runs.get(runId);
          if (pending === undefined) {
            this.#reported(slot, runId);
            continue;
          }
          this.#settle(slot, runId, pending);
          pending.resolve({ kind: "success", output: null });
        }
        for (const result of message.results) {
          const pending = slot.runs.get(result.runId);
          if (pending === undefined) {
            this.#reported(slot, result.runId);
            continue;
          }
          this.#settle(slot, result.runId, pending);
          if (result.kind === "success") {
            pending.resolve({ kind: "success", output: result.output ?? null });
          } else if (result.kind === "release") {
            pending.resolve({
              kind: "release",
              delayMs: result.delayMs ?? 0,
              ...(result.holdsGroup === true && { holdsGroup: true }),
            });
          } else if (result.kind === "park") {
            pending.resolve({ kind: "park", ...result.park! });
          } else {
            pending.resolve({
              kind: "error",
              error: fromWire(result.error!),
              permanent: result.permanent ?? false,
            });
          }
        }
        return;
      case "hook-done": {
        const hook = slot.hooks.get(message.runId);
        slot.hooks.delete(message.runId);
        if (message.error === undefined) hook?.resolve();
        else hook?.reject(fromWire(message.error));
        return;
      }
      case "begun":
        for (const runId of message.runIds) slot.runs.get(runId)?.request.onBegin?.();
        return;
      case "progress":
        for (const { runId, percent } of message.reports) {
          slot.runs.get(runId)?.request.onProgress(percent);
        }
        return;
      case "steps":
        this.#steps(slot, message);
        return;
      case "step-timer": {
        const pending = slot.runs.get(message.runId);
        const steps = pending?.request.steps;
        if (pending === undefined || steps === undefined) return;
        pending.stepTimers ??= new Map();
        if (message.timeoutMs === undefined) {
          // Timed by this thread's timer alone: when the message comes is no time of the step's.
          pending.stepTimers.get(message.timerId)?.(false);
          pending.stepTimers.delete(message.timerId);
        } else {
          pending.stepTimers.set(message.timerId, steps.timeStep(message.key, message.timeoutMs));
        }
        return;
      }
      case "logs":
        for (const { runId, line } of message.lines) slot.runs.get(runId)?.request.onLog?.(line);
        return;
      case "dispatch":
        withTraceparent(
          message.traceparent,
          () =>
            this.#options.dispatch(
              message.name,
              message.payloads,
              message.options,
              message.batchId,
            ),
        )
          .then(
            (ids) => this.#post(slot, { type: "dispatched", callId: message.callId, ids }),
            (error) =>
              this.#post(slot, {
                type: "dispatched",
                callId: message.callId,
                error: toWire(asError(error)),
              }),
          );
        return;
    }
  }

  /** The least busy live Web Worker, preferring ones with no attempt left to stop. */
  #pick(): PoolWorker {
    if (this.#workers.length === 0) this.#workers.push(this.#spawn());
    let best = this.#workers[0]!;
    let bestRank = Infinity;
    for (const slot of this.#workers) {
      // A Web Worker started in place of a terminated one takes runs once it loaded, if another can.
      const rank = (slot.aborting > 0 ? 1_000_000 : 0) + (slot.ready ? 0 : 1_000) +
        slot.runs.size;
      if (rank < bestRank) {
        best = slot;
        bestRank = rank;
      }
    }
    return best;
  }

  /** Queues an attempt; every attempt queued in this tick goes to the Web Worker in one message. */
  #send(slot: PoolWorker, run: WireRun): void {
    slot.outgoing.push(run);
    if (slot.outgoing.length === 1) queueMicrotask(() => this.#flushRuns(slot));
  }

  #flushRuns(slot: PoolWorker): void {
    if (slot.outgoing.length === 0) return;
    const runs = slot.outgoing;
    slot.outgoing = [];
    this.#post(slot, { type: "run", runs, sentAt: performance.timeOrigin + performance.now() });
  }

  #abort(slot: PoolWorker, runId: number, reason: unknown): void {
    const pending = slot.runs.get(runId);
    if (pending === undefined || pending.aborted || slot.retired) return;
    this.#flushRuns(slot); // the run must reach the Web Worker before its abort
    pending.aborted = true;
    slot.aborting++;
    this.#post(slot, { type: "abort", runId, reason: toWire(asError(reason)) });
    pending.killTimer = this.#after(this.#options.graceMs, () => {
      pending.killTimer = undefined;
      if (this.#giveUp(slot, runId, pending)) return;
      this.#retire(
        slot,
        "hung",
        `Web Worker terminated: job ${pending.jobId} did not stop within ${this.#options.graceMs} ms of being aborted`,
      );
    });
  }

  /**
   * Gives up an aborted attempt whose handler has not begun (it waits behind
   * another handler that holds its Web Worker): its cell marked abandoned, the
   * Web Worker will not call its handler, so it ends now without terminating
   * the Web Worker and the handler running there. False when it had begun.
   */
  #giveUp(slot: PoolWorker, runId: number, pending: PendingRun): boolean {
    if (pending.cell < 0) return false;
    const was = Atomics.compareExchange(
      slot.cells,
      pending.cell,
      BeginCell.Queued,
      BeginCell.Abandoned,
    );
    if (was !== BeginCell.Queued) return false;
    slot.abandoned.set(runId, pending.cell);
    this.#settle(slot, runId, pending, false);
    pending.resolve({
      kind: "interrupted",
      error: new Error(`Job ${pending.jobId} was aborted before its handler began`),
    });
    return true;
  }

  /** Web Worker `slot` reported run `runId`, which the pool gave up before it began: its cell is free. */
  #reported(slot: PoolWorker, runId: number): void {
    const cell = slot.abandoned.get(runId);
    if (cell === undefined) return;
    slot.abandoned.delete(runId);
    slot.freeCells.push(cell);
  }

  /** Reads or records an attempt's durable steps for its Web Worker, and answers it. */
  async #steps(slot: PoolWorker, message: Extract<FromWorker, { type: "steps" }>): Promise<void> {
    const { callId, runId, write } = message;
    const run = slot.runs.get(runId);
    if (run === undefined) {
      // Its attempt ended: the Web Worker drops the call, which never settles (see the runner's).
      this.#post(slot, { type: "steps-done", callId, ended: true });
      return;
    }
    const steps = run.request.steps;
    try {
      if (steps === undefined) {
        throw new Error(
          `Run ${runId} has no durable steps: a job run now without being stored keeps none`,
        );
      }
      if (write === undefined) {
        this.#post(slot, { type: "steps-done", callId, read: await steps.load() });
      } else {
        await steps.record(write);
        this.#post(slot, { type: "steps-done", callId });
      }
    } catch (error) {
      this.#post(slot, { type: "steps-done", callId, error: toWire(asError(error)) });
    }
  }

  /** Ends run `runId`'s bookkeeping; its cell is freed unless `freeCell` is false (given up). */
  #settle(slot: PoolWorker, runId: number, pending: PendingRun, freeCell = true): void {
    slot.runs.delete(runId);
    if (freeCell && pending.cell >= 0) slot.freeCells.push(pending.cell);
    pending.request.signal.removeEventListener("abort", pending.onAbort);
    if (pending.aborted) slot.aborting--;
    if (pending.killTimer !== undefined) {
      clearTimeout(pending.killTimer);
      this.#timers.delete(pending.killTimer);
    }
  }

  /**
   * Terminates a Web Worker and replaces it. `"died"`: its running jobs count
   * a crash. `"hung"`: the aborted job was already settled by the runner; the
   * others sharing the Web Worker are put back with their attempt given back.
   */
  #retire(slot: PoolWorker, cause: "died" | "hung", why: string): void {
    if (slot.retired) return;
    this.#end(
      slot,
      (_runId, pending) =>
        cause === "died" && !pending.aborted && this.#mayHaveBegun(slot, pending)
          ? { kind: "crash", error: new Error(why) }
          : { kind: "interrupted", error: new Error(why) },
    );
    if (!this.#closed) this.#workers.push(this.#spawn());
    if (cause === "hung") {
      const until = performance.now() + TERMINATE_WAIT_MS;
      this.#after(TERMINATE_CHECK_MS, () => this.#checkStopped(slot, why, until));
    }
  }

  /** Whether attempt `pending`'s handler began, or may have (it has no cell). */
  #mayHaveBegun(slot: PoolWorker, pending: PendingRun): boolean {
    return pending.cell < 0 || Atomics.load(slot.cells, pending.cell) === BeginCell.Begun;
  }

  /** Terminates a Web Worker and ends what it still ran. */
  #end(
    slot: PoolWorker,
    resultOf: (runId: number, pending: PendingRun) => ExecutionResult,
  ): void {
    slot.retired = true;
    this.#stopLoadWait(slot);
    this.#workers.splice(this.#workers.indexOf(slot), 1);
    slot.worker.terminate();
    for (const [runId, pending] of [...slot.runs]) {
      // Its success was queued, not sent, when the Web Worker ended: it counts.
      const succeeded = !pending.aborted && pending.cell >= 0 &&
        Atomics.load(slot.cells, pending.cell) === BeginCell.Succeeded;
      this.#settle(slot, runId, pending);
      pending.resolve(succeeded ? { kind: "success", output: null } : resultOf(runId, pending));
    }
    for (const hook of slot.hooks.values()) {
      hook.reject(new Error("The Web Worker running this failed hook was terminated"));
    }
    slot.hooks.clear();
  }

  /**
   * Web Worker `slot` failed before it was ready, so no handler began in
   * it. While another Web Worker is ready, the pool goes on without this
   * one: its attempts and hooks go to the others, charged nothing (a Web
   * Worker that started in place of one that ended, and could not load,
   * must not stop the handlers running beside it). Else the pool falls back.
   */
  #failedToStart(slot: PoolWorker, why: string): void {
    if (slot.retired || this.#closed || this.#fallback !== null) return;
    const running = this.#workers.filter((each) => each !== slot && each.ready).length;
    if (running === 0) return this.#fallBack(new Error(why));
    slot.retired = true;
    this.#workers.splice(this.#workers.indexOf(slot), 1);
    this.#stopLoadWait(slot);
    slot.worker.terminate();
    this.#options.onShrink(
      new Error(`${why}; going on with ${running} Web Worker${running === 1 ? "" : "s"}`),
    );
    this.#handOver(slot, this);
    if (this.#workers.every((each) => each.ready)) this.#reportReady();
  }

  /**
   * No Web Worker is ready and one failed before it was: no Web Worker of
   * this process will do better (same script, same permissions), so every
   * Web Worker is terminated, the attempts they held (none had begun) run in
   * the fallback executor without being charged anything, and so does every
   * later one. Said once.
   */
  #fallBack(cause: Error): void {
    if (this.#fallback !== null || this.#closed) return;
    const fallback = this.#fallback = this.#options.fallback();
    this.#reportReady();
    clearInterval(this.#liveness);
    this.#options.onFallback(
      new Error(
        `${cause.message}; running jobs in this isolate instead (timeouts are soft there)`,
        { cause },
      ),
    );
    for (const slot of [...this.#workers]) {
      slot.retired = true;
      this.#workers.splice(this.#workers.indexOf(slot), 1);
      this.#stopLoadWait(slot);
      slot.worker.terminate();
      this.#handOver(slot, fallback);
    }
  }

  /**
   * Gives the attempts and hooks of Web Worker `slot`, which began none of
   * them, to `executor`, each to settle as it settles there.
   */
  #handOver(slot: PoolWorker, executor: Executor): void {
    for (const [runId, pending] of [...slot.runs]) {
      this.#settle(slot, runId, pending);
      void executor.run(pending.request).then(pending.resolve);
    }
    for (const hook of slot.hooks.values()) {
      executor.runFailedHook(hook.request).then(hook.resolve, hook.reject);
    }
    slot.hooks.clear();
  }

  /**
   * After terminate(): a thread still there at `until` (performance.now) is
   * stuck in synchronous code. One this process cannot see (no read access
   * to `/proc/self/task`, an OS without it, a thread not told apart when it
   * started) is taken to have ended: stopping the worker on every
   * termination would stall its jobs, where a thread truly stuck only keeps
   * its core until its loop ends.
   */
  #checkStopped(slot: PoolWorker, why: string, until: number): void {
    const threads = workerThreads();
    if (threads === null || slot.thread === null || !threads.has(slot.thread)) return;
    if (performance.now() < until) {
      this.#after(TERMINATE_CHECK_MS, () => this.#checkStopped(slot, why, until));
      return;
    }
    this.#reportStuck(
      new Error(
        `${why}; its thread is still running: a synchronous loop cannot be stopped, so this process should exit and be restarted`,
      ),
    );
  }

  /** Web Workers that ended on their own (`self.close()`, `Deno.exit()`) send nothing: look. */
  #findDead(): void {
    const threads = workerThreads();
    if (threads === null) return;
    for (const slot of [...this.#workers]) {
      if (slot.thread !== null && !threads.has(slot.thread)) {
        if (!slot.ready) this.#failedToStart(slot, "Web Worker ended before it was ready");
        else this.#retire(slot, "died", "Web Worker ended while running the job");
      }
    }
  }

  #post(slot: PoolWorker, message: ToWorker): void {
    if (!slot.retired) slot.worker.postMessage(message);
  }

  #after(ms: number, fn: () => void): ReturnType<typeof setTimeout> {
    const timer = setTimeout(() => {
      this.#timers.delete(timer);
      fn();
    }, ms);
    this.#timers.add(timer);
    return timer;
  }
}
