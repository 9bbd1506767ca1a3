/**
 * Batches: each with its progress bar and status, cancel while it runs,
 * and retry of its failed jobs.
 *
 * @internal
 * @module
 */
import { type BatchStatus, ranShare } from "../../batch.ts";
import type { PageContext } from "../context.ts";
import { formatTime } from "../format.ts";
import { type Html, html } from "../html.ts";
import { actionForm, layout, pager } from "../layout.ts";
import { readPaging } from "../query.ts";

/** A batch as the page and its JSON show it. */
export type BatchSummary = Omit<BatchStatus, "progress"> & {
  /**
   * The share of jobs that ran to an end (succeeded or failed), 0 to 100,
   * rounded down; skipped jobs do not fill the bar.
   */
  readonly progress: number;
  /** `"cancelled"`, `"finished"`, or `"running"`. */
  readonly status: "cancelled" | "finished" | "running";
};

/** The batches page's JSON. */
export interface BatchesData {
  /** The page shown, from 1. */
  readonly page: number;
  /** Batches per page. */
  readonly limit: number;
  /** Whether there is a next page. */
  readonly hasMore: boolean;
  /** This page's batches, newest first. */
  readonly batches: BatchSummary[];
}

/** Reads the page of batches the query asks for. */
export async function loadBatches(ctx: PageContext): Promise<BatchesData> {
  const paging = readPaging(ctx.url.searchParams);
  const rows = await ctx.queue.batches({ limit: paging.limit + 1, offset: paging.offset });
  return {
    page: paging.page,
    limit: paging.limit,
    hasMore: rows.length > paging.limit,
    batches: rows.slice(0, paging.limit).map((batch) => {
      const { progress: _progress, ...fields } = batch;
      const status = batch.cancelled ? "cancelled" : batch.finished ? "finished" : "running";
      return { ...fields, progress: ranShare(batch), status };
    }),
  };
}

/** The batches page. */
export function renderBatches(ctx: PageContext, data: BatchesData): Html {
  const list = {
    page: data.page,
    limit: data.limit,
    shown: data.batches.length,
    hasMore: data.hasMore,
    total: null,
  };
  return layout(ctx, {
    heading: "Batches",
    section: "/batches",
    api: `/api/batches${ctx.url.search}`,
    body: html`${batchesTable(ctx, data.batches)}${
      pager(ctx, "/batches", list, { one: "batch", many: "batches", none: "No batches." })
    }`,
  });
}

function batchesTable(ctx: PageContext, batches: readonly BatchSummary[]): Html | null {
  if (batches.length === 0) return null;
  const rows = batches.map((batch, index) => {
    const live = (field: string, value: number | string) =>
      html`<span data-live="batches/${index}/${field}">${value}</span>`;
    const actions = [
      batch.status === "running"
        ? actionForm(ctx, `/batches/${batch.id}/cancel`, "Cancel", { danger: true })
        : null,
      batch.failed > 0 ? actionForm(ctx, `/batches/${batch.id}/retry`, "Retry failed") : null,
    ];
    return html`
      <tr id="batch-${batch.id}">
        <td class="num">${batch.id}</td>
        <td>${batch.name}</td>
        <td><progress max="100" value="${batch
          .progress}" data-live="batches/${index}/progress"></progress>
      ${live("progress", batch.progress)}%</td>
        <td class="num">${live("succeeded", batch.succeeded)} / ${live("total", batch.total)}</td>
        <td class="num">${live("pending", batch.pending)}</td>
        <td class="num">${live("failed", batch.failed)}</td>
        <td class="num">${live("skipped", batch.skipped)}</td>
        <td>${live("status", batch.status)}</td>
        <td>${formatTime(batch.createdAt)}</td>
        <td>${actions}</td>
      </tr>
    `;
  });
  return html`
    <table data-live-ids="batches" data-ids="${batches.map((b) => b.id).join(",")}">
      <thead>
        <tr>
          <th class="num">ID</th>
          <th>Name</th>
          <th>Progress</th>
          <th class="num">Succeeded / total</th>
          <th class="num">Pending</th>
          <th class="num">Failed</th>
          <th class="num">Skipped</th>
          <th>Status</th>
          <th>Dispatched (UTC)</th>
          <th>${ctx.canWrite ? "Actions" : ""}</th>
        </tr>
      </thead>
      <tbody>${rows}</tbody>
    </table>
  `;
}
