/**
 * The overview: per queue the jobs pending, delayed, running and failed,
 * what settled in the last hour (as charts, and per queue with the average
 * wait), the workers seen, and the due jobs none of them knows; a banner
 * names the paused queues, and each queue has its pause or resume button;
 * another names the paused and held groups of jobs, with their ends and a
 * resume button each.
 *
 * @internal
 * @module
 */
import type { QueueMetrics } from "../../admin/metrics.ts";
import type { QueueCounts } from "../../admin/listing.ts";
import type { PausedGroup, PausedQueue } from "../../admin/job_control.ts";
import type { UnclaimedJobs, WorkerInfo } from "../../admin/workers.ts";
import { barChart } from "../charts.ts";
import type { PageContext } from "../context.ts";
import { formatDuration, formatTime } from "../format.ts";
import { type Html, html } from "../html.ts";
import { formEncoded } from "../actions.ts";
import { actionForm, layout } from "../layout.ts";

/** The overview's JSON. */
export interface OverviewData {
  /** Jobs per queue by state, with the running ones. */
  readonly counts: Record<string, QueueCounts>;
  /** The last hour's metrics. */
  readonly metrics: QueueMetrics;
  /** Workers seen in the last 30 s. */
  readonly workers: WorkerInfo[];
  /** Due jobs none of those workers can claim (none knows their name on their queue); empty without workers. */
  readonly unclaimed: UnclaimedJobs[];
  /** The queues paused now. */
  readonly paused: PausedQueue[];
  /** The first groups paused or held now, by job name then key (one more than the banner names). */
  readonly pausedGroups: PausedGroup[];
}

/** Most paused groups the overview's banner names; the `paused-groups` command lists more. */
const GROUPS_SHOWN = 20;

/** Reads what the overview shows. */
export async function loadOverview(ctx: PageContext): Promise<OverviewData> {
  const { queue } = ctx;
  return {
    counts: await queue.counts(),
    metrics: await queue.metrics({ windowMs: 3_600_000 }),
    workers: await queue.workers(),
    unclaimed: await queue.unclaimed(),
    paused: await queue.paused(),
    pausedGroups: await queue.pausedGroups({ limit: GROUPS_SHOWN + 1 }),
  };
}

/** The overview page. */
export function renderOverview(ctx: PageContext, data: OverviewData): Html {
  return layout(ctx, {
    heading: "Overview",
    section: "/",
    api: "/api/overview",
    body: html`${pausedBanner(data.paused)}${pausedGroupsBanner(ctx, data.pausedGroups)}${
      queuesTable(ctx, data)
    }
<h2>Last hour</h2>
${charts(data.metrics)}
<h2>Workers seen <span class="muted">(<span data-live="workers/length" data-empty="0">${data.workers.length}</span> in the last 30 s)</span></h2>
${workersTable(data.workers)}${unclaimedTable(data.unclaimed)}`,
  });
}

function pausedBanner(paused: readonly PausedQueue[]): Html | null {
  if (paused.length === 0) return null;
  const items = paused.map((pause) =>
    html`<li><strong>${pause.queue}</strong>${
      pause.until === null ? " until resumed" : ` until ${formatTime(pause.until)} UTC`
    }${
      pause.reason === null ? "" : html`
        — ${pause.reason}
      `
    }</li>`
  );
  return html`<div class="notice bad" role="status">Paused: no worker claims the jobs of
<ul>${items}</ul></div>`;
}

function pausedGroupsBanner(ctx: PageContext, groups: readonly PausedGroup[]): Html | null {
  if (groups.length === 0) return null;
  const resume = (group: PausedGroup) =>
    actionForm(ctx, "/groups/resume", "Resume", {
      fields: html`<input type="hidden" name="name_b64" value="${formEncoded(group.name)}">
<input type="hidden" name="key_b64" value="${formEncoded(group.key)}">`,
    });
  const items = groups.slice(0, GROUPS_SHOWN).map((group) =>
    html`<li><strong>${group.name}</strong> ${group.key}${
      group.until === null ? " until resumed" : ` until ${formatTime(group.until)} UTC`
    } ${resume(group)}</li>`
  );
  return html`<div class="notice" role="status">Paused groups: no worker claims the jobs of
<ul>${items}</ul>${
    groups.length > GROUPS_SHOWN
      ? html`<p class="muted">and more (the <code>paused-groups</code> command lists them)</p>`
      : ""
  }</div>`;
}

function queuesTable(ctx: PageContext, { counts, metrics, paused }: OverviewData): Html {
  const base = ctx.base;
  const queues = [
    ...new Set([
      ...Object.keys(counts),
      ...Object.keys(metrics.byQueue),
      ...paused.map((pause) => pause.queue),
    ]),
  ].sort();
  const isPaused = (queue: string) => paused.some((pause) => pause.queue === queue);
  const toggle = (queue: string) =>
    isPaused(queue)
      ? actionForm(ctx, `/queues/${encodeURIComponent(queue)}/resume`, "Resume")
      : actionForm(ctx, `/queues/${encodeURIComponent(queue)}/pause`, "Pause");
  if (queues.length === 0) return html`<p class="muted">No jobs yet.</p>`;
  const live = (queue: string, field: string, value: number) =>
    html`<td class="num" data-live="counts/${queue}/${field}" data-empty="0">${value}</td>`;
  const rows = queues.map((queue) => {
    const count = counts[queue];
    const hour = metrics.byQueue[queue];
    return html`<tr><th scope="row"><a href="${base}/jobs?queue=${
      encodeURIComponent(queue)
    }">${queue}</a></th>
${live(queue, "pending", count?.pending ?? 0)}${live(queue, "delayed", count?.delayed ?? 0)}
${live(queue, "reserved", count?.reserved ?? 0)}${live(queue, "failed", count?.failed ?? 0)}
<td class="num">${hour?.completed ?? 0}</td><td class="num">${hour?.failed ?? 0}</td>
<td class="num">${hour?.retried ?? 0}</td><td class="num">${
      hour?.expired ?? 0
    }</td><td class="num">${formatDuration(hour?.averageWaitMs ?? null)}</td><td>${
      isPaused(queue)
        ? html`
          <strong>paused</strong>
        `
        : ""
    }${toggle(queue)}</td></tr>`;
  });
  return html`
    <table>
      <thead>
        <tr>
          <th>Queue</th>
          <th class="num">Pending</th>
          <th class="num">Delayed</th>
          <th class="num">Running</th>
          <th class="num">Failed</th>
          <th class="num">Completed (1 h)</th>
          <th class="num">Failed (1 h)</th>
          <th class="num">Retried (1 h)</th>
          <th class="num">Expired (1 h)</th>
          <th class="num">Average wait (1 h)</th>
          <th>${ctx.canWrite ? "Pause" : ""}</th>
        </tr>
      </thead>
      <tbody>${rows}</tbody>
    </table>
  `;
}

function charts(metrics: QueueMetrics): Html {
  const minutes = metrics.perMinute;
  const label = (date: Date) => `${date.toISOString().slice(11, 16)} UTC`;
  const total = (field: "completed" | "failed" | "retried" | "expired") =>
    minutes.reduce((sum, minute) => sum + minute[field], 0);
  const chart = (field: "completed" | "failed", tone: "ok" | "bad", caption: string) =>
    html`<figure><figcaption>${caption}: ${total(field)}</figcaption>${
      barChart({
        title: `${caption} per minute over the last hour: ${total(field)} in all`,
        tone,
        startLabel: `${minutes.length} min ago`,
        endLabel: "now",
        bars: minutes.map((minute) => ({
          value: minute[field],
          label: `${label(minute.minute)}: ${minute[field]}`,
        })),
      })
    }</figure>`;
  return html`
    <div class="charts">
    ${chart("completed", "ok", "Jobs completed")}
    ${chart("failed", "bad", "Jobs failed for good")}
    </div>
    <p
      class="muted">Attempts retried after an error: ${total(
        "retried",
      )}. Jobs expired before they started: ${total("expired")}.</p>
  `;
}

function unclaimedTable(unclaimed: readonly UnclaimedJobs[]): Html {
  if (unclaimed.length === 0) return html``;
  const rows = unclaimed.map(({ queue, name, pending }) =>
    html`
      <tr>
        <td>${queue}</td>
        <td>${name}</td>
        <td class="num">${pending}</td>
      </tr>
    `
  );
  return html`
    <h2>Due jobs no running worker knows</h2>
    <p
      class="muted">Due jobs that no worker seen in the last 30 s can claim: none works their queue with a
    definition of their name (no worker runs, or the jobs module that defines them is not deployed yet).</p>
    <table>
      <thead>
        <tr>
          <th>Queue</th>
          <th>Job</th>
          <th class="num">Due</th>
        </tr>
      </thead>
      <tbody>${rows}</tbody>
    </table>
  `;
}

function workersTable(workers: readonly WorkerInfo[]): Html {
  if (workers.length === 0) {
    return html`<p class="muted">No worker has written a heartbeat in the last 30 s.</p>`;
  }
  const rows = workers.map((worker, index) =>
    html`
      <tr>
        <td><code title="${worker.id}">${worker.id.slice(0, 8)}</code></td>
        <td>${worker.host}</td>
        <td class="num">${worker.pid}</td>
        <td>${worker.queues.join(", ")}</td>
        <td
          class="num"><span data-live="workers/${index}/running">${worker.running}</span> / ${worker
            .concurrency}</td>
        <td>${formatTime(worker.startedAt)}</td>
        <td data-live="workers/${index}/lastSeenAt">${worker.lastSeenAt.toISOString()}</td>
      </tr>
    `
  );
  return html`
    <table>
      <thead>
        <tr>
          <th>Worker</th>
          <th>Host</th>
          <th class="num">PID</th>
          <th>Queues</th>
          <th class="num">Running / concurrency</th>
          <th>Started (UTC)</th>
          <th>Last seen</th>
        </tr>
      </thead>
      <tbody>${rows}</tbody>
    </table>
  `;
}
