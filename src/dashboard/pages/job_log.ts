/**
 * A job's log, as the job page (`/jobs/<id>`) and the failed job page show
 * it: each line with its attempt, time, level, text and fields, escaped.
 * Lines of encrypted jobs are never opened here: the dashboard never
 * decrypts.
 *
 * @internal
 * @module
 */
import type { JobLogLine } from "../../job_logs.ts";
import type { PageContext } from "../context.ts";
import { formatTime } from "../format.ts";
import { type Html, html } from "../html.ts";
import { layout } from "../layout.ts";

/** The job page's JSON. */
export interface JobLogData {
  /** The job's id. */
  readonly id: number;
  /** Whether it is in the failed jobs (its page then has more). */
  readonly failed: boolean;
  /** Its log, oldest line first; encrypted lines unopened. */
  readonly lines: JobLogLine[];
}

/** Reads job `id`'s log. */
export async function loadJobLog(ctx: PageContext, id: number): Promise<JobLogData> {
  const [lines, failed] = [
    await ctx.queue.logs(id, { open: false }),
    await ctx.queue.failedJob(id),
  ];
  return { id, failed: failed !== null, lines };
}

/** The job page: its log. */
export function renderJobLog(ctx: PageContext, data: JobLogData): Html {
  const failed = data.failed
    ? html`<p>This job failed for good: <a href="${ctx.base}/failed/${data.id}">see the failed job</a>.</p>`
    : null;
  return layout(ctx, {
    heading: `Job ${data.id}`,
    section: "/jobs",
    api: `/api/jobs/${data.id}`,
    body: html`${failed}<h2>Log</h2>${logSection(data.lines)}`,
  });
}

/** A job's log lines as a table, or a note that it has none. */
export function logSection(lines: readonly JobLogLine[]): Html {
  if (lines.length === 0) {
    return html`<p class="muted">No log lines (a job's log is kept until a day after it is gone).</p>`;
  }
  const rows = lines.map((line) =>
    html`
      <tr class="log-${line.level}">
        <td class="num">${line.attempt === 0 ? "" : line.attempt}</td>
        <td>${formatTime(line.at)}</td>
        <td>${line.level}</td>
        <td>${line.sealed
          ? html`<span class="muted">encrypted — the dashboard never decrypts</span>`
          : html`<pre>${line.message}</pre>`}</td>
        <td>${line.fields === null ? "" : html`<pre>${JSON.stringify(line.fields)}</pre>`}</td>
      </tr>
    `
  );
  return html`
    <table class="log">
      <thead>
        <tr>
          <th class="num">Attempt</th>
          <th>At (UTC)</th>
          <th>Level</th>
          <th>Message</th>
          <th>Fields</th>
        </tr>
      </thead>
      <tbody>${rows}</tbody>
    </table>
  `;
}
