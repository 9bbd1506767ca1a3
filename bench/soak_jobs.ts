/**
 * The soak's jobs module: a mix of jobs that succeed, fail for good after
 * two attempts, and hold a unique key. Delayed jobs are dispatched with a
 * delay; nothing else differs. Every isolate that loads it collects garbage
 * in full every 10 s when `gc()` is exposed (see `soak_collect.ts`).
 *
 * @module
 */
import { z } from "zod";
import { defineJob } from "../mod.ts";
import { collectPeriodically } from "./soak_collect.ts";

collectPeriodically();

/** This module's URL, for the worker processes. */
export const SOAK_JOBS_URL: string = import.meta.url;

/** Succeeds after a little work. */
export const soakOk = defineJob({
  name: "soak-ok",
  schema: z.object({ n: z.number().int() }),
  handle({ n }) {
    let hash = n;
    for (let i = 0; i < 1_000; i++) hash = Math.imul(hash ^ i, 0x01000193) >>> 0;
    return void hash;
  },
});

/** Fails every attempt; after its two it is in the failed jobs. */
export const soakFailing = defineJob({
  name: "soak-failing",
  schema: z.object({ n: z.number().int() }),
  maxAttempts: 2,
  backoff: [200],
  handle({ n }) {
    throw new Error(`soak job ${n} fails on purpose`);
  },
});

/** Held by a unique key until it settles. */
export const soakUnique = defineJob({
  name: "soak-unique",
  schema: z.object({ key: z.string() }),
  uniqueForMs: 60_000,
  uniqueId: ({ key }) => key,
  handle() {},
});
