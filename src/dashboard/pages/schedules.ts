/**
 * Schedules: each with its rule, paused or active, its next fire times, its
 * last run, and pause, resume and run-now actions.
 *
 * @internal
 * @module
 */
import type { ScheduleInfo } from "../../schedules/views.ts";
import type { PageContext } from "../context.ts";
import { formatTime } from "../format.ts";
import { type Html, html } from "../html.ts";
import { actionForm, layout } from "../layout.ts";

/** A schedule's State, as drawn and as the live refresh writes it from its `paused` flag. */
const PAUSED = "paused";
const ACTIVE = "active";
const STATE_FLAG = html`data-format="flag" data-true="${PAUSED}" data-false="${ACTIVE}"`;

/** The schedules page's JSON. */
export interface SchedulesData {
  /** Every stored schedule, by name. */
  readonly schedules: ScheduleInfo[];
}

/** Reads every stored schedule. */
export async function loadSchedules(ctx: PageContext): Promise<SchedulesData> {
  return { schedules: await ctx.queue.schedules() };
}

/** The path of an action on the schedule `name` (names may hold any character). */
export function schedulePath(name: string, verb: string): string {
  return `/schedules/${encodeURIComponent(name)}/${verb}`;
}

/** The schedules page. */
export function renderSchedules(ctx: PageContext, data: SchedulesData): Html {
  return layout(ctx, {
    heading: "Schedules",
    section: "/schedules",
    api: "/api/schedules",
    body: data.schedules.length === 0
      ? html`<p class="muted">No schedules: define them with defineSchedule() in the jobs module.</p>`
      : schedulesTable(ctx, data.schedules),
  });
}

/** Instead of "Run now" for a schedule the jobs module of this process does not define. */
function notDefinedHere(ctx: PageContext): Html | null {
  if (!ctx.canWrite) return null;
  return html`
    <span class="muted"
      title="A schedule's job is built from its definition: open the dashboard's queue with the jobs module that defines it (the CLI: dashboard --jobs PATH)">run now: not defined here</span>
  `;
}

function schedulesTable(ctx: PageContext, schedules: readonly ScheduleInfo[]): Html {
  const rows = schedules.map((schedule, index) => {
    const rule = schedule.cron === null
      ? `every ${schedule.everyMs! / 1000} s`
      : `${schedule.cron} (${schedule.timezone})`;
    const next = schedule.nextRuns.map((date) => html`${formatTime(date)}<br>`);
    const actions = [
      schedule.paused
        ? actionForm(ctx, schedulePath(schedule.name, "resume"), "Resume")
        : actionForm(ctx, schedulePath(schedule.name, "pause"), "Pause", { danger: true }),
      ctx.queue.definesSchedule(schedule.name)
        ? actionForm(ctx, schedulePath(schedule.name, "run"), "Run now")
        : notDefinedHere(ctx),
    ];
    return html`
      <tr>
        <td>${schedule.name}</td>
        <td>${schedule.job}</td>
        <td><code>${rule}</code></td>
        <td data-live="schedules/${index}/paused" ${STATE_FLAG}>${schedule.paused
          ? PAUSED
          : ACTIVE}</td>
        <td>
          <ul class="plain">${next}</ul>
        </td>
        <td>${schedule.lastSlot === null ? "never" : formatTime(schedule.lastSlot)}</td>
        <td class="num">${schedule.lastJobId ?? ""}</td>
        <td>missed: ${schedule.missed}, overlap: ${schedule.overlap}</td>
        <td>${actions}</td>
      </tr>
    `;
  });
  return html`
    <table>
      <thead>
        <tr>
          <th>Name</th>
          <th>Job</th>
          <th>Rule</th>
          <th>State</th>
          <th>Next runs (UTC)</th>
          <th>Last slot (UTC)</th>
          <th class="num">Last job</th>
          <th>Policies</th>
          <th>${ctx.canWrite ? "Actions" : ""}</th>
        </tr>
      </thead>
      <tbody>${rows}</tbody>
    </table>
  `;
}
