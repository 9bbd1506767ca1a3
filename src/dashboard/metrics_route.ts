/**
 * The dashboard's `GET /metrics` (with `metrics: true`): behind its own
 * gate (`metricsGate`, else the dashboard's), answered before any page, and
 * a {@linkcode bearerToken} gate for a scraper that sends a token. A queue
 * that fails it is answered as on the other routes (a closed queue or a
 * lost store: 503), in plain text.
 *
 * @internal
 * @module
 */
import { timingSafeEqual } from "node:crypto";
import type { Queue } from "../queue.ts";
import { failureAnswer } from "./failures.ts";
import { askGate, type DashboardGate } from "./gate.ts";
import { metricsText, OPENMETRICS_TYPE, PROMETHEUS_TYPE } from "./prometheus.ts";
import { textResponse } from "./responses.ts";
import { baseHeaders } from "./headers.ts";

/** What the metrics route needs of the dashboard's setup. */
export interface MetricsSetup {
  readonly queue: Queue;
  readonly base: string;
  /** The gate of `/metrics`, or null when the dashboard serves no metrics. */
  readonly metricsGate: DashboardGate | null;
}

/** The answer to `GET /metrics`, or null when `request` is not for it (or metrics are off). */
export async function serveMetrics(
  setup: MetricsSetup,
  request: Request,
  info: Deno.ServeHandlerInfo | undefined,
): Promise<Response | null> {
  if (setup.metricsGate === null) return null;
  if (new URL(request.url).pathname !== `${setup.base}/metrics`) return null;
  if (await askGate(setup.metricsGate, true, request, info) === null) {
    return textResponse("403 Forbidden: the metrics gate refused the request", 403);
  }
  if (request.method !== "GET" && request.method !== "HEAD") {
    return textResponse("405 Method Not Allowed: use GET", 405, { allow: "GET, HEAD" });
  }
  const openMetrics = (request.headers.get("accept") ?? "").includes(
    "application/openmetrics-text",
  );
  let body: string;
  try {
    body = await metricsText(setup.queue, openMetrics);
  } catch (error) {
    const { status, text } = failureAnswer(setup.queue, error, "GET /metrics", "no input");
    return textResponse(text, status);
  }
  const headers = baseHeaders(openMetrics ? OPENMETRICS_TYPE : PROMETHEUS_TYPE);
  headers.set("content-security-policy", "default-src 'none'; frame-ancestors 'none'");
  headers.set("cache-control", "no-store");
  return new Response(request.method === "HEAD" ? null : body, { headers });
}

/**
 * A gate that lets in requests carrying `Authorization: Bearer <token>`,
 * compared in constant time: for a scraper, as `metricsGate`.
 *
 * @example Let Prometheus scrape with a token
 * ```ts ignore
 * dashboard(queue, { metrics: true, metricsGate: bearerToken(Deno.env.get("METRICS_TOKEN")!) });
 * ```
 */
export function bearerToken(token: string): DashboardGate {
  if (typeof token !== "string" || token.length < 16) {
    throw new TypeError("bearerToken: the token must be a string of at least 16 characters");
  }
  const expected = new TextEncoder().encode(token);
  return (request) => {
    // The scheme's name is case-insensitive (RFC 9110); the token is compared as it is.
    const [, scheme = "", credentials = ""] =
      /^(\S+) (.*)$/.exec(request.headers.get("authorization") ?? "") ?? [];
    const given = new TextEncoder().encode(credentials);
    return scheme.toLowerCase() === "bearer" && given.length === expected.length &&
        timingSafeEqual(given, expected)
      ? "read"
      : false;
  };
}
