/**
 * Reading the dashboard's query strings and form fields: numbers are
 * clamped to their range (a missing or malformed one gets its default),
 * and filters are kept as given for the queue to check.
 *
 * @internal
 * @module
 */
// A full specifier: an app importing this module from another folder resolves bare names with
// its own import map, which need not list this dependency.
// deno-lint-ignore no-import-prefix
import { z } from "npm:zod@4";
import type { JobState } from "../admin/job_list.ts";

/**
 * A whole number from `min` to `max`: out-of-range values (infinities
 * included) are clamped, a fraction is cut, anything else (missing, empty,
 * not a number) is `fallback`.
 */
function clampedInteger(min: number, max: number, fallback: number) {
  return z.preprocess(
    (value) => {
      if (typeof value !== "string" || value.trim() === "") return undefined;
      const number = Number(value);
      return number === Infinity ? max : number === -Infinity ? min : number;
    },
    z.number().transform((n) => Math.min(max, Math.max(min, Math.trunc(n)))).catch(fallback),
  );
}

/** Rows per page: 1 to 200, default 25. */
export const LIMIT = { min: 1, max: 200, fallback: 25 } as const;
/** Pages: 1 to 100,000, default 1. */
export const PAGE = { min: 1, max: 100_000, fallback: 1 } as const;
/** Hours of metrics on the job types page: 1 to 168 (the 7 days kept), default 24. */
export const HOURS = { min: 1, max: 168, fallback: 24 } as const;

const pageSchema = z.object({
  page: clampedInteger(PAGE.min, PAGE.max, PAGE.fallback),
  limit: clampedInteger(LIMIT.min, LIMIT.max, LIMIT.fallback),
});

/** A page of a listing, from `?page=` and `?limit=`. */
export interface Paging {
  /** The page, from 1. */
  readonly page: number;
  /** Rows per page. */
  readonly limit: number;
  /** Rows before the page. */
  readonly offset: number;
}

/** `?page=` and `?limit=`, clamped. */
export function readPaging(params: URLSearchParams): Paging {
  const { page, limit } = pageSchema.parse(Object.fromEntries(params));
  return { page, limit, offset: (page - 1) * limit };
}

/** `?hours=`, clamped. */
export function readHours(params: URLSearchParams): number {
  return clampedInteger(HOURS.min, HOURS.max, HOURS.fallback).parse(params.get("hours") ?? "");
}

/** A count in a notice's query (`?count=`), clamped to 0 … 1e9. */
export function readCount(params: URLSearchParams): number {
  return clampedInteger(0, 1_000_000_000, 0).parse(params.get("count") ?? "");
}

/** The filters of the jobs page; an empty field is no filter. */
export interface JobFilters {
  readonly state: JobState | undefined;
  readonly queue: string | undefined;
  readonly name: string | undefined;
}

const stateSchema = z.enum(["pending", "delayed", "running"]).optional().catch(undefined);

/** `?state=`, `?queue=` and `?name=`: an unknown state is every state; names are checked by the queue. */
export function readJobFilters(params: URLSearchParams): JobFilters {
  const text = (name: string) => {
    const value = params.get(name)?.trim();
    return value === undefined || value === "" ? undefined : value;
  };
  return { state: stateSchema.parse(text("state")), queue: text("queue"), name: text("name") };
}

/** A positive id from a path segment, or null when it is not one. */
export function readId(segment: string | undefined): number | null {
  if (segment === undefined || !/^[1-9]\d{0,15}$/.test(segment)) return null;
  const id = Number(segment);
  return Number.isSafeInteger(id) ? id : null;
}
