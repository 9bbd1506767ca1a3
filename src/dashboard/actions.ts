/**
 * The dashboard's actions, each a POST: retry, forget, retry all and flush
 * failed jobs; cancel a batch and retry its failed jobs; cancel a flow; pause, resume and
 * run a schedule now; cancel a job; pause and resume a queue; resume a paused or held
 * group. By the time one
 * runs, the router has checked the gate, read-only mode, the body type, the
 * origin and the CSRF token.
 *
 * @internal
 * @module
 */
import type { PageContext } from "./context.ts";
import { readId } from "./query.ts";

/** What an action did, told back as a notice on the page it returns to. */
export interface ActionResult {
  /** The notice's code (see the layout's notices). */
  readonly notice: string;
  /** The count the notice tells. */
  readonly count: number;
  /** The page to return to, a path under the dashboard. */
  readonly back: string;
  /** False when nothing was there to act on. */
  readonly ok: boolean;
}

/**
 * The status of an action's JSON answer: 200 when it acted; when it did
 * not, 400 for a missing confirmation, 409 when the state of what it names
 * refuses the action (the job, batch or flow has finished, the queue or
 * group is not paused, the schedule's unique job is queued, the schedule is
 * stored but this dashboard's jobs module does not define it), 404 when that
 * is not there.
 */
export function answerStatus(result: ActionResult): 200 | 400 | 404 | 409 {
  if (result.ok) return 200;
  switch (result.notice) {
    case "flush-unconfirmed":
      return 400;
    case "job-finished":
    case "batch-finished":
    case "flow-finished":
    case "queue-not-paused":
    case "group-gone":
    case "schedule-held":
    case "schedule-not-defined":
      return 409;
    default:
      return 404;
  }
}

/** Reads a form field; null when absent. */
export type FormField = (name: string) => string | null;

/** An action found for a path: run it with the request's form. */
export type Action = (ctx: PageContext, field: FormField) => Promise<ActionResult>;

/** The action at `segments` (the path under the dashboard, split), or null when there is none. */
export function findAction(segments: readonly string[]): Action | null {
  const [section, second, verb, ...rest] = segments;
  if (rest.length > 0) return null;
  if (section === "failed" && verb === undefined) {
    if (second === "retry-all") return retryAll;
    if (second === "flush") return flush;
    return null;
  }
  if (section === "schedules" && second !== undefined && verb !== undefined) {
    return scheduleAction(second, verb);
  }
  if (section === "queues" && second !== undefined && verb === "pause") {
    return (ctx) => pauseQueue(ctx, second);
  }
  if (section === "queues" && second !== undefined && verb === "resume") {
    return (ctx) => resumeQueue(ctx, second);
  }
  if (section === "groups" && second === "resume" && verb === undefined) return resumeGroup;
  const id = readId(second);
  if (id === null || verb === undefined) return null;
  if (section === "jobs" && verb === "cancel") return (ctx) => cancelJob(ctx, id);
  if (section === "failed" && verb === "retry") return (ctx) => retryOne(ctx, id);
  if (section === "failed" && verb === "forget") return (ctx) => forgetOne(ctx, id);
  if (section === "batches" && verb === "cancel") return (ctx) => cancelBatch(ctx, id);
  if (section === "batches" && verb === "retry") return (ctx) => retryBatch(ctx, id);
  if (section === "flows" && verb === "cancel") return (ctx) => cancelFlow(ctx, id);
  return null;
}

async function retryOne(ctx: PageContext, id: number): Promise<ActionResult> {
  const ok = await ctx.queue.retry(id);
  return { ok, notice: ok ? "retried" : "gone", count: ok ? 1 : 0, back: "/failed" };
}

async function forgetOne(ctx: PageContext, id: number): Promise<ActionResult> {
  const ok = await ctx.queue.forget(id);
  return { ok, notice: ok ? "forgotten" : "gone", count: ok ? 1 : 0, back: "/failed" };
}

async function retryAll(ctx: PageContext): Promise<ActionResult> {
  const count = await ctx.queue.retryAll();
  return { ok: true, notice: "retried", count, back: "/failed" };
}

/** Deletes every failed job, only with `confirm=yes` (the form's required checkbox). */
async function flush(ctx: PageContext, field: FormField): Promise<ActionResult> {
  if (field("confirm") !== "yes") {
    return { ok: false, notice: "flush-unconfirmed", count: 0, back: "/failed" };
  }
  const count = await ctx.queue.flushFailed();
  return { ok: true, notice: "flushed", count, back: "/failed" };
}

/**
 * Cancels a batch. The queue answers false both for a batch that is not
 * there and for one that has finished or was cancelled; only its status
 * tells them apart (as the CLI's `cancel-batch` does).
 */
async function cancelBatch(ctx: PageContext, id: number): Promise<ActionResult> {
  if (await ctx.queue.cancelBatch(id)) {
    return { ok: true, notice: "cancelled", count: 1, back: "/batches" };
  }
  const ended = await ctx.queue.batchStatus(id) !== null;
  return { ok: false, notice: ended ? "batch-finished" : "gone", count: 0, back: "/batches" };
}

/**
 * Puts a batch's failed jobs back: done, with a count of 0, for a batch
 * with none (a second click, say), as retrying every failed job is; "gone"
 * only for a batch that is not there.
 */
async function retryBatch(ctx: PageContext, id: number): Promise<ActionResult> {
  const count = await ctx.queue.retryBatch(id);
  const ok = count > 0 || await ctx.queue.batchStatus(id) !== null;
  return { ok, notice: ok ? "batch-retried" : "gone", count, back: "/batches" };
}

/** Cancels a flow; a false from the queue is told apart as {@linkcode cancelBatch}'s is. */
async function cancelFlow(ctx: PageContext, id: number): Promise<ActionResult> {
  if (await ctx.queue.cancelFlow(id)) {
    return { ok: true, notice: "flow-cancelled", count: 1, back: "/flows" };
  }
  const ended = await ctx.queue.flowStatus(id) !== null;
  return { ok: false, notice: ended ? "flow-finished" : "gone", count: 0, back: "/flows" };
}

/** A path segment as the name it encodes, or null when it is not valid percent-encoding. */
function decodeSegment(segment: string): string | null {
  try {
    return decodeURIComponent(segment);
  } catch {
    return null;
  }
}

function scheduleAction(segment: string, verb: string): Action | null {
  switch (verb) {
    case "pause":
    case "resume":
      return async (ctx) => {
        const name = pathName(segment, "schedule");
        const ok = verb === "pause"
          ? await ctx.queue.pauseSchedule(name)
          : await ctx.queue.resumeSchedule(name);
        const notice = ok ? `schedule-${verb}d` : "schedule-gone";
        return { ok, notice, count: ok ? 1 : 0, back: "/schedules" };
      };
    case "run":
      return async (ctx) => {
        const name = pathName(segment, "schedule");
        if (!ctx.queue.definesSchedule(name)) {
          // Only the jobs module builds a schedule's job: stored without it here, it cannot run.
          const stored = (await ctx.queue.schedules()).some((each) => each.name === name);
          const notice = stored ? "schedule-not-defined" : "schedule-gone";
          return { ok: false, notice, count: 0, back: "/schedules" };
        }
        // Null: the job is unique and one holds its key, so nothing was queued.
        const id = await ctx.queue.triggerSchedule(name);
        return id === null
          ? { ok: false, notice: "schedule-held", count: 0, back: "/schedules" }
          : { ok: true, notice: "schedule-run", count: 1, back: "/schedules" };
      };
    default:
      return null;
  }
}

async function cancelJob(ctx: PageContext, id: number): Promise<ActionResult> {
  const outcome = await ctx.queue.cancel(id, { reason: "cancelled from the dashboard" });
  const ok = outcome === "cancelled" || outcome === "cancelling";
  const notice = outcome === "not-found" ? "gone" : `job-${outcome}`;
  return { ok, notice, count: ok ? 1 : 0, back: `/jobs/${id}` };
}

/** `queue` is a path segment: the queue checks its name (a bad one is a 400). */
async function pauseQueue(ctx: PageContext, queue: string): Promise<ActionResult> {
  await ctx.queue.pause(pathName(queue, "queue"), { reason: "paused from the dashboard" });
  return { ok: true, notice: "paused", count: 1, back: "/" };
}

async function resumeQueue(ctx: PageContext, queue: string): Promise<ActionResult> {
  const ok = await ctx.queue.resume(pathName(queue, "queue"));
  return { ok, notice: ok ? "resumed" : "queue-not-paused", count: ok ? 1 : 0, back: "/" };
}

/**
 * Resumes the group of the form's `name` (the job name) and `key`, fields
 * rather than path segments as a key may hold any character; the queue
 * checks both (a missing or bad one is a 400). The page sends them as
 * `name_b64` and `key_b64` (see {@linkcode groupField}).
 */
async function resumeGroup(ctx: PageContext, field: FormField): Promise<ActionResult> {
  const name = groupField(field, "name");
  const key = groupField(field, "key");
  if (name === null || key === null) {
    throw new TypeError("resuming a group takes the form fields name and key");
  }
  const ok = await ctx.queue.resumeGroup(name, key);
  return { ok, notice: ok ? "group-resumed" : "group-gone", count: ok ? 1 : 0, back: "/" };
}

/**
 * The group field `name`: from `<name>_b64` when sent (base64url of its
 * UTF-8), else as sent. A browser rewrites a line break in a form's value
 * (the HTML parser reads CR and CRLF as LF, a form sends LF as CRLF), so the
 * page carries a name or key encoded, which no form changes.
 */
function groupField(field: FormField, name: "name" | "key"): string | null {
  const encoded = field(`${name}_b64`);
  if (encoded === null) return field(name);
  try {
    const bytes = Uint8Array.fromBase64(encoded, { alphabet: "base64url" });
    return new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    throw new TypeError(`the form field ${name}_b64 is not base64url of UTF-8 text`);
  }
}

/** `text` as the `_b64` form fields carry it: base64url of its UTF-8, unpadded. */
export function formEncoded(text: string): string {
  return new TextEncoder().encode(text).toBase64({ alphabet: "base64url", omitPadding: true });
}

/** The name a path segment encodes; a `TypeError` (a 400) when it is not valid percent-encoding. */
function pathName(segment: string, what: string): string {
  const name = decodeSegment(segment);
  if (name === null) {
    throw new TypeError(`the ${what} name in the path is not valid percent-encoding: ${segment}`);
  }
  return name;
}
