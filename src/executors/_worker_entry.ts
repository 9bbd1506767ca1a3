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
import type { Dispatcher, DispatchOptions, JobDefinition } from "../job.ts";
import { JobRegistry } from "../registry.ts";
import { asError } from "../errors.ts";
import { IsolateExecutor } from "./isolate.ts";
import { fromWire, type FromWorker, toWire, type ToWorker } from "./_worker_messages.ts";

const aborts = new Map<number, AbortController>();
const calls = new Map<number, { resolve(ids: number[]): void; reject(error: Error): void }>();
let nextCallId = 0;
let executor: Promise<IsolateExecutor> | null = null;

function send(message: FromWorker): void {
  self.postMessage(message);
}

/** `ctx.queue` inside a Web Worker: the main thread validates and stores. */
const dispatcher: Dispatcher = {
  async dispatch(job, payload, options) {
    return (await this.dispatchMany(job, [payload], options))[0]!;
  },
  dispatchMany(job: JobDefinition, payloads: readonly unknown[], options?: DispatchOptions) {
    return new Promise<number[]>((resolve, reject) => {
      const callId = ++nextCallId;
      calls.set(callId, { resolve, reject });
      try {
        send({ type: "dispatch", callId, name: job.name, payloads: [...payloads], options });
      } catch (error) {
        calls.delete(callId);
        reject(asError(error));
      }
    });
  },
};

self.onmessage = async ({ data }: MessageEvent<ToWorker>) => {
  switch (data.type) {
    case "init":
      // A failure to load surfaces as each run's error; catch here so it is not unhandled.
      executor = JobRegistry.load(data.jobsUrl).then((registry) =>
        new IsolateExecutor(registry, dispatcher)
      );
      executor.catch(() => {});
      return;
    case "run": {
      const controller = new AbortController();
      aborts.set(data.runId, controller);
      try {
        const result = await (await executor!).run({ ...data.request, signal: controller.signal });
        const { runId } = data;
        switch (result.kind) {
          case "success":
            send({ type: "result", runId, kind: "success" });
            break;
          case "release":
            send({ type: "result", runId, kind: "release", delayMs: result.delayMs });
            break;
          default: {
            const permanent = result.kind === "error" && result.permanent;
            send({ type: "result", runId, kind: "error", error: toWire(result.error), permanent });
          }
        }
      } catch (error) {
        // Only the jobs module failing to load gets here: the executor catches handler errors.
        const wire = toWire(asError(error));
        send({ type: "result", runId: data.runId, kind: "error", error: wire, permanent: false });
      } finally {
        aborts.delete(data.runId);
      }
      return;
    }
    case "abort":
      aborts.get(data.runId)?.abort(fromWire(data.reason));
      return;
    case "failed-hook":
      try {
        await (await executor!).runFailedHook({ ...data.request, error: fromWire(data.error) });
        send({ type: "hook-done", runId: data.runId });
      } catch (error) {
        send({ type: "hook-done", runId: data.runId, error: toWire(asError(error)) });
      }
      return;
    case "dispatched": {
      const call = calls.get(data.callId);
      calls.delete(data.callId);
      if (data.error !== undefined) call?.reject(fromWire(data.error));
      else call?.resolve(data.ids ?? []);
      return;
    }
  }
};
