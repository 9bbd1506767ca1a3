/**
 * Job types: per job name and queue, over the last hours, the runs,
 * successes, retries and failures, the average and p95 runtime, and the
 * average wait, from the per-minute metrics rollup.
 *
 * @internal
 * @module
 */
import type { JobTypeMetrics } from "../../admin/metrics.ts";
import type { PageContext } from "../context.ts";
import { formatDuration, formatTime } from "../format.ts";
import { type Html, html } from "../html.ts";
import { layout } from "../layout.ts";
import { readHours } from "../query.ts";

/** The job types page's JSON. */
export interface JobTypesData {
  /** Hours looked back, 1 to 168. */
  readonly hours: number;
  /** Start of the window. */
  readonly since: Date;
  /** End of the window (the end of the current minute). */
  readonly until: Date;
  /** Per job name and queue, sorted by queue then name. */
  readonly jobTypes: JobTypeMetrics[];
}

/** Reads the metrics of the hours the query asks for. */
export async function loadJobTypes(ctx: PageContext): Promise<JobTypesData> {
  const hours = readHours(ctx.url.searchParams);
  const metrics = await ctx.queue.metrics({ windowMs: hours * 3_600_000 });
  return { hours, since: metrics.since, until: metrics.until, jobTypes: metrics.byJob };
}

/** The job types page. */
export function renderJobTypes(ctx: PageContext, data: JobTypesData): Html {
  const choices = [1, 24, 168].map((hours) =>
    hours === data.hours
      ? html`<strong>${label(hours)}</strong>`
      : html`<a href="${ctx.base}/job-types?hours=${hours}">${label(hours)}</a>`
  );
  const rows = data.jobTypes.map((type) =>
    html`
      <tr>
        <td>${type.queue}</td>
        <td>${type.name}</td>
        <td class="num">${type.runs}</td>
        <td class="num">${type.completed}</td>
        <td class="num">${type.retried}</td>
        <td class="num">${type.failed}</td>
        <td class="num">${type.expired}</td>
        <td class="num">${formatDuration(type.averageRuntimeMs)}</td>
        <td class="num">${formatDuration(type.p95RuntimeMs)}</td>
        <td class="num">${formatDuration(type.averageWaitMs)}</td>
      </tr>
    `
  );
  const table = rows.length === 0
    ? html`<p class="muted">Nothing settled in this window.</p>`
    : html`
      <table>
        <thead>
          <tr>
            <th>Queue</th>
            <th>Job</th>
            <th class="num">Runs</th>
            <th class="num">Completed</th>
            <th class="num">Retried</th>
            <th class="num">Failed</th>
            <th class="num">Expired</th>
            <th class="num">Average runtime</th>
            <th class="num">p95 runtime</th>
            <th class="num">Average wait</th>
          </tr>
        </thead>
        <tbody>${rows}</tbody>
      </table>
    `;
  return layout(ctx, {
    heading: "Job types",
    section: "/job-types",
    api: null,
    body: html`
      <p class="actions">Last ${choices} <span class="muted">(${formatTime(
        data.since,
      )} to ${formatTime(data.until)} UTC)</span></p>
      ${table}
      <p
        class="muted">Runs are attempts whose handler ran and ended in a success, a retry or a failure. The p95 is estimated
      from a histogram with 1-2-5 buckets (1 ms to 5 min), so it is exact to a bucket's width.</p>
    `,
  });
}

function label(hours: number): string {
  return hours === 1 ? "hour" : hours === 24 ? "24 hours" : "7 days";
}
