/**
 * A serving app that queues work and runs it in the same process.
 *
 * `POST /orders` with a JSON body (`{"sku":"mug","quantity":2,"email":"ada@example.com"}`)
 * dispatches a `fulfil-order` job: 202 with its id, or 400 with the error when
 * the body is not JSON, fails the job's schema or is over the payload cap (a
 * `ValidationError`: what a client can get wrong; any other error is a 500).
 * `GET /` shows the queue's counts and what this process's worker has done.
 *
 * Settings from the environment: `PORT` (default 8000; 0 picks a free port),
 * `QUEUE_DB` (default `./.renox/queue.db`, or a `postgres://` `DATABASE_URL`
 * where it is unset) and `QUEUE_WORKERS` (jobs run at once in this process,
 * default 2; 0 runs none here).
 *
 * A second terminal running `deno task work` (the `work` command on the same
 * jobs module, examples/jobs.ts) with `QUEUE_DB` pointing at the same
 * file shares the work: each job runs once, in whichever process claims it
 * first. With `QUEUE_WORKERS=0` this app only dispatches and that process
 * does all the work.
 *
 * SIGINT or SIGTERM stops it gracefully: it stops accepting requests, lets
 * running jobs finish (or puts them back), and closes the queue.
 *
 * ```sh
 * deno run -A examples/serve/main.ts
 * curl -X POST localhost:8000/orders -d '{"sku":"mug","quantity":2,"email":"ada@example.com"}'
 * ```
 *
 * @module
 */
import { type PayloadOf, Queue, type QueueWorker, readConfig, ValidationError } from "../../mod.ts";
import { fulfilOrder } from "../jobs.ts";

const config = readConfig();
const port = Number(Deno.env.get("PORT") ?? "8000");
if (!Number.isInteger(port) || port < 0 || port > 65_535) {
  throw new TypeError(`PORT must be a port number: got "${Deno.env.get("PORT")}"`);
}
// Listening from the start, so a signal never ends the process while it holds a job: the first
// stops the app gracefully, a second puts running jobs back at once.
let worker: QueueWorker | null = null;
const stopSignal = Promise.withResolvers<Deno.Signal>();
let signals = 0;
const onSignal = (signal: Deno.Signal) => () => {
  if (++signals === 1) stopSignal.resolve(signal);
  else void worker?.stop({ graceMs: 0 });
};
const listeners = (["SIGINT", "SIGTERM"] as const).map((signal) =>
  [signal, onSignal(signal)] as const
);
for (const [signal, listener] of listeners) Deno.addSignalListener(signal, listener);

const queue = await Queue.open({ ...config.database, jobs: import.meta.resolve("../jobs.ts") });
if (config.workers > 0) worker = queue.work({ concurrency: config.workers });

function json(body: unknown, status = 200): Response {
  return Response.json(body, { status });
}

async function placeOrder(request: Request): Promise<Response> {
  let body: unknown;
  try {
    body = await request.json();
  } catch {
    return json({ error: "The body must be JSON" }, 400);
  }
  try {
    // The job's schema checks the body; a ValidationError carries zod's issues.
    const id = await queue.dispatch(fulfilOrder, body as PayloadOf<typeof fulfilOrder>);
    return json({ id }, 202);
  } catch (error) {
    // Only a ValidationError is the client's doing (a body that fails the schema or is over the
    // payload cap): 400. Anything else (a TypeError or RangeError is a bug of ours, a database
    // error the server's trouble) is rethrown, and Deno.serve answers 500 (docs/dispatching.md).
    if (!(error instanceof ValidationError)) throw error;
    return json({ error: error.message, issues: error.issues }, 400);
  }
}

async function handle(request: Request): Promise<Response> {
  const { pathname } = new URL(request.url);
  if (pathname === "/orders") {
    return request.method === "POST" ? await placeOrder(request) : json({ error: "Use POST" }, 405);
  }
  if (pathname === "/") {
    return request.method === "GET"
      ? json({ counts: await queue.counts(), worker: worker?.stats ?? null })
      : json({ error: "Use GET" }, 405);
  }
  return json({ error: "Not found" }, 404);
}

const server = Deno.serve({
  hostname: "127.0.0.1",
  port,
  onListen: ({ hostname, port }) => {
    const workers = config.workers > 0 ? `${config.workers} workers` : "no workers";
    console.log(`Listening on http://${hostname}:${port}/ (${config.db}, ${workers})`);
  },
}, handle);

const signal = await stopSignal.promise;
console.log(`${signal}: no new requests; running jobs finish or go back to the queue`);
await server.shutdown();
await worker?.stop();
await queue.close();
for (const [signal, listener] of listeners) Deno.removeSignalListener(signal, listener);
