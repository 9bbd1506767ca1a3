/**
 * The `dashboard` command: serves the dashboard of the queue's database over
 * HTTP, on 127.0.0.1 by default, until SIGINT or SIGTERM.
 *
 * @module
 * @internal
 */
import { dashboard } from "../dashboard.ts";
import { moduleUrl } from "../registry.ts";
import { isLoopbackAddress } from "../dashboard/gate.ts";
import { bearerToken } from "../dashboard/metrics_route.ts";
import { openAdminQueue } from "./admin.ts";
import {
  expectPositionals,
  type ParsedArgs,
  readDb,
  readInteger,
  readString,
  readSwitch,
  UsageError,
} from "./args.ts";
import { redactPassword } from "../stores/database_url.ts";
import { type Command, EXIT } from "./command.ts";
import { onSignals } from "./stop_signals.ts";

/** The shortest `QUEUE_METRICS_TOKEN` taken: what `bearerToken()` takes. */
const MIN_TOKEN_CHARS = 16;

/** `QUEUE_METRICS_TOKEN`, checked; undefined when unset or empty (then /metrics is loopback-only). */
function readMetricsToken(args: ParsedArgs): string | undefined {
  const token = Deno.env.get("QUEUE_METRICS_TOKEN");
  if (token === undefined || token === "") return undefined;
  if (token.length < MIN_TOKEN_CHARS) {
    throw new UsageError(
      args.command,
      `QUEUE_METRICS_TOKEN must be at least ${MIN_TOKEN_CHARS} characters: got ${token.length}`,
    );
  }
  return token;
}

/** `dashboard [--port N] [--host HOST] [--read-only] [--metrics]`. */
export const dashboardCommand: Command = {
  name: "dashboard",
  operands: "",
  summary: "serve the dashboard of the queue's database over HTTP until Ctrl-C",
  description:
    "Serves the dashboard (queues, jobs, failed jobs, batches, job types) over HTTP and prints its\nURL, until SIGINT or SIGTERM. With --jobs, the schedules the jobs module defines get a Run now\nbutton (a schedule's job is built from its definition); it runs no job itself. Only requests from a loopback address get in: to reach it from\nanother machine, use an SSH tunnel, or mount dashboard() in your app with a gate.",
  flags: {
    port: { type: "string", value: "N", help: "the port, 0 for any free one (default 8080)" },
    host: { type: "string", value: "HOST", help: "the address to listen on (default 127.0.0.1)" },
    jobs: {
      type: "string",
      value: "PATH",
      help:
        "the jobs module, a path or a URL: Run now on the schedules it defines (needs APP_KEY if it has encrypted jobs)",
    },
    "read-only": { type: "boolean", help: "refuse every action (retry, forget, flush, cancel)" },
    metrics: {
      type: "boolean",
      help:
        "also serve GET /metrics (Prometheus text); with $QUEUE_METRICS_TOKEN set, a scraper sends it as a Bearer token",
    },
  },
  async run(args) {
    expectPositionals(args, 0, 0, "");
    const port = readInteger(args, "port", 0, 65_535) ?? 8080;
    const host = readString(args, "host") ?? "127.0.0.1";
    const jobs = readString(args, "jobs");
    const readOnly = readSwitch(args, "read-only");
    const metrics = readSwitch(args, "metrics");
    const token = metrics ? readMetricsToken(args) : undefined;
    // Listening before the queue opens: a signal at any point after start ends it with 0.
    const stopped = Promise.withResolvers<void>();
    using _signals = onSignals(() => stopped.resolve());
    await using queue = await openAdminQueue(
      args,
      jobs === undefined ? {} : { jobs: moduleUrl(jobs) },
    );
    const server = Deno.serve(
      { hostname: host, port, onListen: () => {} },
      dashboard(queue, {
        readOnly,
        metrics,
        ...token === undefined ? {} : { metricsGate: bearerToken(token) },
      }),
    );
    try {
      const { hostname, port: listening } = server.addr;
      // Every address (0.0.0.0, ::) is no host a browser can ask for, and the gate wants a
      // loopback one: the URL names this machine's loopback address of that family.
      const reachable = hostname === "0.0.0.0" ? "127.0.0.1" : hostname === "::" ? "::1" : hostname;
      const urlHost = reachable.includes(":") ? `[${reachable}]` : reachable;
      console.log(
        `Dashboard of ${redactPassword(readDb(args))}${
          readOnly ? " (read-only)" : ""
        }: http://${urlHost}:${listening}/ (Ctrl-C to stop)`,
      );
      if (metrics) console.log(`Metrics: http://${urlHost}:${listening}/metrics`);
      if (!isLoopbackAddress(hostname)) {
        console.log(
          `Listening on ${hostname}, but only requests from a loopback address get in (403 for others)`,
        );
      }
      await stopped.promise;
    } finally {
      await server.shutdown();
    }
    return EXIT.ok;
  },
};
