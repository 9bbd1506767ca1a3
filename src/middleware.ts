/**
 * Job middleware: rules checked before each attempt, across every process
 * on the database. A job that a rule holds back is put back without using an
 * attempt (its handler did not run). Their locks and counters live in the
 * database, with expiry, and are released in the transaction that settles
 * the job, however it ends.
 *
 * @module
 */

import { optionBag, optionNames } from "./option_bags.ts";
import { shown } from "./shown.ts";
import { assertName } from "./names.ts";
import type { MiddlewareRequest } from "./stores/store.ts";

/** At most `limit` jobs holding `key` run at once, across all processes. */
export interface WithoutOverlapping {
  /** Which rule. */
  readonly kind: "without-overlapping";
  /** The lock's name, shared by every job that names it. */
  readonly key: string;
  /** Jobs that may hold it at once. */
  readonly limit: number;
  /** How long a held-back job waits before it is due again. */
  readonly releaseAfterMs: number;
  /** When a lock its worker never released (killed) expires; undefined: the job's `timeoutMs` plus the worker's grace and 2 s. */
  readonly expireAfterMs: number | undefined;
}

/** At most `max` starts of jobs naming `key` per window of `perMs`, across all processes. */
export interface RateLimited {
  /** Which rule. */
  readonly kind: "rate-limited";
  /** The limit's name, shared by every job that names it. */
  readonly key: string;
  /** Starts allowed per window. */
  readonly max: number;
  /** The window, in ms; windows are aligned to multiples of it. */
  readonly perMs: number;
}

/** A rule a job's `middleware(payload)` returns. */
export type JobMiddleware = WithoutOverlapping | RateLimited;

/** Options for {@linkcode withoutOverlapping}. */
export interface WithoutOverlappingOptions {
  /**
   * How long a job held back by the lock waits before it is due again.
   * @default {1_000}
   */
  releaseAfterMs?: number;
  /**
   * How long a lock lasts if its worker dies without releasing it.
   * @default {the job's timeoutMs plus the worker's graceMs and 2 s}
   */
  expireAfterMs?: number;
  /**
   * Jobs that may hold the lock at once.
   * @default {1}
   */
  limit?: number;
}

/** The options `withoutOverlapping` takes. */
const WITHOUT_OVERLAPPING_OPTIONS = optionNames<WithoutOverlappingOptions>()([
  "limit",
  "releaseAfterMs",
  "expireAfterMs",
]);

/**
 * Lets at most `limit` (default 1) jobs that name `key` run at once, across
 * every process; the others are put back without using an attempt and come
 * back after `releaseAfterMs`.
 *
 * @example One job per order at a time
 * ```ts
 * import { defineJob, withoutOverlapping } from "@renox/queue";
 * import { z } from "zod";
 *
 * export const syncOrder = defineJob({
 *   name: "sync-order",
 *   schema: z.object({ orderId: z.number() }),
 *   middleware: ({ orderId }) => [withoutOverlapping(`order:${orderId}`)],
 *   handle() {},
 * });
 * ```
 */
export function withoutOverlapping(
  key: string,
  options: WithoutOverlappingOptions = {},
): WithoutOverlapping {
  const where = "withoutOverlapping";
  options = optionBag(options, where, WITHOUT_OVERLAPPING_OPTIONS) ?? {};
  return {
    kind: "without-overlapping",
    key: assertKey(key, where),
    limit: wholeNumber(options.limit ?? 1, `${where}: limit`),
    releaseAfterMs: milliseconds(options.releaseAfterMs ?? 1_000, `${where}: releaseAfterMs`, 0),
    expireAfterMs: options.expireAfterMs === undefined
      ? undefined
      : milliseconds(options.expireAfterMs, `${where}: expireAfterMs`, 1),
  };
}

/**
 * Lets at most `max` jobs that name `key` start per window of `perMs`,
 * across every process; the others are put back, without using an attempt,
 * until the window ends. A `key` may not start with U+0001: those name the
 * windows of group rate limits (`defineJob({ groupRate })`), which limit
 * claims instead, so no job is claimed to be put back.
 *
 * @example At most 60 mails a minute
 * ```ts
 * import { defineJob, rateLimited } from "@renox/queue";
 * import { z } from "zod";
 *
 * export const sendMail = defineJob({
 *   name: "send-mail",
 *   schema: z.object({ to: z.string() }),
 *   middleware: () => [rateLimited("mailer", 60, 60_000)],
 *   handle() {},
 * });
 * ```
 */
export function rateLimited(key: string, max: number, perMs: number): RateLimited {
  const where = "rateLimited";
  assertKey(key, where);
  if (key.startsWith("\u0001")) {
    throw new TypeError(
      `${where}: key must not start with U+0001, kept for the windows of group rate limits (groupRate): got ${
        JSON.stringify(key.slice(0, 64))
      }`,
    );
  }
  return {
    kind: "rate-limited",
    key,
    max: wholeNumber(max, `${where}: max`),
    perMs: milliseconds(perMs, `${where}: perMs`, 1),
  };
}

/**
 * Checks what a job's `middleware(payload)` returned: an array of rules made
 * by {@linkcode withoutOverlapping} and {@linkcode rateLimited}. Each rule is
 * checked again field by field, so a hand-made object with a bad field is
 * refused with the field's name instead of reaching the store.
 */
export function assertMiddleware(rules: unknown, jobName: string): readonly JobMiddleware[] {
  const kinds = new Set(["without-overlapping", "rate-limited"]);
  if (
    !Array.isArray(rules) ||
    !rules.every((rule) => typeof rule === "object" && rule !== null && kinds.has(rule.kind))
  ) {
    throw new TypeError(
      `Job "${jobName}": middleware(payload) must return an array of withoutOverlapping() and rateLimited() rules`,
    );
  }
  return (rules as JobMiddleware[]).map((rule) =>
    rule.kind === "without-overlapping"
      ? withoutOverlapping(rule.key, {
        limit: rule.limit,
        releaseAfterMs: rule.releaseAfterMs,
        ...(rule.expireAfterMs !== undefined && { expireAfterMs: rule.expireAfterMs }),
      })
      : rateLimited(rule.key, rule.max, rule.perMs)
  );
}

/**
 * What the store checks for one claimed job: its overlap locks (expiring
 * after `expireAfterMs`, else after `defaultExpireMs`) and its rate limits.
 * Rules that name one key (a transfer's `acct:${from}` and `acct:${to}`
 * with from = to) take one lock: the job holds the key once, under the
 * smallest of their limits, until the latest of their expiries.
 */
export function middlewareRequest(
  job: { readonly id: number; readonly token: number },
  rules: readonly JobMiddleware[],
  now: number,
  defaultExpireMs: number,
): MiddlewareRequest {
  const locks = new Map<string, MiddlewareRequest["locks"][number]>();
  for (const rule of rules) {
    if (rule.kind !== "without-overlapping") continue;
    const lock = {
      key: rule.key,
      limit: rule.limit,
      expiresAt: now + (rule.expireAfterMs ?? defaultExpireMs),
      retryAt: now + rule.releaseAfterMs,
    };
    const same = locks.get(rule.key);
    locks.set(
      rule.key,
      same === undefined ? lock : {
        key: rule.key,
        limit: Math.min(same.limit, lock.limit),
        expiresAt: Math.max(same.expiresAt, lock.expiresAt),
        retryAt: Math.max(same.retryAt, lock.retryAt),
      },
    );
  }
  const rates = rules.filter((rule) => rule.kind === "rate-limited").map((rule) => ({
    key: rule.key,
    max: rule.max,
    perMs: rule.perMs,
  }));
  return { id: job.id, token: job.token, locks: [...locks.values()], rates };
}

/** Names a job's rules for the error its put-back leaves: `withoutOverlapping(order:7)`. */
export function describeRules(rules: readonly JobMiddleware[]): string {
  return rules.map((rule) =>
    rule.kind === "without-overlapping"
      ? `withoutOverlapping(${rule.key})`
      : `rateLimited(${rule.key}, ${rule.max} per ${rule.perMs} ms)`
  ).join(", ");
}

function assertKey(key: unknown, where: string): string {
  return assertName(key, where, "key");
}

function wholeNumber(value: number, where: string): number {
  if (!Number.isSafeInteger(value) || value < 1) {
    throw new RangeError(`${where} must be a whole number >= 1: got ${shown(value)}`);
  }
  return value;
}

function milliseconds(value: number, where: string, min: number): number {
  if (!(Number.isFinite(value) && value >= min && value <= 2_147_483_647)) {
    throw new RangeError(
      `${where} must be a number of ms from ${min} to 2147483647: got ${shown(value)}`,
    );
  }
  return Math.round(value);
}
