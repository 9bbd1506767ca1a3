/**
 * The failed jobs: a list with retry and forget for each, retry all and
 * flush; and one failed job in detail, with its error, stack, attempts,
 * payload (pretty-printed, or only said to be encrypted: the dashboard
 * never decrypts) and the durable steps a retry resumes from.
 *
 * @internal
 * @module
 */
import { isEncryptedPayload } from "../../encryption.ts";
import type { FailedJob } from "../../admin/listing.ts";
import type { PageContext } from "../context.ts";
import { firstLine, formatTime } from "../format.ts";
import { type Html, html } from "../html.ts";
import { actionForm, layout, pager } from "../layout.ts";
import { readPaging } from "../query.ts";
import { logSection } from "./job_log.ts";
import { stepsSection } from "./job_steps.ts";
import type { JobStep } from "../../steps.ts";
import type { JobLogLine } from "../../job_logs.ts";

/** A failed job as the list shows it: everything but the payload and stack. */
export type FailedSummary = Omit<FailedJob, "payload" | "stack">;

/** The failed list's JSON. */
export interface FailedData {
  /** The page shown, from 1. */
  readonly page: number;
  /** Jobs per page. */
  readonly limit: number;
  /** Whether there is a next page. */
  readonly hasMore: boolean;
  /** Failed jobs in all. */
  readonly total: number;
  /** This page's failed jobs, newest first. */
  readonly jobs: FailedSummary[];
}

/** One failed job's JSON: its payload parsed when it is JSON, null when encrypted. */
export interface FailedDetailData {
  /** The job, without its stored payload text. */
  readonly job: Omit<FailedJob, "payload">;
  /** Whether the stored payload is encrypted (it is then not shown). */
  readonly encrypted: boolean;
  /** The payload as parsed JSON, or as stored text when it is not JSON; null when encrypted. */
  readonly payload: unknown;
  /** Its durable steps, by call position (a retry resumes from them); encrypted outputs unopened. */
  readonly steps: JobStep[];
  /** Its log, oldest line first; an encrypted job's lines unopened. */
  readonly log: JobLogLine[];
}

/** Reads the page of failed jobs the query asks for. */
export async function loadFailed(ctx: PageContext): Promise<FailedData> {
  const paging = readPaging(ctx.url.searchParams);
  const rows = await ctx.queue.failed({ limit: paging.limit + 1, offset: paging.offset });
  const counts = await ctx.queue.counts();
  return {
    page: paging.page,
    limit: paging.limit,
    hasMore: rows.length > paging.limit,
    total: Object.values(counts).reduce((sum, queue) => sum + queue.failed, 0),
    jobs: rows.slice(0, paging.limit).map(({ payload: _p, stack: _s, ...job }) => job),
  };
}

/** Reads one failed job, or null when it is not there. */
export async function loadFailedDetail(
  ctx: PageContext,
  id: number,
): Promise<FailedDetailData | null> {
  const found = await ctx.queue.failedJob(id);
  if (found === null) return null;
  const { payload: stored, ...job } = found;
  const encrypted = isEncryptedPayload(stored);
  let payload: unknown = null;
  if (!encrypted) {
    try {
      payload = JSON.parse(stored);
    } catch {
      payload = stored;
    }
  }
  const steps = await ctx.queue.steps(id);
  return { job, encrypted, payload, steps, log: await ctx.queue.logs(id, { open: false }) };
}

/** The failed list page. */
export function renderFailed(ctx: PageContext, data: FailedData): Html {
  const bulk = data.total === 0 ? null : html`<div class="actions">
${actionForm(ctx, "/failed/retry-all", "Retry all")}
${
    actionForm(ctx, "/failed/flush", "Flush all", {
      danger: true,
      fields: html`
        <label><input type="checkbox" name="confirm" value="yes" required> delete all ${data
          .total}</label>
      `,
    })
  }</div>`;
  const list = {
    page: data.page,
    limit: data.limit,
    shown: data.jobs.length,
    hasMore: data.hasMore,
    total: data.total,
  };
  const words = { one: "failed job", many: "failed jobs", none: "No failed jobs." };
  return layout(ctx, {
    heading: "Failed jobs",
    section: "/failed",
    api: `/api/failed${ctx.url.search}`,
    body:
      html`<p class="muted">Failed for good: <span data-live="total" data-empty="0">${data.total}</span></p>
${bulk}${failedTable(ctx, data.jobs)}${pager(ctx, "/failed", list, words)}`,
  });
}

function failedTable(ctx: PageContext, jobs: readonly FailedSummary[]): Html | null {
  if (jobs.length === 0) return null;
  const rows = jobs.map((job) =>
    html`
      <tr id="failed-${job.id}">
        <td class="num"><a href="${ctx.base}/failed/${job.id}">${job.id}</a></td>
        <td>${job.queue}</td>
        <td>${job.name}</td>
        <td class="num">${job.attempts}</td>
        <td>${formatTime(job.failedAt)}</td>
        <td class="error">${firstLine(job.error)}</td>
        <td>${actionForm(ctx, `/failed/${job.id}/retry`, "Retry")} ${actionForm(
          ctx,
          `/failed/${job.id}/forget`,
          "Forget",
          { danger: true },
        )}</td>
      </tr>
    `
  );
  return html`
    <table data-live-ids="jobs" data-ids="${jobs.map((job) => job.id).join(",")}">
      <thead>
        <tr>
          <th class="num">ID</th>
          <th>Queue</th>
          <th>Name</th>
          <th class="num">Attempts</th>
          <th>Failed at (UTC)</th>
          <th>Error</th>
          <th>${ctx.canWrite ? "Actions" : ""}</th>
        </tr>
      </thead>
      <tbody>${rows}</tbody>
    </table>
  `;
}

/** One failed job's page. */
export function renderFailedDetail(ctx: PageContext, data: FailedDetailData): Html {
  const { job } = data;
  const link = (path: string, id: number | null) =>
    id === null
      ? html`<span class="muted">none</span>`
      : html`<a href="${ctx.base}${path}">${id}</a>`;
  const payload = data.encrypted
    ? html`<p><strong>encrypted</strong> <span class="muted">— the payload is kept encrypted with APP_KEY; the dashboard never decrypts it.</span></p>`
    : html`<pre>${
      typeof data.payload === "string" ? data.payload : JSON.stringify(data.payload, null, 2)
    }</pre>`;
  return layout(ctx, {
    heading: `Failed job ${job.id}`,
    section: "/failed",
    api: `/api/failed/${job.id}`,
    body: html`
      <div class="actions">${actionForm(ctx, `/failed/${job.id}/retry`, "Retry")}
      ${actionForm(ctx, `/failed/${job.id}/forget`, "Forget", { danger: true })}
      <a href="${ctx.base}/failed">← all failed jobs</a></div>
      <dl class="fields">
        <dt>Name</dt>
        <dd>${job.name}</dd>
        <dt>Queue</dt>
        <dd>${job.queue}</dd>
        <dt>Attempts</dt>
        <dd>${job.attempts}${job.crashes > 0
          ? html`
            <span class="muted">(${job.crashes} worker crashes)</span>
          `
          : ""}</dd>
        <dt>Dispatched</dt>
        <dd>${formatTime(job.createdAt)} UTC</dd>
        <dt>Failed</dt>
        <dd>${formatTime(job.failedAt)} UTC</dd>
        <dt>Batch</dt>
        <dd>${link(`/batches#batch-${job.batchId}`, job.batchId)}</dd>
        <dt>Chain</dt>
        <dd>${job.chainId ?? html`<span class="muted">none</span>`}</dd>
      </dl>
      <h2>Error</h2><pre class="error">${job.error}</pre>
      <h2>Stack</h2>${job.stack === null
        ? html`<p class="muted">No stack was kept.</p>`
        : html`<pre>${job.stack}</pre>`}
      <h2>Payload</h2>${payload}
      ${stepsSection(data.steps, Date.now())}
      <h2>Log</h2>${logSection(data.log)}
    `,
  });
}
