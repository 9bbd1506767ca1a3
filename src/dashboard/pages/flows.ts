/**
 * Flows: a page of flows, newest first, with how far their nodes got and a
 * cancel while one runs; and a flow's page (`/flows/<id>`): each node with
 * its state, job (linked) and the nodes it waits for, as a list of edges.
 *
 * @internal
 * @module
 */
import type { FlowNodeState, FlowStatus } from "../../flow.ts";
import type { PageContext } from "../context.ts";
import { firstLine, formatTime } from "../format.ts";
import { type Html, html } from "../html.ts";
import { actionForm, layout, pager } from "../layout.ts";
import { readPaging } from "../query.ts";

/** The flows page's JSON. */
export interface FlowsData {
  /** The page shown, from 1. */
  readonly page: number;
  /** Flows per page. */
  readonly limit: number;
  /** Whether there is a next page. */
  readonly hasMore: boolean;
  /** This page's flows, newest first, each with every node. */
  readonly flows: FlowStatus[];
}

/** Reads the page of flows the query asks for. */
export async function loadFlows(ctx: PageContext): Promise<FlowsData> {
  const paging = readPaging(ctx.url.searchParams);
  const rows = await ctx.queue.flows({ limit: paging.limit + 1, offset: paging.offset });
  return {
    page: paging.page,
    limit: paging.limit,
    hasMore: rows.length > paging.limit,
    flows: rows.slice(0, paging.limit),
  };
}

/** Reads one flow; null (a 404) when there is none. */
export function loadFlow(ctx: PageContext, id: number): Promise<FlowStatus | null> {
  return ctx.queue.flowStatus(id);
}

/** How many of `flow`'s nodes are in one of `states`. */
function count(flow: FlowStatus, ...states: FlowNodeState[]): number {
  return flow.nodes.filter((node) => states.includes(node.state)).length;
}

/** The flows page. */
export function renderFlows(ctx: PageContext, data: FlowsData): Html {
  const list = {
    page: data.page,
    limit: data.limit,
    shown: data.flows.length,
    hasMore: data.hasMore,
    total: null,
  };
  const rows = data.flows.map((flow) =>
    html`
      <tr id="flow-${flow.id}">
        <td class="num"><a href="${ctx.base}/flows/${flow.id}">${flow.id}</a></td>
        <td>${firstLine(flow.name, 80)}</td>
        <td>${flow.state}</td>
        <td class="num">${count(flow, "succeeded")} / ${flow.nodes.length}</td>
        <td class="num">${count(flow, "failed")}</td>
        <td class="num">${count(flow, "skipped")}</td>
        <td class="num">${count(flow, "waiting", "pending", "running")}</td>
        <td>${formatTime(flow.createdAt)}</td>
        <td>${flow.finished
          ? null
          : actionForm(ctx, `/flows/${flow.id}/cancel`, "Cancel", { danger: true })}</td>
      </tr>
    `
  );
  const table = data.flows.length === 0 ? null : html`
    <table>
      <thead>
        <tr>
          <th class="num">ID</th>
          <th>Name</th>
          <th>State</th>
          <th class="num">Succeeded / nodes</th>
          <th class="num">Failed</th>
          <th class="num">Skipped</th>
          <th class="num">Left</th>
          <th>Dispatched (UTC)</th>
          <th>${ctx.canWrite ? "Actions" : ""}</th>
        </tr>
      </thead>
      <tbody>${rows}</tbody>
    </table>
  `;
  return layout(ctx, {
    heading: "Flows",
    section: "/flows",
    api: `/api/flows${ctx.url.search}`,
    body: html`${table}${
      pager(ctx, "/flows", list, { one: "flow", many: "flows", none: "No flows." })
    }`,
  });
}

/** A flow's page: its state, its nodes, and its edges as a list. */
export function renderFlow(ctx: PageContext, flow: FlowStatus): Html {
  const nodes = flow.nodes.map((node) =>
    html`
      <tr id="node-${node.key}" class="node-${node.state}">
        <td>${node.key}</td>
        <td>${node.name}</td>
        <td>${node.state}</td>
        <td class="num">${node.jobId === null
          ? "–"
          : html`<a href="${ctx.base}/${
            node.state === "failed" ? "failed" : "jobs"
          }/${node.jobId}">${node.jobId}</a>`}</td>
        <td>${node.parents.length === 0 ? "–" : node.parents.join(", ")}</td>
        <td>${node.error === null ? "" : firstLine(node.error, 200)}</td>
      </tr>
    `
  );
  const edges = flow.nodes.flatMap((node) =>
    node.parents.map((parent) => html`<li>${parent} → ${node.key}</li>`)
  );
  return layout(ctx, {
    heading: `Flow ${flow.id}: ${flow.name}`,
    section: "/flows",
    api: `/api/flows/${flow.id}`,
    body: html`
      <p>State: <strong>${flow.state}</strong>, dispatched ${formatTime(
        flow.createdAt,
      )} UTC. ${flow.finished ? null : actionForm(ctx, `/flows/${flow.id}/cancel`, "Cancel flow", {
        danger: true,
      })}</p>
      <table class="flow-nodes">
        <thead>
          <tr>
            <th>Key</th>
            <th>Job</th>
            <th>State</th>
            <th class="num">Job ID</th>
            <th>After</th>
            <th>Error</th>
          </tr>
        </thead>
        <tbody>${nodes}</tbody>
      </table>
      <h2>Edges</h2>
      ${edges.length === 0
        ? html`<p>No edges: every node runs at once.</p>`
        : html`<ul class="flow-edges">${edges}</ul>`}
    `,
  });
}
