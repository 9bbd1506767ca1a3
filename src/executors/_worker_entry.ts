/**
 * The script each Web Worker of the pool runs: it imports the jobs module
 * once, then runs many attempts with the same rules as the isolate executor,
 * and dispatches through the main thread (which does every store write).
 *
 * @internal
 * @module
 */
/// <reference no-default-lib="true" />
/// <reference lib="deno.worker" />
import { TimerTurns } from "../timer_turns.ts";
import { PayloadCipher } from "../encryption.ts";
import { asError } from "../errors.ts";
import type { DispatchOptions, JobDefinition } from "../job.ts";
import { AsyncLocalStorage } from "node:async_hooks";
import { captureConsole } from "./_console_capture.ts";
import type { ExecutionRequest, HandlerQueue, StepPort } from "./executor.ts";
import type { JobStepsRow, StepWrite } from "../stores/store.ts";
import { JobRegistry } from "../registry.ts";
import { JobRows } from "../dispatch/job_rows.ts";
import { systemClock } from "../clock.ts";
import { activeTraceparent } from "../trace_context.ts";
import { IsolateExecutor } from "./isolate.ts";
import { WorkerLogLines } from "./_worker_log_lines.ts";
import {
  BeginCell,
  fromWire,
  type FromWorker,
  toWire,
  type ToWorker,
  type WireResult,
  type WireRun,
} from "./_worker_messages.ts";

const aborts = new Map<number, AbortController>();
const calls = new Map<number, { resolve(ids: number[]): void; reject(error: Error): void }>();
/** Step reads and writes waiting for the main thread's answer. */
const stepCalls = new Map<
  number,
  { resolve(read: JobStepsRow | undefined): void; reject(error: Error): void }
>();
let nextTimerId = 0;
let nextCallId = 0;
let executor: Promise<IsolateExecutor> | null = null;
/**
 * Checks and encodes what handlers dispatch, as the isolate's dispatch does,
 * before it crosses to the main thread; set once the jobs module loaded.
 */
let jobRows: JobRows | null = null;
/** The begin cells the pool shares with this Web Worker (`BeginCell`), from "init". */
let beginCells: Int32Array | null = null;
/** Resolves on the pool's "go", after it heard "ready": no attempt starts before. */
const go = Promise.withResolvers<void>();
/** The loaded executor once "go" came: attempts then start without waiting on either. */
let started: IsolateExecutor | null = null;

/** The executor, once the pool said "go" (it says so only after the jobs module loaded). */
async function whenStarted(): Promise<IsolateExecutor> {
  await go.promise;
  return await executor!;
}

let running = 0;
/** Runs that succeeded without output since the last message: their ids are all the pool needs. */
let done: number[] = [];
let results: WireResult[] = [];
/**
 * The attempts whose handler began since the last message: sent with it,
 * for those still running (the result of one that ended says more).
 */
const begun = new Set<number>();
/** The latest progress per attempt, sent with the next batch of results or on its own. */
const progress = new Map<number, number>();
/**
 * Lines logged since the last message, sent before the results they precede;
 * capped per attempt from "init" on (no attempt runs before it).
 */
let logLines = new WorkerLogLines(Infinity);
/**
 * The attempt whose handler is running, for console capture and for the
 * span of what it dispatches; entered only where one of them needs it.
 */
const current = new AsyncLocalStorage<number>();
/** Whether "init" asked for console capture. */
let consoleCaptured = false;
/** The attempt span of each running attempt, for what its handler dispatches. */
const traceparents = new Map<number, string>();
let flushScheduled = false;
/**
 * When log lines last went out (performance.now). Only a message that held
 * lines counts: a line logged just after an attempt's result or begin mark
 * went out must still go at once, or a handler that then holds the thread
 * keeps it until it yields (and loses it if its Web Worker is terminated).
 */
let linesSentAt = -Infinity;
/**
 * The longest a handler's lines and progress wait to be sent while it holds
 * the thread (a scheduled flush cannot run then): well within the second in
 * which the runner writes them, so a line logged before a timeout has
 * reached the runner when the Web Worker is terminated.
 */
const FLUSH_EVERY_MS = 250;
/** The longest progress waits to be sent while a handler holds the thread: the runner writes it once a second. */
const PROGRESS_EVERY_MS = 1_000;
/** Since when progress waits to be sent (performance.now), or null. */
let progressSince: number | null = null;

function send(message: FromWorker): void {
  self.postMessage(message);
}

/**
 * Sends results in batches: when the last running attempt ends (all of a
 * tick's attempts arrive in one message, so they end together), or after one
 * macrotask hop while others still run. The runner then settles them in one
 * transaction instead of one per job.
 */
function report(result: WireResult): void {
  if (result.kind === "success" && result.output === null) done.push(result.runId);
  else results.push(result);
  if (running === 0) flush();
  else scheduleFlush();
}

/**
 * Sends once after a macrotask hop, so a burst of calls becomes one message:
 * `setImmediate` (about 2 µs, a `MessageChannel` round 5-7 µs; `setTimeout(0)`
 * costs milliseconds).
 */
function scheduleFlush(): void {
  if (flushScheduled) return;
  flushScheduled = true;
  setImmediate(flush);
}

/**
 * A line to send: at once when no line went out for {@linkcode FLUSH_EVERY_MS}
 * (`postMessage` works from a thread a synchronous handler holds, where the
 * scheduled flush cannot run until it yields), else with the scheduled
 * flush. So what a CPU-bound handler logs reaches the store while it runs,
 * and survives its Web Worker being terminated on timeout.
 */
function flushSoon(): void {
  if (performance.now() - linesSentAt >= FLUSH_EVERY_MS) flush();
  else scheduleFlush();
}

/**
 * A progress report to send: with the scheduled flush, so a burst of
 * reports goes as its last value; at once when one has waited
 * {@linkcode PROGRESS_EVERY_MS}, which happens only while a handler holds
 * the thread.
 */
function progressSoon(): void {
  const now = performance.now();
  if (progressSince === null) progressSince = now;
  if (now - progressSince >= PROGRESS_EVERY_MS) flush();
  else scheduleFlush();
}

function flush(): void {
  flushScheduled = false;
  progressSince = null;
  if (begun.size > 0) {
    const runIds = [...begun].filter((runId) => aborts.has(runId));
    begun.clear();
    if (runIds.length > 0) send({ type: "begun", runIds });
  }
  if (!logLines.empty) {
    linesSentAt = performance.now();
    const lines = logLines.take();
    try {
      send({ type: "logs", lines });
    } catch {
      // Fields are JSON text and messages strings: only an odd level could fail; drop the batch.
    }
  }
  if (progress.size > 0) {
    send({
      type: "progress",
      reports: [...progress].map(([runId, percent]) => ({ runId, percent })),
    });
    progress.clear();
  }
  if (done.length === 0 && results.length === 0) return;
  const ids = done;
  const batch = results;
  done = [];
  results = [];
  try {
    send({ type: "results", done: ids, results: batch });
  } catch {
    // One result would not clone: send each on its own, so the others still arrive.
    send({ type: "results", done: ids, results: [] });
    for (const result of batch) sendAlone(result);
  }
}

/**
 * The thread's turns between the handlers of one message: at most 10 ms
 * of their synchronous work before the next handler lets the results ready
 * by then go out. A message is a turn.
 */
const handlerTurns = new TimerTurns(10);

/**
 * Before a handler is called (`ExecutionRequest.beforeHandler`): when the
 * handlers started since the message came held the thread past
 * {@linkcode handlerTurns}' limit (CPU-bound work before their first
 * await), one macrotask hop first, in which the results ready by then go
 * out. Else a job's result would wait for the next job's synchronous work,
 * and the runner could time out a job that had succeeded. Undefined (no
 * hop, the results still batched) otherwise.
 */
function threadFree(): Promise<void> | undefined {
  return handlerTurns.starved ? handlerTurns.take().then(flush) : undefined;
}

/** Sends one result; one that will not clone goes as an error saying why. */
function sendAlone(result: WireResult): void {
  try {
    send({ type: "results", done: [], results: [result] });
  } catch (error) {
    send({
      type: "results",
      done: [],
      results: [{
        runId: result.runId,
        kind: "error",
        error: toWire(asError(error)),
        permanent: false,
      }],
    });
  }
}

/**
 * Dispatches (into a batch when `batchId` is set): the payloads are checked
 * and encoded here, on the values the handler passed, by the same code as
 * the isolate's dispatch, so they are refused with the same errors and
 * stored as the same text; the main thread seals and stores them.
 */
function dispatchThroughMain(
  job: JobDefinition,
  payloads: readonly unknown[],
  options: DispatchOptions | undefined,
  batchId: number | null,
): Promise<number[]> {
  return new Promise<number[]>((resolve, reject) => {
    const callId = ++nextCallId;
    try {
      // Set: handlers and failed hooks run only once the jobs module loaded.
      const encoded = jobRows!.encode(job, payloads, options, batchId);
      const runId = current.getStore();
      const traceparent = activeTraceparent() ??
        (runId === undefined ? null : traceparents.get(runId) ?? null);
      calls.set(callId, { resolve, reject });
      send({
        type: "dispatch",
        callId,
        name: job.name,
        payloads: encoded,
        options,
        batchId,
        traceparent,
      });
    } catch (error) {
      calls.delete(callId);
      reject(asError(error));
    }
  });
}

/** `ctx.queue` and `ctx.addToBatch` inside a Web Worker. */
const handlerQueue: HandlerQueue = {
  async dispatch(job, payload, options) {
    return (await dispatchThroughMain(job, [payload], options, null))[0]!;
  },
  dispatchMany: (job, payloads, options) => dispatchThroughMain(job, payloads, options, null),
  addToBatch: (batchId, job, payloads, options) =>
    dispatchThroughMain(job, payloads, options, batchId),
};

/** A step read or write, done by the main thread (which does every store write). */
function stepsThroughMain(runId: number, write?: StepWrite): Promise<JobStepsRow | undefined> {
  return new Promise((resolve, reject) => {
    const callId = ++nextCallId;
    stepCalls.set(callId, { resolve, reject });
    send({ type: "steps", callId, runId, ...(write !== undefined && { write }) });
  });
}

/** The durable steps port of attempt `runId`: its reads, writes and step timers go through main. */
function stepPort(runId: number): StepPort {
  return {
    load: async () => (await stepsThroughMain(runId))!,
    record: async (write) => {
      await stepsThroughMain(runId, write);
    },
    timeStep(key, timeoutMs) {
      const timerId = ++nextTimerId;
      send({ type: "step-timer", runId, timerId, key, timeoutMs });
      return () => send({ type: "step-timer", runId, timerId, key });
    },
  };
}

/**
 * How long a "run" message may have waited in this thread's queue (behind a
 * handler that held the thread, or a jobs module still loading) before its
 * attempts start after one macrotask hop: the aborts that reached the queue
 * meanwhile (a timeout that ran out while it waited) are then seen first,
 * and those attempts end without calling their handler.
 */
const LATE_RUN_MS = 10;

/**
 * Marks attempt `cell` begun, right before its handler is called; when the
 * pool abandoned it first (it timed out or was cancelled while it waited),
 * aborts it instead, so its handler is not called.
 */
function mayBegin(cell: number, controller: AbortController): void {
  if (cell < 0 || beginCells === null) return;
  if (
    Atomics.compareExchange(beginCells, cell, BeginCell.Queued, BeginCell.Begun) ===
      BeginCell.Queued
  ) {
    return;
  }
  controller.abort(new Error("The pool gave this attempt up before its handler began"));
}

/** Runs one attempt, which `controller` aborts, and reports how it ended. */
async function attempt(run: WireRun, controller: AbortController): Promise<void> {
  const [
    runId,
    id,
    name,
    queueName,
    payload,
    attemptNumber,
    batchId,
    scheduled,
    traceparent,
    flowParents,
    cell,
  ] = run;
  if (traceparent !== null) traceparents.set(runId, traceparent);
  let outcome: WireResult;
  try {
    const ready = started ?? await whenStarted();
    const request: ExecutionRequest = {
      id,
      name,
      queueName,
      payload,
      attempt: attemptNumber,
      batchId,
      scheduled,
      traceparent,
      flowParents,
      signal: controller.signal,
      onProgress(percent) {
        progress.set(runId, percent);
        progressSoon();
      },
      onBegin() {
        begun.add(runId);
        scheduleFlush();
      },
      beforeHandler() {
        const waiting = threadFree();
        if (waiting === undefined) {
          mayBegin(cell, controller);
          return undefined;
        }
        return waiting.then(() => mayBegin(cell, controller));
      },
      onLog(line) {
        logLines.add(runId, line);
        flushSoon();
      },
      steps: stepPort(runId),
    };
    // The attempt is told apart only for console capture, and for what it dispatches when it
    // has a span: without either, it runs without entering its context (about 2 µs a job).
    const result = await (consoleCaptured || traceparent !== null
      ? current.run(runId, () =>
        ready.run(request))
      : ready.run(request));
    if (result.kind === "success") {
      outcome = { runId, kind: "success", output: result.output ?? null };
    } else if (result.kind === "release") {
      outcome = {
        runId,
        kind: "release",
        delayMs: result.delayMs,
        ...(result.holdsGroup === true && { holdsGroup: true }),
      };
    } else if (result.kind === "park") {
      const { kind: _, ...park } = result;
      outcome = { runId, kind: "park", park };
      // Steps started beside the sleep or wait stop: none of them can be recorded any more.
      controller.abort(new Error(`Job ${id} parked: its attempt ended`));
    } else {
      const permanent = result.kind === "error" && result.permanent;
      outcome = { runId, kind: "error", error: toWire(result.error), permanent };
    }
  } catch (error) {
    // Only the jobs module failing to load gets here: the executor catches handler errors.
    outcome = { runId, kind: "error", error: toWire(asError(error)), permanent: false };
  } finally {
    aborts.delete(runId);
    traceparents.delete(runId);
    running--;
  }
  if (outcome.kind === "success" && outcome.output === null && cell >= 0 && beginCells !== null) {
    Atomics.store(beginCells, cell, BeginCell.Succeeded); // counted even if this thread dies now
  }
  report(outcome);
}

self.onmessage = async ({ data }: MessageEvent<ToWorker>) => {
  switch (data.type) {
    case "init":
      logLines = new WorkerLogLines(data.maxLogBytes);
      beginCells = new Int32Array(data.beginCells);
      if (data.captureConsole === true) {
        consoleCaptured = true;
        captureConsole((level, message) => {
          const runId = current.getStore();
          if (runId === undefined || !aborts.has(runId)) return;
          logLines.add(runId, { level, message, fields: null });
          flushSoon();
        });
      }
      // A failure to load surfaces as each run's error; catch here so it is not unhandled.
      executor = Promise.all([
        JobRegistry.load(data.jobsUrl),
        data.appKeys === null ? null : PayloadCipher.fromKeys(data.appKeys),
      ]).then(([registry, cipher]) => {
        jobRows = new JobRows(registry, systemClock, data.maxPayloadBytes, null);
        return new IsolateExecutor(registry, handlerQueue, cipher);
      });
      // Told before any run's result: the pool then runs this Web Worker's jobs elsewhere.
      executor.then(
        () => send({ type: "ready" }),
        (error) => send({ type: "init-failed", error: toWire(asError(error)) }),
      );
      return;
    case "go":
      go.resolve();
      started = await executor!; // resolved: "ready" was sent only after it loaded
      return;
    case "run": {
      // Count them all as running first, so their results go back together.
      running += data.runs.length;
      handlerTurns.noteTurn();
      // Abortable from now on: an abort seen before an attempt's handler began skips it.
      const controllers = data.runs.map((run) => {
        const controller = new AbortController();
        aborts.set(run[0], controller);
        return controller;
      });
      if (performance.timeOrigin + performance.now() - data.sentAt > LATE_RUN_MS) {
        // Messages already queued (the aborts) are handled before an immediate.
        await new Promise((resolve) => setImmediate(resolve));
      }
      for (const [index, run] of data.runs.entries()) void attempt(run, controllers[index]!);
      return;
    }
    case "abort":
      aborts.get(data.runId)?.abort(fromWire(data.reason));
      return;
    case "failed-hook":
      try {
        await (await whenStarted()).runFailedHook({ ...data.request, error: fromWire(data.error) });
        send({ type: "hook-done", runId: data.runId });
      } catch (error) {
        send({ type: "hook-done", runId: data.runId, error: toWire(asError(error)) });
      }
      return;
    case "steps-done": {
      const call = stepCalls.get(data.callId);
      stepCalls.delete(data.callId);
      if (data.ended) return;
      if (data.error !== undefined) call?.reject(fromWire(data.error));
      else call?.resolve(data.read);
      return;
    }
    case "dispatched": {
      const call = calls.get(data.callId);
      calls.delete(data.callId);
      if (data.error !== undefined) call?.reject(fromWire(data.error));
      else call?.resolve(data.ids ?? []);
      return;
    }
  }
};
