/**
 * A Deno Deploy-style app: an `export default { fetch }` module served by
 * `deno serve`, with no Web Worker, no writable disk and no long-lived
 * worker process. Jobs live in PostgreSQL or Redis (`DATABASE_URL`); they
 * run in this isolate, right after the responses of the requests that
 * dispatched them (`queue.drainAfter()`), and at each minute's cron tick
 * (`queue.serverless()`) for whatever is left, e.g. retries after backoff.
 *
 * - `POST /orders` with `{"sku":"mug","quantity":2}` dispatches a
 *   `fulfil-order` job: 202 with the order's id, 400 when the body is not
 *   JSON, fails the job's schema or is over the payload cap (any other error
 *   is a 500).
 * - `GET /` shows the queue's counts.
 * - `/admin/queue` is the dashboard, behind HTTP Basic auth with the user
 *   `admin` and the password in `DASHBOARD_PASSWORD` (refused for everyone
 *   while it is unset).
 *
 * Settings from the environment: `DATABASE_URL` (required, `postgres://…`,
 * or `redis://…?prefix=app` for Redis: `--allow-net` reaches it too),
 * `DASHBOARD_PASSWORD`, and `DRAIN_AFTER_RESPONSE_MS` (how long to drain
 * after each response, default 5000; 0 leaves every job to the cron ticks).
 *
 * ```sh
 * DATABASE_URL=postgres://postgres@127.0.0.1:5432/app DASHBOARD_PASSWORD=secret \
 *   deno serve --unstable-cron --allow-net --allow-env examples/deploy/main.ts
 * curl -X POST localhost:8000/orders -d '{"sku":"mug","quantity":2}'
 * ```
 *
 * Ctrl-C or SIGTERM stops it at once: `deno serve` stops serving and the
 * app closes its queue (see below), so nothing keeps the process alive.
 *
 * On Deno Deploy, set `DATABASE_URL` and `DASHBOARD_PASSWORD` in the
 * project's environment variables, and `"unstable": ["cron"]` in its
 * deno.json if it runs elsewhere too; `--unstable-cron` is only for local runs.
 *
 * @module
 */
import { timingSafeEqual } from "node:crypto";
import { Queue, ValidationError } from "../../mod.ts";
import { dashboard } from "../../src/dashboard.ts";
// Imported here, so the queue loads it by URL without --allow-read (it is in the app's graph).
import { fulfilOrder } from "./jobs.ts";

const databaseUrl = Deno.env.get("DATABASE_URL");
if (databaseUrl === undefined || !/^(postgres(ql)?|rediss?):\/\//.test(databaseUrl)) {
  throw new TypeError(
    "DATABASE_URL must be set to a postgres:// or redis:// URL: this app has no disk",
  );
}
const drainAfterMs = Number(Deno.env.get("DRAIN_AFTER_RESPONSE_MS") ?? "5000");
if (!Number.isInteger(drainAfterMs) || drainAfterMs < 0) {
  throw new TypeError(
    `DRAIN_AFTER_RESPONSE_MS must be a whole number of ms: got "${
      Deno.env.get("DRAIN_AFTER_RESPONSE_MS")
    }"`,
  );
}
const password = Deno.env.get("DASHBOARD_PASSWORD") ?? "";

const queue = await Queue.open({ url: databaseUrl, jobs: import.meta.resolve("./jobs.ts") });
// At the top level, where Deno Deploy looks for cron jobs: each minute, drain for up to 50 s.
queue.serverless({ cron: "* * * * *", maxTimeMs: 50_000, concurrency: 4 });

// On SIGINT or SIGTERM `deno serve` stops its server, and the process ends once nothing else
// keeps it alive: the queue's database connections and its cron job (closing the queue
// unregisters it) would, so close the queue too. A host without signals (Deno Deploy ends the
// isolate itself) refuses the listener; the app needs none there.
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  try {
    Deno.addSignalListener(signal, () => void queue.close());
  } catch {
    // no signals on this host
  }
}

const admin = dashboard(queue, { basePath: "/admin/queue", gate: mayAdminister });

/** Whether the request carries `admin` and the dashboard password, compared in constant time. */
function mayAdminister(request: Request): boolean {
  if (password === "") return false;
  const header = request.headers.get("authorization") ?? "";
  const given = new TextEncoder().encode(header);
  const expected = new TextEncoder().encode(`Basic ${btoa(`admin:${password}`)}`);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

async function placeOrder(request: Request): Promise<Response> {
  let body: { sku?: unknown; quantity?: unknown };
  try {
    body = await request.json();
  } catch {
    return Response.json({ error: "The body must be JSON" }, { status: 400 });
  }
  const orderId = crypto.randomUUID();
  try {
    await queue.dispatch(fulfilOrder, {
      orderId,
      sku: body?.sku as string,
      quantity: body?.quantity as number,
      placedAt: Date.now(),
    });
  } catch (error) {
    // Only a ValidationError is the client's doing (a body that fails the schema or is over the
    // payload cap): 400. Anything else (a TypeError or RangeError is a bug of ours, a database
    // error the server's trouble) is rethrown, and deno serve answers 500 (docs/dispatching.md).
    if (!(error instanceof ValidationError)) throw error;
    return Response.json({ error: error.message }, { status: 400 });
  }
  return Response.json({ orderId }, { status: 202 });
}

async function route(request: Request, info: Deno.ServeHandlerInfo): Promise<Response> {
  const { pathname } = new URL(request.url);
  if (pathname === "/orders") {
    if (request.method !== "POST") return Response.json({ error: "Use POST" }, { status: 405 });
    return await placeOrder(request);
  }
  if (pathname === "/") return Response.json(await queue.counts());
  if (pathname === "/admin/queue" || pathname.startsWith("/admin/queue/")) {
    if (!mayAdminister(request)) {
      return new Response("The dashboard needs the admin password", {
        status: 401,
        headers: { "www-authenticate": 'Basic realm="queue dashboard", charset="UTF-8"' },
      });
    }
    return await admin(request, info);
  }
  return Response.json({ error: "Not found" }, { status: 404 });
}

export default {
  async fetch(request: Request, info: Deno.ServeHandlerInfo): Promise<Response> {
    const response = await route(request, info);
    if (drainAfterMs === 0) return response;
    // Once the response is sent, run what is due while the host keeps this isolate alive.
    return queue.drainAfter(response, {
      after: info.completed,
      maxTimeMs: drainAfterMs,
      concurrency: 4,
    });
  },
} satisfies Deno.ServeDefaultExport;
