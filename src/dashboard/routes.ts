/**
 * The dashboard's router: the gate first, on every request; then pages and
 * their JSON for GET (and HEAD), actions for POST, after the checks that
 * keep other sites from acting through a browser.
 *
 * @internal
 * @module
 */
import type { Queue } from "../queue.ts";
import { type Action, answerStatus, findAction, type FormField } from "./actions.ts";
import { FAVICON_SVG } from "./assets.ts";
import type { PageContext } from "./context.ts";
import { CSRF_FIELD, CSRF_HEADER, CsrfTokens } from "./csrf.ts";
import { failureAnswer, type RequestInput } from "./failures.ts";
import { askGate, type DashboardGate } from "./gate.ts";
import { newNonce } from "./headers.ts";
import { type Html, html } from "./html.ts";
import { layout } from "./layout.ts";
import { loadBatches, renderBatches } from "./pages/batches.ts";
import { loadFlow, loadFlows, renderFlow, renderFlows } from "./pages/flows.ts";
import {
  loadCompleted,
  loadJobDetail,
  renderCompleted,
  renderJobDetail,
} from "./pages/completed.ts";
import { loadFailed, loadFailedDetail, renderFailed, renderFailedDetail } from "./pages/failed.ts";
import { loadJobTypes, renderJobTypes } from "./pages/job_types.ts";
import { loadJobs, renderJobs } from "./pages/jobs.ts";
import { serveMetrics } from "./metrics_route.ts";
import { loadOverview, renderOverview } from "./pages/overview.ts";
import { loadSchedules, renderSchedules } from "./pages/schedules.ts";
import { readId } from "./query.ts";
import { acceptedBody, crossOriginReason } from "./request_checks.ts";
import { assetResponse, jsonResponse, pageResponse, seeOther, textResponse } from "./responses.ts";

/** Everything a dashboard keeps between requests. */
export interface DashboardSetup {
  /** The queue shown. */
  readonly queue: Queue;
  /** The path it is mounted under, `""` at the root. */
  readonly base: string;
  /** Its title. */
  readonly title: string;
  /** Who may see it. */
  readonly gate: DashboardGate;
  /** Whether every action is refused. */
  readonly readOnly: boolean;
  /** Its CSRF tokens (its secret). */
  readonly csrf: CsrfTokens;
  /** The gate of `GET /metrics`, or null when metrics are not served. */
  readonly metricsGate: DashboardGate | null;
}

/** A page: what it reads (also its JSON) and how it is drawn; null data is a 404. */
interface PageRoute {
  readonly load: (ctx: PageContext) => Promise<unknown>;
  readonly render: (ctx: PageContext, data: never) => Html;
  /** What a 404 says of it (null data): what is not there, and why it may be gone. */
  readonly missing?: string;
}

/** The largest action body read. */
const MAX_BODY_BYTES = 64 * 1024;

/** The page at `segments` (the path under the dashboard, split), or null. */
function findPage(segments: readonly string[]): PageRoute | null {
  const [section, second, ...rest] = segments;
  if (rest.length > 0) return null;
  if (section === undefined) return { load: loadOverview, render: renderOverview };
  if (section === "jobs" && second !== undefined) {
    const id = readId(second);
    return id === null ? null : {
      load: (ctx) => loadJobDetail(ctx, id),
      render: renderJobDetail,
      missing: `no job ${id} (none had that id, or its kept history was pruned)`,
    };
  }
  if (section === "failed" && second !== undefined) {
    const id = readId(second);
    return id === null ? null : {
      load: (ctx) => loadFailedDetail(ctx, id),
      render: renderFailedDetail,
      missing: `no failed job ${id} (a failed job that was retried or forgotten is gone)`,
    };
  }
  if (section === "flows" && second !== undefined) {
    const id = readId(second);
    return id === null ? null : {
      load: (ctx) => loadFlow(ctx, id),
      render: renderFlow,
      missing: `no flow ${id} (none had that id, or it ended and was pruned)`,
    };
  }
  if (second !== undefined) return null;
  switch (section) {
    case "jobs":
      return { load: loadJobs, render: renderJobs };
    case "failed":
      return { load: loadFailed, render: renderFailed };
    case "batches":
      return { load: loadBatches, render: renderBatches };
    case "flows":
      return { load: loadFlows, render: renderFlows };
    case "completed":
      return { load: loadCompleted, render: renderCompleted };
    case "job-types":
      return { load: loadJobTypes, render: renderJobTypes };
    case "schedules":
      return { load: loadSchedules, render: renderSchedules };
    default:
      return null;
  }
}

/** The JSON of the page at `segments` (the path under `/api/`, split): `/api/overview` is the overview's. */
function findApi(segments: readonly string[]): PageRoute | null {
  const [first, ...rest] = segments;
  if (first === undefined) return null;
  if (first === "overview") return rest.length === 0 ? findPage([]) : null;
  return findPage(segments);
}

/** Answers one request. */
export async function route(
  setup: DashboardSetup,
  request: Request,
  info: Deno.ServeHandlerInfo | undefined,
): Promise<Response> {
  const metrics = await serveMetrics(setup, request, info);
  if (metrics !== null) return metrics;
  const access = await askGate(setup.gate, setup.readOnly, request, info);
  if (access === null) {
    return textResponse("403 Forbidden: this dashboard's gate refused the request", 403);
  }
  const url = new URL(request.url);
  const { base } = setup;
  if (url.pathname !== base && !url.pathname.startsWith(`${base}/`)) {
    return textResponse(`404 Not Found: the dashboard is under ${base || "/"}`, 404);
  }
  const segments = url.pathname.slice(base.length).split("/").filter((part) => part !== "");
  const path = `${base}/${segments.join("/")}`;
  const read = request.method === "GET" || request.method === "HEAD";
  const isApi = segments[0] === "api";
  const page = isApi ? findApi(segments.slice(1)) : findPage(segments);
  const isAsset = segments.length === 1 && segments[0] === "favicon.svg";
  const action = isApi ? null : findAction(segments);
  if (page === null && action === null && !isAsset) {
    return isApi
      ? jsonResponse({ error: `No such JSON endpoint: ${url.pathname}` }, 404)
      : textResponse(`404 Not Found: no dashboard page at ${url.pathname}`, 404);
  }
  if (action !== null) {
    if (request.method !== "POST") {
      return textResponse("405 Method Not Allowed: actions are POST requests", 405, {
        allow: "POST",
      });
    }
    if (access !== "write") {
      return textResponse("403 Forbidden: this dashboard is read-only for this request", 403);
    }
    return await runAction(setup, request, url, path, action);
  }
  if (!read) {
    return textResponse("405 Method Not Allowed: use GET", 405, { allow: "GET, HEAD" });
  }
  if (isAsset) return assetResponse(FAVICON_SVG, "image/svg+xml");
  return await showPage(setup, request, url, path, access === "write", page!, isApi);
}

/** A page, or its JSON under /api/. */
async function showPage(
  setup: DashboardSetup,
  request: Request,
  url: URL,
  path: string,
  canWrite: boolean,
  page: PageRoute,
  isApi: boolean,
): Promise<Response> {
  const nonce = newNonce();
  let cookie: string | null = null;
  let csrfToken = "";
  if (!isApi && canWrite) {
    let csrfNonce = CsrfTokens.nonceOf(request);
    if (csrfNonce === null) {
      csrfNonce = CsrfTokens.newNonce();
      cookie = CsrfTokens.cookie(csrfNonce, setup.base || "/", url.protocol === "https:");
    }
    csrfToken = await setup.csrf.token(csrfNonce);
  }
  const ctx: PageContext = { ...setup, canWrite, csrfToken, nonce, url, path };
  let data: unknown;
  try {
    data = await page.load(ctx);
  } catch (error) {
    return failure(setup.queue, ctx, error, isApi, `GET ${url.pathname}`);
  }
  if (data === null) {
    const what = `Not found: ${page.missing ?? `nothing at ${url.pathname}`}`;
    if (isApi) return jsonResponse({ error: what }, 404);
    return pageResponse(message(ctx, "Not found", what), nonce, 404, cookie);
  }
  try {
    if (isApi) return jsonResponse(data);
    return pageResponse(page.render(ctx, data as never), nonce, 200, cookie);
  } catch (error) {
    // What the page shows cannot be written (a stored value nested too deep for the call stack):
    // never the request's fault, whatever the error's class.
    return failure(setup.queue, ctx, error, isApi, `GET ${url.pathname}`, "no input");
  }
}

/** Runs an action after the body, origin and CSRF checks; a redirect back, or JSON when asked. */
async function runAction(
  setup: DashboardSetup,
  request: Request,
  url: URL,
  path: string,
  action: Action,
): Promise<Response> {
  if (!acceptedBody(request)) {
    return textResponse(
      "415 Unsupported Media Type: send the action as a form (application/x-www-form-urlencoded or multipart/form-data) or as JSON",
      415,
    );
  }
  const crossOrigin = crossOriginReason(request);
  if (crossOrigin !== null) {
    return textResponse(`403 Forbidden: the request comes from another site: ${crossOrigin}`, 403);
  }
  const tooLarge = () =>
    textResponse(`413 Content Too Large: an action's body is at most ${MAX_BODY_BYTES} bytes`, 413);
  if (Number(request.headers.get("content-length") ?? "0") > MAX_BODY_BYTES) return tooLarge();
  // The header may be missing or wrong: count what actually arrives, and stop at the cap.
  const body = await readCapped(request, MAX_BODY_BYTES);
  if (body === null) return tooLarge();
  let field: FormField;
  try {
    field = await readForm(request, body);
  } catch {
    return textResponse("400 Bad Request: the body is not a readable form or JSON object", 400);
  }
  const token = field(CSRF_FIELD) ?? request.headers.get(CSRF_HEADER);
  if (!await setup.csrf.verify(CsrfTokens.nonceOf(request), token)) {
    return textResponse(
      "403 Forbidden: missing or wrong CSRF token: reload the dashboard's page and try again",
      403,
    );
  }
  const ctx: PageContext = {
    ...setup,
    canWrite: true,
    csrfToken: "",
    nonce: newNonce(),
    url,
    path,
  };
  const wantsJson = (request.headers.get("accept") ?? "").includes("application/json");
  let result;
  try {
    result = await action(ctx, field);
  } catch (error) {
    return failure(setup.queue, ctx, error, wantsJson, `POST ${url.pathname}`);
  }
  if (wantsJson) return jsonResponse(result, answerStatus(result));
  const params = new URLSearchParams({ notice: result.notice, count: String(result.count) });
  return seeOther(`${setup.base}${result.back}?${params}`);
}

/** The request's body, or null as soon as it passes `maxBytes`. */
async function readCapped(
  request: Request,
  maxBytes: number,
): Promise<Uint8Array<ArrayBuffer> | null> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  if (request.body !== null) {
    for await (const chunk of request.body) {
      size += chunk.length;
      if (size > maxBytes) {
        await request.body.cancel().catch(() => {});
        return null;
      }
      chunks.push(chunk);
    }
  }
  const bytes = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.length;
  }
  return bytes;
}

/** The fields of a form or a JSON object, from the request's already-read `bytes`. */
async function readForm(request: Request, bytes: Uint8Array<ArrayBuffer>): Promise<FormField> {
  const type = (request.headers.get("content-type") ?? "").toLowerCase();
  if (type.startsWith("application/json")) {
    const body: unknown = JSON.parse(new TextDecoder().decode(bytes));
    if (typeof body !== "object" || body === null || Array.isArray(body)) {
      throw new TypeError("not a JSON object");
    }
    return (name) => {
      const value = Object.hasOwn(body, name) ? (body as Record<string, unknown>)[name] : null;
      return typeof value === "string" ? value : null;
    };
  }
  const form = await new Response(bytes, { headers: { "content-type": type } }).formData();
  return (name) => {
    const value = form.get(name);
    return typeof value === "string" ? value : null;
  };
}

/** The answer to a request the queue failed ({@linkcode failureAnswer}), as a page or JSON. */
function failure(
  queue: Queue,
  ctx: PageContext,
  error: unknown,
  json: boolean,
  during: string,
  input: RequestInput = "input",
): Response {
  const { status, text } = failureAnswer(queue, error, during, input);
  if (json) return jsonResponse({ error: text }, status);
  return pageResponse(message(ctx, `Error ${status}`, text), ctx.nonce, status);
}

function message(ctx: PageContext, heading: string, text: string): Html {
  return layout(ctx, {
    heading,
    section: "/",
    api: null,
    body: html`<p class="error">${text}</p>`,
  });
}
