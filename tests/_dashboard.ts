/**
 * Fixtures for the dashboard's handler tests: connection infos, requests
 * with a session (CSRF cookie and token), and a queue holding hostile names,
 * errors and payloads in every state the pages show.
 *
 * @module
 */
import assert from "node:assert/strict";
import { z } from "zod";
import { defineJob, generateAppKey, PermanentError, Queue } from "../mod.ts";
import type { DashboardHandler } from "../src/dashboard.ts";
import { RedisStore } from "../src/stores/redis/mod.ts";
import { ManualClock } from "./_helpers.ts";
import { deletePrefix, freshPrefix } from "./_redis.ts";

/** Where every fixture request goes. */
export const ORIGIN = "http://127.0.0.1:8080";

/** A TCP connection from `hostname`, as `Deno.serve` describes it. */
export function connection(hostname: string): Deno.ServeHandlerInfo {
  return {
    remoteAddr: { transport: "tcp", hostname, port: 40_000 },
    completed: Promise.resolve(),
  };
}

/** A browser on the same machine. */
export const LOCAL = connection("127.0.0.1");

/** Sends `GET path` (or `init`) from `info`; null passes no connection info at all. */
export function fetchFrom(
  handler: DashboardHandler,
  path: string,
  init: RequestInit = {},
  info: Deno.ServeHandlerInfo | null = LOCAL,
): Promise<Response> {
  return handler(new Request(`${ORIGIN}${path}`, init), info ?? undefined);
}

/** A browser's session: its CSRF cookie and the token its pages carry. */
export interface Session {
  /** `Cookie` header value. */
  readonly cookie: string;
  /** The token of the forms. */
  readonly token: string;
}

/** Opens `path` like a browser with no cookie yet and keeps the cookie and the forms' token. */
export async function openSession(
  handler: DashboardHandler,
  path = "/failed",
  headers: HeadersInit = {},
): Promise<Session> {
  const response = await fetchFrom(handler, path, { headers });
  assert.equal(response.status, 200);
  const setCookie = response.headers.get("set-cookie") ?? "";
  const cookie = /^(renox_queue_csrf=[A-Za-z0-9_-]{22});/.exec(setCookie)?.[1];
  assert.ok(cookie !== undefined, `a CSRF cookie is set: ${setCookie}`);
  const token = /name="_csrf" value="([A-Za-z0-9_-]+)"/.exec(await response.text())?.[1];
  assert.ok(token !== undefined, "the page's forms carry a token");
  return { cookie, token };
}

/** A form POST as a page of the dashboard sends it, with `session`'s cookie and token. */
export function postForm(
  handler: DashboardHandler,
  path: string,
  session: Session,
  options: {
    fields?: Record<string, string>;
    headers?: Record<string, string>;
    /** The connection; null for none. */
    info?: Deno.ServeHandlerInfo | null;
  } = {},
): Promise<Response> {
  const body = new URLSearchParams({ _csrf: session.token, ...options.fields });
  return fetchFrom(handler, path, {
    method: "POST",
    body,
    headers: {
      cookie: session.cookie,
      origin: ORIGIN,
      "sec-fetch-site": "same-origin",
      "content-type": "application/x-www-form-urlencoded",
      ...options.headers,
    },
  }, options.info === undefined ? LOCAL : options.info);
}

/** A job name, an error and a payload written to break out of HTML. */
export const HOSTILE = {
  name: `<script>alert("name")</script>`,
  queue: "javascript:void",
  error: `"><img src=x onerror=alert('error')> javascript:alert(1)`,
  note: `<script>alert('payload')</script>"><img src=x onerror=alert(2)>`,
} as const;

/** Fails for good with a hostile error. */
export const hostile = defineJob({
  name: HOSTILE.name,
  queue: HOSTILE.queue,
  schema: z.object({ note: z.string() }),
  maxAttempts: 1,
  handle() {
    throw new PermanentError(HOSTILE.error);
  },
});

/** Succeeds. */
export const plain = defineJob({
  name: "plain",
  schema: z.object({ n: z.number() }),
  handle() {},
});

/** Fails with a hostile error and is retried a minute later (the fixtures' clock stands still). */
export const flaky = defineJob({
  name: "flaky",
  schema: z.null(),
  maxAttempts: 2,
  backoff: [60_000],
  jitter: 0,
  handle() {
    throw new Error(HOSTILE.error);
  },
});

/** Fails for good; its payload is encrypted. */
export const secret = defineJob({
  name: "secret",
  schema: z.object({ card: z.string() }),
  encrypted: true,
  maxAttempts: 1,
  handle() {
    throw new PermanentError("card declined");
  },
});

/** Noon, 2026-01-01 UTC: every fixture's clock starts here. */
export const NOON = Date.UTC(2026, 0, 1, 12, 0, 0);

/** A queue in memory on a manual clock, with the fixture jobs registered. */
export async function openQueue(): Promise<{ queue: Queue; clock: ManualClock }> {
  const clock = new ManualClock(NOON);
  const queue = await Queue.open({
    path: ":memory:",
    jobs: [hostile, plain, secret, flaky],
    clock,
    appKey: generateAppKey(),
  });
  return { queue, clock };
}

/** Works the queue in this isolate until nothing is due. */
export async function drainQueue(queue: Queue): Promise<void> {
  await queue.work({ executor: "isolate", stopWhenEmpty: true, pollMs: 5 }).done;
}

/** The ids of the failed jobs, newest first. */
export async function failedIds(queue: Queue): Promise<number[]> {
  return (await queue.failed()).map((job) => job.id);
}

/**
 * A queue on a Redis prefix of its own at `url`, with one `job` of payload
 * `{ n: 1 }` dispatched, the `queue:error` reports it hears, and `lose()`,
 * which deletes the prefix's keys as a restart without persistence leaves
 * them. Disposing it closes the queue and deletes the keys.
 */
export async function redisQueueToLose(
  url: string,
  job: typeof plain,
): Promise<{ queue: Queue; errors: string[]; lose(): Promise<void> } & AsyncDisposable> {
  const prefix = freshPrefix();
  const queue = await Queue.open({ store: await RedisStore.open(url, { prefix }), jobs: [job] });
  await queue.dispatch(job, { n: 1 });
  const errors: string[] = [];
  queue.addEventListener("queue:error", ({ detail }) => errors.push(detail.during));
  return {
    queue,
    errors,
    lose: () => deletePrefix(url, prefix),
    async [Symbol.asyncDispose]() {
      await queue.close();
      await deletePrefix(url, prefix);
    },
  };
}
