/**
 * A fuzz test over the public API: 10,000 calls with random and hostile
 * values (names, payloads, options, ids, queue names) from a fixed seed, on
 * a real SQLite file. Every call either succeeds or throws one of the
 * errors we document (`ValidationError`, `TypeError`, `RangeError`) with a
 * message that says what was wrong; afterwards `integrity_check` is ok and
 * every stored row reads back through the admin calls.
 *
 * @module
 */
import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { z } from "zod";
import { defineJob, Queue, ValidationError } from "../../mod.ts";
import { tempDir } from "../_helpers.ts";

const CASES = 10_000;
const SEED = 15;

/** mulberry32: the same cases on every run. */
function seeded(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) >>> 0;
    let t = seed;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const typed = defineJob({
  name: "fuzz.typed",
  schema: z.object({ text: z.string().max(1_000), n: z.number().int() }),
  handle() {},
});
const anything = defineJob({ name: "fuzz.any", schema: z.unknown(), handle() {} });
const unique = defineJob({
  name: "fuzz.unique",
  schema: z.object({ key: z.string() }),
  uniqueForMs: 60_000,
  uniqueId: (payload) => payload.key,
  handle() {},
});
const stranger = defineJob({ name: "fuzz.unregistered", schema: z.unknown(), handle() {} });
const JOBS = [typed, anything, unique];

function deep(depth: number): unknown {
  let value: unknown = "bottom";
  for (let n = 0; n < depth; n++) value = { next: value };
  return value;
}

const HOSTILE: unknown[] = [
  "",
  " ",
  "default",
  "high",
  "a".repeat(65),
  "default'); DROP TABLE jobs;--",
  "<script>alert(1)</script>",
  '"><img src=x onerror=alert(1)>',
  "javascript:alert(1)",
  "nul\u0000byte",
  "lone \ud800 surrogate",
  "名前🙂",
  "__proto__",
  "constructor",
  "a:b.c-d_e",
  "x".repeat(300_000),
  0,
  -0,
  1,
  -1,
  1.5,
  7,
  2 ** 31,
  2 ** 53,
  Number.MAX_VALUE,
  NaN,
  Infinity,
  -Infinity,
  1n,
  true,
  false,
  null,
  undefined,
  [],
  [1, "two", null],
  {},
  JSON.parse('{"__proto__": {"polluted": true}, "text": "x", "n": 1}'),
  { constructor: { prototype: { polluted: true } } },
  { text: "ok", n: 1 },
  { text: 1, n: "1" },
  { key: "k1" },
  { key: "k2" },
  deep(50),
  deep(5_000),
  new Date(0),
  Symbol("s"),
  () => 1,
  new Map([[1, 2]]),
  Object.create(null),
];

Deno.test("fuzz: 10,000 random and hostile calls of the public API succeed or throw a typed error naming the bad value; afterwards the file is intact and every row reads back", async () => {
  await using tmp = await tempDir();
  await using queue = await Queue.open({ path: tmp.dbPath, jobs: JOBS });
  const random = seeded(SEED);
  const pick = <T>(values: readonly T[]): T => values[Math.floor(random() * values.length)]!;
  const value = () => pick(HOSTILE);
  const maybe = () => random() < 0.5 ? value() : undefined;
  const options = (): unknown => {
    if (random() < 0.1) return value();
    const chosen: Record<string, unknown> = {};
    for (const key of ["delayMs", "queue", "priority"]) if (random() < 0.4) chosen[key] = value();
    return chosen;
  };
  const job = () => pick([typed, typed, anything, unique, stranger]);
  const strings = HOSTILE.filter((each): each is string => typeof each === "string");
  const ints = HOSTILE.filter((each): each is number => Number.isSafeInteger(each));
  // Half the payloads fit their job's schema (hostile text inside), so many dispatches store.
  const payload = () =>
    random() < 0.5 ? value() : pick([
      { text: pick(strings).slice(0, 1_000), n: pick(ints) },
      { key: pick(strings) },
      pick(HOSTILE.filter((each) => typeof each === "object")),
    ]);
  const fair = () => random() < 0.5 ? {} : options();
  const list = () => ({ limit: maybe(), offset: maybe() });
  // deno-lint-ignore no-explicit-any
  const q = queue as any;
  const calls: [string, () => Promise<unknown>][] = [
    ["dispatch", () => q.dispatch(job(), payload(), fair())],
    ["dispatchMany", () => q.dispatchMany(job(), [payload(), payload()], fair())],
    ["transaction", () => q.transaction((tx: typeof q) => tx.dispatch(job(), payload(), fair()))],
    ["batch", () => q.batch(pick(strings)).push(job(), payload(), fair()).dispatch()],
    ["chain", () => q.chain().then(job(), payload()).then(job(), payload()).dispatch()],
    ["jobs", () => q.jobs({ state: maybe(), queue: maybe(), name: maybe(), ...list() })],
    ["failed", () => q.failed(list())],
    ["batches", () => q.batches(list())],
    ["batchStatus", () => q.batchStatus(value())],
    ["cancelBatch", () => q.cancelBatch(value())],
    ["failedJob", () => q.failedJob(value())],
    ["retry", () => q.retry(value())],
    ["forget", () => q.forget(value())],
    ["pruneFailed", () => q.pruneFailed({ olderThanMs: value() })],
    ["pruneBatches", () => q.pruneBatches({ olderThanMs: value() })],
    ["clear", () => q.clear(random() < 0.9 ? value() : "nothing-here")],
    ["counts", () => q.counts()],
  ];
  const byType = new Map<string, number>();
  const bad: string[] = [];
  let succeeded = 0;
  for (let n = 0; n < CASES; n++) {
    const [name, call] = pick(calls);
    try {
      await call();
      succeeded++;
    } catch (error) {
      const type = error instanceof ValidationError
        ? "ValidationError"
        : error instanceof RangeError
        ? "RangeError"
        : error instanceof TypeError
        ? "TypeError"
        : `other ${(error as Error)?.name}`;
      byType.set(type, (byType.get(type) ?? 0) + 1);
      const message = String((error as Error)?.message);
      const internal =
        /Cannot read propert|is not a function|is not iterable|undefined is not|null is not|Maximum call stack|SQLITE|constraint failed|Cannot convert/i;
      if (type.startsWith("other") || internal.test(message) || !/:|must|got/.test(message)) {
        if (bad.length < 20) bad.push(`case ${n} ${name}: ${type}: ${message.slice(0, 200)}`);
      }
    }
  }
  const counted = await queue.counts();
  const pending = Object.values(counted).reduce(
    (sum, c) => sum + c.pending + c.delayed + c.reserved,
    0,
  );
  let listed = 0;
  for (let offset = 0;; offset += 500) {
    const page = await queue.jobs({ limit: 500, offset });
    listed += page.jobs.length;
    if (page.jobs.length < 500) break;
  }
  const everyPage = async <T>(
    list: (options: { limit: number; offset: number }) => Promise<T[]>,
  ) => {
    const rows: T[] = [];
    for (let offset = 0;; offset += 1_000) {
      const page = await list({ limit: 1_000, offset });
      rows.push(...page);
      if (page.length < 1_000) return rows;
    }
  };
  const failedRows = await everyPage((page) => queue.failed(page));
  for (const row of failedRows) assert.ok(await queue.failedJob(row.id));
  const batches = await everyPage((page) => queue.batches(page));
  for (const batch of batches) assert.ok(await queue.batchStatus(batch.id));
  const db = new DatabaseSync(tmp.dbPath);
  let integrity: string;
  let stored: number;
  try {
    integrity = String(db.prepare("PRAGMA integrity_check").get()!.integrity_check);
    stored = Number(db.prepare("SELECT COUNT(*) AS n FROM jobs").get()!.n);
  } finally {
    db.close();
  }
  console.log(
    `fuzz: ${CASES} cases (seed ${SEED}): ${succeeded} succeeded, errors ${
      [...byType].map(([type, count]) => `${type} ${count}`).join(", ")
    }; ${stored} jobs, ${failedRows.length} failed and ${batches.length} batches stored and read ` +
      `back; integrity_check ${integrity}`,
  );
  assert.deepEqual(bad, [], "errors that are not ours or do not say what was wrong");
  assert.equal(integrity, "ok");
  assert.equal(listed, stored, "a stored job did not list");
  assert.equal(pending, stored, "counts() disagrees with the table");
  assert.ok(succeeded > CASES / 10 && byType.size > 0, "the cases exercise both outcomes");
});
