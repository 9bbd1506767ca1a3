/**
 * The jobs that have not finished: pending, delayed and running, filtered
 * by state, queue and name, a page at a time; running ones with their progress.
 *
 * @internal
 * @module
 */
import type { JobState, ListedJob } from "../../admin/job_list.ts";
import type { PageContext } from "../context.ts";
import { firstLine, formatPercent, formatTime } from "../format.ts";
import { type Html, html, trusted } from "../html.ts";
import { layout, pager } from "../layout.ts";
import { type JobFilters, type Paging, readJobFilters, readPaging } from "../query.ts";

/** The jobs page's JSON. */
export interface JobsData {
  /** The filters applied; null for none. */
  readonly filters: {
    readonly state: JobState | null;
    readonly queue: string | null;
    readonly name: string | null;
  };
  /** The page shown, from 1. */
  readonly page: number;
  /** Jobs per page. */
  readonly limit: number;
  /** Jobs matching the filters, on every page. */
  readonly total: number;
  /** This page's jobs, in dispatch order. */
  readonly jobs: ListedJob[];
}

/** Reads the page of jobs the query asks for; a bad queue or name filter throws a `TypeError`. */
export async function loadJobs(ctx: PageContext): Promise<JobsData> {
  const filters: JobFilters = readJobFilters(ctx.url.searchParams);
  const paging: Paging = readPaging(ctx.url.searchParams);
  const list = await ctx.queue.jobs({
    ...(filters.state !== undefined && { state: filters.state }),
    ...(filters.queue !== undefined && { queue: filters.queue }),
    ...(filters.name !== undefined && { name: filters.name }),
    limit: paging.limit,
    offset: paging.offset,
  });
  return {
    filters: {
      state: filters.state ?? null,
      queue: filters.queue ?? null,
      name: filters.name ?? null,
    },
    page: paging.page,
    limit: paging.limit,
    total: list.total,
    jobs: list.jobs,
  };
}

const STATE_OPTIONS: readonly [string, string][] = [
  ["", "Every state"],
  ["pending", "Pending"],
  ["delayed", "Delayed"],
  ["running", "Running"],
];

/** The jobs page. */
export function renderJobs(ctx: PageContext, data: JobsData): Html {
  const { filters } = data;
  const options = STATE_OPTIONS.map(([value, label]) =>
    html`
      <option value="${value}" ${(filters.state ?? "") === value
        ? trusted(" selected")
        : ""}>${label}</option>
    `
  );
  const form = html`<form class="filters" method="get" action="${ctx.base}/jobs">
<label>State <select name="state">${options}</select></label>
<label>Queue <input name="queue" value="${
    filters.queue ?? ""
  }" maxlength="64" placeholder="any"></label>
<label>Job name <input name="name" value="${
    filters.name ?? ""
  }" maxlength="255" placeholder="any"></label>
<button type="submit">Filter</button></form>`;
  const shown = data.jobs.length;
  const hasMore = (data.page - 1) * data.limit + shown < data.total;
  const list = { page: data.page, limit: data.limit, shown, hasMore, total: data.total };
  return layout(ctx, {
    heading: "Jobs",
    section: "/jobs",
    api: `/api/jobs${ctx.url.search}`,
    body: html`${form}${jobsTable(ctx, data.jobs)}${
      pager(ctx, "/jobs", list, { one: "job", many: "jobs", none: "No jobs match." })
    }`,
  });
}

function jobsTable(ctx: PageContext, jobs: readonly ListedJob[]): Html | null {
  if (jobs.length === 0) return null;
  const rows = jobs.map((job, index) => {
    const progress = job.state === "running"
      ? html`<progress max="100" value="${
        job.progress ?? 0
      }" data-live="jobs/${index}/progress"></progress>
<span data-live="jobs/${index}/progress" data-format="percent">${
        formatPercent(job.progress)
      }</span>`
      : "";
    const batch = job.batchId === null
      ? ""
      : html`<a href="${ctx.base}/batches#batch-${job.batchId}">${job.batchId}</a>`;
    return html`
      <tr>
        <td class="num"><a href="${ctx.base}/jobs/${job.id}">${job.id}</a></td>
        <td>${job.queue}</td>
        <td>${job.name}</td>
        <td class="state-${job.state}">${job.state}</td>
        <td class="num">${job.attempts}</td>
        <td>${formatTime(job.availableAt)}</td>
        <td>${formatTime(job.createdAt)}</td>
        <td>${progress}</td>
        <td>${batch}</td>
        <td class="muted">${job.lastError === null ? "" : firstLine(job.lastError)}</td>
      </tr>
    `;
  });
  return html`
    <table data-live-ids="jobs" data-ids="${jobs.map((job) => job.id).join(",")}">
      <thead>
        <tr>
          <th class="num">ID</th>
          <th>Queue</th>
          <th>Name</th>
          <th>State</th>
          <th class="num">Attempts</th>
          <th>Due / lease ends (UTC)</th>
          <th>Dispatched (UTC)</th>
          <th>Progress</th>
          <th>Batch</th>
          <th>Last error</th>
        </tr>
      </thead>
      <tbody>${rows}</tbody>
    </table>
  `;
}
