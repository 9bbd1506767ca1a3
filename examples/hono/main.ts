/**
 * A Hono app that queues work from a route and mounts the dashboard under
 * `/admin/queue`, behind the app's own authentication (Hono's `basicAuth`
 * middleware), served by `deno serve`. Jobs run in this process
 * (`QUEUE_WORKERS` of them at once, default 2; 0 runs none here and leaves
 * them to a `work` process on the same database).
 *
 * - `POST /signups` with `{"email":"ada@example.com"}` dispatches a
 *   `send-welcome` job: 202 with its id, 400 when the body is not JSON, fails
 *   the job's schema or is over the payload cap (any other error is a 500).
 * - `/admin/queue` is the dashboard, for the user `admin` with the password
 *   in `DASHBOARD_PASSWORD` (refused for everyone while it is unset).
 *
 * Settings from the environment, read by `readConfig()`: `QUEUE_DB` (default
 * `./.renox/queue.db`), or where it is unset `DATABASE_URL` (`postgres://…`);
 * `QUEUE_WORKERS`; and `DASHBOARD_PASSWORD`.
 *
 * ```sh
 * DASHBOARD_PASSWORD=secret deno serve -A examples/hono/main.ts
 * curl -X POST localhost:8000/signups -d '{"email":"ada@example.com"}'
 * open http://admin:secret@localhost:8000/admin/queue
 * ```
 *
 * The same mount in any framework that hands a route the web `Request`
 * (Fresh, Oak, or a plain `Deno.serve` handler): build the handler once
 * with `dashboard(queue, { basePath: "/admin/queue", gate })`, route every
 * method of `/admin/queue` and `/admin/queue/*` to it unchanged, and pass
 * the connection info as the second argument when the framework has it.
 * The `basePath` must be the path the framework mounts it at, so its links
 * and forms point back under it. Check who the user is before the handler
 * runs, with the framework's own session or auth middleware, then let the
 * `gate` say what that user may do (`true`, `"read"`, or `false`): without
 * a gate the dashboard lets in loopback requests only. In Fresh, that is a
 * `routes/admin/queue/[...path].ts` whose handler returns
 * `handler(ctx.req, ctx.info)`, behind a `_middleware.ts` that checks the
 * session.
 *
 * @module
 */
import { Hono, type MiddlewareHandler } from "hono";
import { basicAuth } from "hono/basic-auth";
import { Queue, readConfig, ValidationError } from "../../mod.ts";
import { dashboard } from "../../src/dashboard.ts";
import { sendWelcome } from "./jobs.ts";

const config = readConfig();
const password = Deno.env.get("DASHBOARD_PASSWORD") ?? "";

const queue = await Queue.open({ ...config.database, jobs: import.meta.resolve("./jobs.ts") });
if (config.workers > 0) queue.work({ concurrency: config.workers });

// On SIGINT or SIGTERM `deno serve` stops its server, and the process ends once nothing else
// keeps it alive: the queue's worker and database would, so close the queue too (its running
// jobs get their grace period).
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  Deno.addSignalListener(signal, () => void queue.close());
}

// Only requests that passed the app's own authentication reach the handler: its gate lets them in.
const admin = dashboard(queue, { basePath: "/admin/queue", gate: () => true });

/** `deno serve` hands each request's connection info to Hono as its environment. */
const app = new Hono<{ Bindings: Deno.ServeHandlerInfo }>();

app.post("/signups", async (c) => {
  let body: unknown;
  try {
    body = await c.req.json();
  } catch {
    return c.json({ error: "The body must be JSON" }, 400);
  }
  try {
    const id = await queue.dispatch(sendWelcome, body as { email: string });
    return c.json({ id }, 202);
  } catch (error) {
    // Only a ValidationError is the client's doing (a body that fails the schema or is over the
    // payload cap): 400. Anything else (a TypeError or RangeError is a bug of ours, a database
    // error the server's trouble) is rethrown, and Hono answers 500 (docs/dispatching.md).
    if (!(error instanceof ValidationError)) throw error;
    return c.json({ error: error.message }, 400);
  }
});

// basicAuth compares in constant time; with no password set, everyone is refused.
const adminAuth: MiddlewareHandler = password === ""
  ? (c) => Promise.resolve(c.text("The dashboard is off: DASHBOARD_PASSWORD is not set", 403))
  : basicAuth({ username: "admin", password, realm: "queue dashboard" });
app.use("/admin/queue", adminAuth);
app.use("/admin/queue/*", adminAuth);
app.all("/admin/queue", (c) => admin(c.req.raw, c.env));
app.all("/admin/queue/*", (c) => admin(c.req.raw, c.env));

export default app satisfies Deno.ServeDefaultExport;
