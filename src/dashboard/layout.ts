/**
 * The frame of every page (head with the nonce'd stylesheet and live-refresh
 * script, navigation, notices) and the small pieces pages share: action
 * forms, pagination, and the notices an action redirects back with.
 *
 * @internal
 * @module
 */
import { LIVE_SCRIPT, STYLES } from "./assets.ts";
import type { PageContext } from "./context.ts";
import { CSRF_FIELD } from "./csrf.ts";
import { type Html, html, type HtmlValue, trusted } from "./html.ts";
import { readCount } from "./query.ts";

/** The pages, by their path under the dashboard. */
export const SECTIONS = [
  { path: "/", label: "Overview" },
  { path: "/jobs", label: "Jobs" },
  { path: "/completed", label: "Completed" },
  { path: "/failed", label: "Failed" },
  { path: "/batches", label: "Batches" },
  { path: "/flows", label: "Flows" },
  { path: "/schedules", label: "Schedules" },
  { path: "/job-types", label: "Job types" },
] as const;

/** A page's path. */
export type Section = (typeof SECTIONS)[number]["path"];

/** What an action redirects back with in `?notice=`, and how it is told. */
const NOTICES: Record<string, (count: number) => string> = {
  retried: (n) =>
    `Put ${n} failed ${n === 1 ? "job" : "jobs"} back on ${
      n === 1 ? "its queue" : "their queues"
    }.`,
  forgotten: (n) => `Deleted ${n} failed ${n === 1 ? "job" : "jobs"}.`,
  flushed: (n) => `Deleted every failed job: ${n}.`,
  gone: () => "Nothing changed: that job, batch or flow is no longer there, or has moved on.",
  cancelled: () => "Cancelled the batch: its jobs that had not started are skipped.",
  "flow-cancelled": () =>
    "Cancelled the flow: its waiting nodes never run, queued ones are cancelled, running ones asked to stop.",
  "batch-retried": (n) =>
    n === 0
      ? "Nothing changed: the batch has no failed job to put back."
      : `Put the batch's ${n} failed ${n === 1 ? "job" : "jobs"} back.`,
  "flush-unconfirmed": () => "Nothing deleted: tick the box to confirm the flush.",
  "schedule-paused": () => "Paused the schedule: no slot fires until it is resumed.",
  "schedule-resumed": () => "Resumed the schedule: the slots it missed fire by its missed policy.",
  "schedule-run": () => "Queued one job of the schedule.",
  "schedule-gone": () => "Nothing changed: no schedule of that name is stored.",
  "schedule-held": () => "Nothing queued: the schedule's job is unique and one is already queued.",
  "schedule-not-defined": () =>
    "Nothing queued: the dashboard's queue was not opened with a jobs module that defines that schedule, which only it can build.",
  "job-cancelled": () => "Cancelled the job: it had not started, and is kept as cancelled.",
  "job-cancelling": () =>
    "The job is running: its worker was asked to stop it, and does within about a second.",
  "job-finished": () =>
    "Nothing changed: the job has already ended (completed, failed or cancelled).",
  "batch-finished": () => "Nothing changed: the batch has already finished or was cancelled.",
  "flow-finished": () => "Nothing changed: the flow has already finished or was cancelled.",
  paused: () => "Paused the queue: no worker claims its jobs until it is resumed.",
  resumed: () => "Resumed the queue.",
  "queue-not-paused": () => "Nothing changed: that queue is not paused.",
  "group-resumed": () => "Resumed the group: workers claim its jobs again.",
  "group-gone": () => "Nothing changed: that group is not paused, or its hold has ended.",
};

/** A whole page. */
export interface PageSpec {
  /** The page's heading (escaped). */
  readonly heading: string;
  /** Which navigation entry it is under. */
  readonly section: Section;
  /** Its JSON's path under the dashboard, query included, for live refresh; null for none. */
  readonly api: string | null;
  /** The page's content. */
  readonly body: Html;
}

/** The page, framed: head, navigation, the notice an action left, then `spec.body`. */
export function layout(ctx: PageContext, spec: PageSpec): Html {
  const nav = SECTIONS.map(({ path, label }) =>
    html`
      <a href="${ctx.base}${path}" ${path === spec.section
        ? trusted(' aria-current="page"')
        : ""}>${label}</a>
    `
  );
  const api = spec.api === null ? "" : html`
    data-api="${ctx.base}${spec.api}"
  `;
  return html`
    <!doctype html>
    <html lang="en" ${api}>
      <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>${spec.heading} · ${ctx.title}</title>
        <link rel="icon" href="${ctx.base}/favicon.svg" type="image/svg+xml">
        <style nonce="${ctx.nonce}">${trusted(STYLES)}</style>
      </head>
      <body>
    <header><strong>${ctx.title}</strong><nav>${nav}</nav>
    <span class="muted">${ctx.canWrite
      ? ""
      : "read-only · "}<span id="live-at"></span></span></header>
    <main>
    <h1>${spec.heading}</h1>
    ${notice(ctx.url.searchParams)}
    <p id="live-changed" class="notice" hidden>This list has changed: <a href="${ctx
      .path}${ctx.url.search}">reload</a>.</p>
    ${spec.body}
    </main>
    ${spec.api === null ? "" : html`<script nonce="${ctx.nonce}">${trusted(LIVE_SCRIPT)}</script>`}
      </body>
    </html>
  `;
}

function notice(params: URLSearchParams): Html | null {
  const code = params.get("notice");
  const tell = code === null ? undefined : Object.hasOwn(NOTICES, code) ? NOTICES[code] : undefined;
  if (tell === undefined) return null;
  const bad = code === "gone" || code === "flush-unconfirmed" || code === "job-finished" ||
    code === "batch-finished" || code === "flow-finished" || code === "schedule-gone" ||
    code === "schedule-not-defined" ||
    code === "schedule-held" || code === "group-gone" ||
    code === "queue-not-paused";
  return html`<p class="notice${bad ? " bad" : ""}" role="status">${tell(readCount(params))}</p>`;
}

/**
 * A POST form with one button, carrying the CSRF token; nothing when the
 * request may not take actions. `fields` adds inputs before the button.
 */
export function actionForm(
  ctx: PageContext,
  path: string,
  label: string,
  options: { danger?: boolean; fields?: HtmlValue } = {},
): Html | null {
  if (!ctx.canWrite) return null;
  return html`<form class="inline" method="post" action="${ctx.base}${path}">
<input type="hidden" name="${CSRF_FIELD}" value="${ctx.csrfToken}">${options.fields ?? ""}
<button type="submit"${options.danger ? trusted(' class="danger"') : ""}>${label}</button></form>`;
}

/** One page of a listing, as its pager tells it. */
export interface ListPage {
  /** The page, from 1. */
  readonly page: number;
  /** Rows per page. */
  readonly limit: number;
  /** Rows on this page. */
  readonly shown: number;
  /** Whether there is a next page. */
  readonly hasMore: boolean;
  /** Rows on every page, or null when the listing does not count them. */
  readonly total: number | null;
}

/** What a listing's rows are called, and what it says when it has none. */
export interface ListWords {
  /** One row: `"failed job"`. */
  readonly one: string;
  /** Several: `"failed jobs"`. */
  readonly many: string;
  /** The summary of an empty listing: `"No failed jobs."`. */
  readonly none: string;
}

/**
 * The summary of a listing at `path` (rows shown, of how many), with links
 * to the previous and next pages that keep the other query parameters. A
 * page past the end says so and links to the last page (the first when the
 * listing does not count its rows).
 */
export function pager(ctx: PageContext, path: string, list: ListPage, words: ListWords): Html {
  const link = (to: number) => {
    const params = new URLSearchParams(ctx.url.searchParams);
    params.delete("notice");
    params.delete("count");
    params.set("page", String(to));
    return `${ctx.base}${path}?${params}`;
  };
  const { page, limit, shown, total } = list;
  const first = (page - 1) * limit;
  let back: Html | null = page > 1
    ? html`<a href="${link(page - 1)}" rel="prev">← Previous</a>`
    : null;
  let summary: string;
  if (shown > 0) {
    summary = `${first + 1}–${first + shown}${total === null ? "" : ` of ${total}`}`;
  } else if (page === 1) {
    summary = words.none;
  } else if (total === null) {
    summary = `Page ${page} is past the end of the list.`;
    back = html`<a href="${link(1)}">← First page</a>`;
  } else {
    const last = Math.max(1, Math.ceil(total / limit));
    summary = total === 0
      ? `Page ${page} is past the end: no ${words.many}.`
      : `Page ${page} is past the end: ${total} ${
        total === 1 ? words.one : words.many
      } in ${last} ${last === 1 ? "page" : "pages"}.`;
    back = html`<a href="${link(last)}">← ${last === 1 ? "First" : "Last"} page</a>`;
  }
  return html`<div class="pager">
${back ?? ""}
<span class="muted">${summary}</span>
${list.hasMore ? html`<a href="${link(page + 1)}" rel="next">Next →</a>` : ""}
</div>`;
}
