/**
 * A dashboard for a queue, as a `Deno.serve` handler: the jobs pending,
 * delayed and running per queue, throughput and failures over the last hour,
 * the workers seen, the failed jobs with retry and forget, batches with
 * cancel and retry, and runtimes per job type. Server-rendered HTML that
 * works without JavaScript, with a JSON API under `/api/` for scripts and
 * live refresh. Nothing is loaded from elsewhere.
 *
 * Security: by default only requests from a loopback address get in (pass a
 * `gate` to decide otherwise); every action is a POST with a CSRF token and
 * a same-origin check; pages carry a nonce-based Content Security Policy
 * without `'unsafe-inline'`, `nosniff` and `frame-ancestors 'none'`; every
 * name, error and payload shown is escaped.
 *
 * @example Serve a dashboard on its own
 * ```ts ignore
 * import { Queue } from "@renox/queue";
 * import { dashboard } from "@renox/queue/dashboard";
 *
 * const queue = await Queue.open({ path: "jobs.db", jobs: [] });
 * Deno.serve({ hostname: "127.0.0.1", port: 8080 }, dashboard(queue));
 * ```
 *
 * @module
 */
import type { Queue } from "./queue.ts";
import { CsrfTokens } from "./dashboard/csrf.ts";
import {
  type DashboardAccess,
  type DashboardGate,
  isLoopbackAddress,
  loopbackOnly,
} from "./dashboard/gate.ts";
import { bearerToken } from "./dashboard/metrics_route.ts";
import { route } from "./dashboard/routes.ts";
import { optionBag, optionNames } from "./option_bags.ts";
import { shown } from "./shown.ts";

export { bearerToken, type DashboardAccess, type DashboardGate, isLoopbackAddress, loopbackOnly };

/** Options for {@linkcode dashboard}. */
export interface DashboardOptions {
  /**
   * The path the dashboard is mounted under inside an app, e.g. `"/admin/queue"`:
   * its links and cookie use it, and requests outside it get a 404. Letters,
   * digits and `-._~` in `/`-separated segments; a trailing `/` is dropped.
   * @default {"" (the root)}
   */
  basePath?: string;
  /**
   * Decides who may see the dashboard: `true` or `"write"` for everything,
   * `"read"` to look without acting, `false` to refuse with a 403 on every
   * route (pages, JSON, assets). A gate that throws refuses. It gets the
   * request and the connection's info: mount the handler as
   * `(req, info) => handler(req, info)` so that it has it.
   * @default {loopbackOnly: requests from 127.0.0.0/8 or ::1 only}
   */
  gate?: DashboardGate;
  /**
   * Refuse every action (retry, forget, flush, cancel) with a 403, whatever the gate says.
   * @default {false}
   */
  readOnly?: boolean;
  /**
   * The name in the pages' header and title, 1 to 100 characters.
   * @default {"@renox/queue"}
   */
  title?: string;
  /**
   * Also serve `GET /metrics` (under `basePath`): the queue's counters and
   * gauges from the store, per queue and job name, in the Prometheus text
   * format (OpenMetrics when the scraper's `Accept` asks for it).
   * @default {false}
   */
  metrics?: boolean;
  /**
   * Who may read `/metrics`, e.g. {@linkcode bearerToken} for a scraper's
   * token. Any access it grants means read.
   * @default {the dashboard's gate}
   */
  metricsGate?: DashboardGate;
}

const DASHBOARD_OPTIONS = optionNames<DashboardOptions>()([
  "basePath",
  "gate",
  "readOnly",
  "title",
  "metrics",
  "metricsGate",
]);

/** The handler {@linkcode dashboard} returns: a `Deno.serve` handler, or part of an app's. */
export type DashboardHandler = (
  request: Request,
  info?: Deno.ServeHandlerInfo,
) => Promise<Response>;

const BASE_PATH = /^(\/[A-Za-z0-9._~-]+)*$/;

/**
 * A request handler showing `queue`. Each call makes a new CSRF secret, so
 * forms of an earlier handler (or process) are refused: reload the page.
 *
 * @example Mount it under a prefix inside an app
 * ```ts
 * import { Queue } from "@renox/queue";
 * import { dashboard } from "@renox/queue/dashboard";
 *
 * await using queue = await Queue.open({ path: ":memory:", jobs: [] });
 * const admin = dashboard(queue, { basePath: "/admin/queue", readOnly: true });
 * const app = (req: Request, info?: Deno.ServeHandlerInfo) =>
 *   new URL(req.url).pathname.startsWith("/admin/queue")
 *     ? admin(req, info)
 *     : new Response("the app");
 *
 * // What Deno.serve(app) would hand it for a browser on this machine:
 * const info = {
 *   remoteAddr: { transport: "tcp" as const, hostname: "127.0.0.1", port: 50_000 },
 *   completed: Promise.resolve(),
 * };
 * const response = await app(new Request("http://127.0.0.1:8000/admin/queue/failed"), info);
 * console.log(response.status); // 200
 * ```
 */
export function dashboard(queue: Queue, bag: DashboardOptions = {}): DashboardHandler {
  if (typeof queue !== "object" || queue === null || typeof queue.counts !== "function") {
    throw new TypeError(`dashboard: queue must be a Queue (Queue.open()): got ${shown(queue)}`);
  }
  const options = optionBag(bag, "dashboard", DASHBOARD_OPTIONS) ?? {};
  const given: unknown = options.basePath ?? "";
  if (typeof given !== "string") {
    throw new TypeError(`dashboard: basePath must be a string: got ${shown(given)}`);
  }
  const basePath = given.replace(/\/$/, "");
  if (
    !BASE_PATH.test(basePath) || basePath.split("/").some((part) => part === "." || part === "..")
  ) {
    throw new TypeError(
      `dashboard: basePath must be "" or "/"-separated segments of letters, digits and -._~: got ${
        shown(options.basePath)
      }`,
    );
  }
  const gate = options.gate ?? loopbackOnly;
  if (typeof gate !== "function") {
    throw new TypeError(`dashboard: gate must be a function: got ${shown(gate)}`);
  }
  const readOnly = options.readOnly ?? false;
  if (typeof readOnly !== "boolean") {
    throw new TypeError(`dashboard: readOnly must be true or false: got ${shown(readOnly)}`);
  }
  const title = options.title ?? "@renox/queue";
  if (typeof title !== "string" || title.length === 0 || title.length > 100) {
    throw new TypeError(
      `dashboard: title must be a string of 1 to 100 characters: got ${shown(title)}`,
    );
  }
  const metrics = options.metrics ?? false;
  if (typeof metrics !== "boolean") {
    throw new TypeError(`dashboard: metrics must be true or false: got ${shown(metrics)}`);
  }
  const metricsGate = options.metricsGate ?? gate;
  if (typeof metricsGate !== "function") {
    throw new TypeError(`dashboard: metricsGate must be a function: got ${shown(metricsGate)}`);
  }
  const setup = {
    queue,
    base: basePath,
    title,
    gate,
    readOnly,
    csrf: new CsrfTokens(),
    metricsGate: metrics ? metricsGate : null,
  };
  return (request, info) => route(setup, request, info);
}
