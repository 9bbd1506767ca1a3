/**
 * Finished jobs: the completed jobs page (kept for `keepFinishedMs`,
 * filtered by name and queue, with their duration and output), and one
 * job's page by id, whatever its state: its payload, attempts, output or
 * (last) error, durable steps, log, and a Cancel button while it waits or
 * runs. Payloads
 * and outputs are shown escaped, as stored; an encrypted one only says so
 * (the dashboard never decrypts).
 *
 * @internal
 * @module
 */
import type { JobLogLine } from "../../job_logs.ts";
import { logSection } from "./job_log.ts";
import { stepsSection } from "./job_steps.ts";
import type { JobStep } from "../../steps.ts";
import { isEncryptedPayload } from "../../encryption.ts";
import type { FinishedJob, JobResultState } from "../../admin/job_control.ts";
import type { PageContext } from "../context.ts";
import { firstLine, formatDuration, formatTime } from "../format.ts";
import { type Html, html } from "../html.ts";
import { actionForm, layout, pager } from "../layout.ts";
import { readJobFilters, readPaging } from "../query.ts";

/** A kept job as the pages show it: the output parsed, or null when encrypted or absent. */
export interface CompletedView extends Omit<FinishedJob, "payload" | "output"> {
  /** Whether the stored output is encrypted (it is then not shown). */
  readonly encrypted: boolean;
  /** The output as parsed JSON (the stored text when it is not JSON); null without one. */
  readonly output: unknown;
}

/** The completed list's JSON. */
export interface CompletedData {
  /** The page shown, from 1. */
  readonly page: number;
  /** Jobs per page. */
  readonly limit: number;
  /** Whether there is a next page. */
  readonly hasMore: boolean;
  /** The filters applied. */
  readonly filters: { readonly name: string | null; readonly queue: string | null };
  /** This page's jobs, last finished first. */
  readonly jobs: CompletedView[];
}

/** One job's JSON. */
export interface JobDetailData {
  /** The job's id. */
  readonly id: number;
  /** Its state now. */
  readonly state: JobResultState;
  /** How many times its handler started. */
  readonly attempts: number;
  /** Why it failed or was cancelled; for a job not yet finished, the error of its last attempt; or null. */
  readonly error: string | null;
  /** Whether its stored payload is encrypted (it is then not shown). */
  readonly encrypted: boolean;
  /** Its payload as parsed JSON (the stored text when it is not JSON); null when encrypted or no longer kept. */
  readonly payload: unknown;
  /** Its kept record once it finished, or null. */
  readonly kept: CompletedView | null;
  /** Its durable steps, by call position; encrypted outputs unopened. */
  readonly steps: JobStep[];
  /** Its log, oldest line first; encrypted lines unopened. */
  readonly lines: JobLogLine[];
}

/** Stored JSON text as parsed, or as it is when it is not JSON; null for none. */
function parsed(stored: string | null): unknown {
  if (stored === null) return null;
  try {
    return JSON.parse(stored);
  } catch {
    return stored;
  }
}

function view({ payload: _payload, output, ...job }: FinishedJob): CompletedView {
  const encrypted = output !== null && isEncryptedPayload(output);
  return { ...job, encrypted, output: encrypted ? null : parsed(output) };
}

/** A stored payload as the job page shows it: never decrypted. */
function payloadView(stored: string | null): { encrypted: boolean; payload: unknown } {
  const encrypted = stored !== null && isEncryptedPayload(stored);
  return { encrypted, payload: encrypted ? null : parsed(stored) };
}

/** Reads the page of kept jobs the query asks for. */
export async function loadCompleted(ctx: PageContext): Promise<CompletedData> {
  const paging = readPaging(ctx.url.searchParams);
  const { name, queue } = readJobFilters(ctx.url.searchParams);
  const rows = await ctx.queue.finished({
    limit: paging.limit + 1,
    offset: paging.offset,
    ...(name !== undefined && { name }),
    ...(queue !== undefined && { queue }),
  });
  return {
    page: paging.page,
    limit: paging.limit,
    hasMore: rows.length > paging.limit,
    filters: { name: name ?? null, queue: queue ?? null },
    jobs: rows.slice(0, paging.limit).map(view),
  };
}

/** Reads one job by id, or null when no table holds it. */
export async function loadJobDetail(ctx: PageContext, id: number): Promise<JobDetailData | null> {
  const found = await jobState(ctx, id);
  if (found === null) return null;
  // Read without opening encrypted lines or outputs: the dashboard never decrypts.
  const steps = await ctx.queue.steps(id);
  return { ...found, steps, lines: await ctx.queue.logs(id, { open: false }) };
}

async function jobState(
  ctx: PageContext,
  id: number,
): Promise<Omit<JobDetailData, "steps" | "lines"> | null> {
  const kept = await ctx.queue.finishedJob(id);
  if (kept !== null) {
    const { state, attempts, error } = kept;
    return { id, state, attempts, error, ...payloadView(kept.payload), kept: view(kept) };
  }
  // Read without opening the output: the dashboard never decrypts.
  const failed = await ctx.queue.failedJob(id);
  if (failed !== null) {
    const { attempts, error } = failed;
    return { id, state: "failed", attempts, error, ...payloadView(failed.payload), kept: null };
  }
  const result = await ctx.queue.result(id);
  if (result === null) return null;
  // Read apart from its state: it may finish in between, and then its payload is no longer there.
  const unfinished = await ctx.queue.unfinishedJob(id);
  return {
    id,
    state: result.state,
    attempts: result.attempts,
    error: unfinished?.lastError ?? null,
    ...payloadView(unfinished?.payload ?? null),
    kept: null,
  };
}

function outputCell(job: CompletedView, max: number): Html | string {
  if (job.encrypted) return html`<strong>encrypted</strong>`;
  if (job.output === null) return html`<span class="muted">none</span>`;
  return firstLine(typeof job.output === "string" ? job.output : JSON.stringify(job.output), max);
}

/** The completed jobs page. */
export function renderCompleted(ctx: PageContext, data: CompletedData): Html {
  const value = (text: string | null) => text ?? "";
  const filters = html`<form class="filters" method="get" action="${ctx.base}/completed">
<label>Name <input name="name" value="${value(data.filters.name)}"></label>
<label>Queue <input name="queue" value="${value(data.filters.queue)}"></label>
<button type="submit">Filter</button></form>`;
  const list = {
    page: data.page,
    limit: data.limit,
    shown: data.jobs.length,
    hasMore: data.hasMore,
    total: null,
  };
  const words = { one: "finished job", many: "finished jobs", none: "No finished jobs kept." };
  const rows = data.jobs.map((job) =>
    html`
      <tr id="completed-${job.id}">
        <td class="num"><a href="${ctx.base}/jobs/${job.id}">${job.id}</a></td>
        <td>${job.queue}</td>
        <td>${job.name}</td>
        <td>${job.state}</td>
        <td class="num">${job.attempts}</td>
        <td class="num">${formatDuration(job.durationMs)}</td>
        <td>${formatTime(job.finishedAt)}</td>
        <td>${job.state !== "completed"
          ? html`<span class="error">${firstLine(job.error ?? "", 80)}</span>`
          : outputCell(job, 80)}</td>
      </tr>
    `
  );
  const table = data.jobs.length === 0 ? null : html`
    <table>
      <thead>
        <tr>
          <th class="num">ID</th>
          <th>Queue</th>
          <th>Name</th>
          <th>State</th>
          <th class="num">Attempts</th>
          <th class="num">Duration</th>
          <th>Finished (UTC)</th>
          <th>Output</th>
        </tr>
      </thead>
      <tbody>${rows}</tbody>
    </table>
  `;
  return layout(ctx, {
    heading: "Completed jobs",
    section: "/completed",
    api: `/api/completed${ctx.url.search}`,
    body:
      html`<p class="muted">Jobs that succeeded, were cancelled or expired, kept for keepFinishedMs.</p>
${filters}${table}${pager(ctx, "/completed", list, words)}`,
  });
}

function payloadSection(data: JobDetailData): Html {
  if (data.encrypted) {
    return html`<p><strong>encrypted</strong> <span class="muted">— kept encrypted with APP_KEY; the dashboard never decrypts it.</span></p>`;
  }
  if (data.payload === null) return html`<p class="muted">No longer kept.</p>`;
  return html`<pre>${
    typeof data.payload === "string" ? data.payload : JSON.stringify(data.payload, null, 2)
  }</pre>`;
}

/** One job's page. */
export function renderJobDetail(ctx: PageContext, data: JobDetailData): Html {
  const { kept } = data;
  const running = data.state === "pending" || data.state === "running";
  const cancel = running
    ? actionForm(ctx, `/jobs/${data.id}/cancel`, "Cancel", { danger: true })
    : null;
  const failedLink = data.state === "failed"
    ? html`<a href="${ctx.base}/failed/${data.id}">the failed job, with its stack and retry →</a>`
    : null;
  const output = kept === null || kept.state !== "completed"
    ? null
    : html`<h2>Output</h2>${
      kept.encrypted
        ? html`<p><strong>encrypted</strong> <span class="muted">— kept encrypted with APP_KEY; the dashboard never decrypts it.</span></p>`
        : kept.output === null
        ? html`<p class="muted">None (the job has no output schema).</p>`
        : html`<pre>${
          typeof kept.output === "string" ? kept.output : JSON.stringify(kept.output, null, 2)
        }</pre>`
    }`;
  const times = kept === null ? null : html`
    <dt>Name</dt>
    <dd>${kept.name}</dd>
    <dt>Queue</dt>
    <dd>${kept.queue}</dd>
    <dt>Dispatched</dt>
    <dd>${formatTime(kept.createdAt)} UTC</dd>
    <dt>Finished</dt>
    <dd>${formatTime(kept.finishedAt)} UTC</dd>
    <dt>Duration</dt>
    <dd>${formatDuration(kept.durationMs)}</dd>
  `;
  return layout(ctx, {
    heading: `Job ${data.id}`,
    section: "/jobs",
    api: `/api/jobs/${data.id}`,
    body: html`
      <div class="actions">${cancel} ${failedLink}</div>
      <dl class="fields">
        <dt>State</dt>
        <dd>${data.state}</dd>
        <dt>Attempts</dt>
        <dd>${data.attempts}</dd>
        ${times}
      </dl>
      ${data.error === null ? null : html`
        <h2>${running ? "Last error" : "Error"}</h2>
        <pre class="error">${data.error}</pre>
      `}
      <h2>Payload</h2>
      ${payloadSection(data)}
      ${output}
      ${stepsSection(data.steps, Date.now())}
      <h2>Log</h2>
      ${logSection(data.lines)}
    `,
  });
}
