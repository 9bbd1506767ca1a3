/**
 * Encrypted payloads (`encrypted: true`): the cipher, the stored format, keys
 * and their rotation, and what a changed payload does to its job
 * (RELIABILITY.md S01, S02), on every store. Stored payloads are read and
 * changed with `db.stored` and `db.setStored`, outside the queue, as an
 * attacker with write access to the database would. Jobs in Web Workers write what they saw to a SQLite
 * file of the test's own.
 *
 * @module
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { z } from "zod";
import {
  defineJob,
  defineSchedule,
  type FailedJob,
  generateAppKey,
  type JobDefinition,
  PayloadIntegrityError,
  PermanentError,
  Queue,
  type QueueEventMap,
  type QueueOptions,
  ValidationError,
  withoutOverlapping,
} from "../../mod.ts";
import { PayloadCipher } from "../../src/encryption.ts";
import { readAppKeys } from "../../src/queue_options.ts";
import { cipherOf, unfinishedCount } from "../_helpers.ts";
import { orQueueError, type StoreContext, storeTest } from "../_stores.ts";
import { runCli } from "../fixtures/cli/cli_process.ts";
import {
  failingSecretJob,
  secretJob,
  SEEN_SQL,
  type SeenRow,
} from "../fixtures/encryption/jobs.ts";

const JOBS_URL = new URL("../fixtures/encryption/jobs.ts", import.meta.url).href;

const KEY_A = generateAppKey();
const KEY_B = generateAppKey();
/** What must never show up in the database, errors or events. */
const SECRET = `s3cr3t-${crypto.randomUUID()}`;

const encoder = new TextEncoder();

// ---------------------------------------------------------------------------
// Helpers

/** The id a stored payload names for `key`: the first 8 bytes of SHA-256 of the raw key, hex. */
async function keyIdOf(key: string): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", Uint8Array.fromBase64(key)));
  return [...digest.subarray(0, 8)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

const STORED = /^enc1:([0-9a-f]{16}):([A-Za-z0-9+/]+={0,2}):([A-Za-z0-9+/]+={0,2})$/;

interface Parsed {
  readonly keyId: string;
  readonly iv: Uint8Array<ArrayBuffer>;
  /** Ciphertext followed by the 16-byte tag. */
  readonly sealed: Uint8Array<ArrayBuffer>;
}

function parse(stored: string): Parsed {
  const match = STORED.exec(stored);
  assert.ok(match, `not the enc1 format: ${stored}`);
  return {
    keyId: match[1]!,
    iv: Uint8Array.fromBase64(match[2]!),
    sealed: Uint8Array.fromBase64(match[3]!),
  };
}

function build({ keyId, iv, sealed }: Parsed): string {
  return `enc1:${keyId}:${iv.toBase64()}:${sealed.toBase64()}`;
}

function flipBit(
  bytes: Uint8Array<ArrayBuffer>,
  index: number,
  bit: number,
): Uint8Array<ArrayBuffer> {
  const copy = bytes.slice();
  copy[index] = copy[index]! ^ (1 << bit);
  return copy;
}

/** A SQLite file of the test's own with the `seen` table the fixture jobs write to; `using` closes it. */
function openSeen(db: StoreContext): DatabaseSync & Disposable & { readonly path: string } {
  const path = join(db.dir, "seen.db");
  const seen = new DatabaseSync(path, { timeout: 20_000 });
  seen.exec(SEEN_SQL);
  return Object.assign(seen, { path, [Symbol.dispose]: () => seen.isOpen && seen.close() });
}

/** The payload of unfinished job `id` as stored, on any store. */
async function storedPayload(db: StoreContext, id: number): Promise<string> {
  const payload = await db.stored("jobs", id, "payload");
  assert.ok(payload !== null, `job ${id} is not among the unfinished jobs`);
  return payload;
}

/** Replaces the stored payload of unfinished job `id`, as an attacker with write access would. */
function setPayload(db: StoreContext, id: number, payload: string): Promise<void> {
  return db.setStored("jobs", id, "payload", payload);
}

function recordEvents<K extends keyof QueueEventMap>(
  target: EventTarget,
  type: K,
): QueueEventMap[K][] {
  const seen: QueueEventMap[K][] = [];
  target.addEventListener(type, (event) => seen.push((event as CustomEvent).detail));
  return seen;
}

/** Sets (or with undefined, deletes) environment variables while `fn` runs, then restores them. */
async function withEnv<T>(
  vars: Record<string, string | undefined>,
  fn: () => Promise<T>,
): Promise<T> {
  const saved = Object.fromEntries(Object.keys(vars).map((name) => [name, Deno.env.get(name)]));
  const apply = (values: Record<string, string | undefined>) => {
    for (const [name, value] of Object.entries(values)) {
      if (value === undefined) Deno.env.delete(name);
      else Deno.env.set(name, value);
    }
  };
  apply(vars);
  try {
    return await fn();
  } finally {
    apply(saved);
  }
}

/** Asserts that none of `texts` holds the plaintext secret. */
function assertNoSecret(where: string, ...texts: (string | null | undefined)[]): void {
  for (const text of texts) {
    if (text === null || text === undefined) continue;
    assert.ok(!text.includes(SECRET), `${where} holds the plaintext: ${text}`);
  }
}

const secretSchema = z.object({ secret: z.string(), n: z.number(), pad: z.string().optional() });
type SecretPayload = z.output<typeof secretSchema>;

/** Two encrypted jobs (of different names) and a plain one, counting what ran. */
function makeJobs() {
  const runs: { name: string; payload: SecretPayload }[] = [];
  const hooks: { name: string; payload: SecretPayload }[] = [];
  const middlewareSaw: SecretPayload[] = [];
  const common = {
    schema: secretSchema,
    encrypted: true,
    maxAttempts: 3,
    backoff: () => 0, // a retry would be due at once, so the worker would run it
    jitter: 0,
  } as const;
  const alpha = defineJob({
    ...common,
    name: "enc.alpha",
    handle(payload) {
      runs.push({ name: "enc.alpha", payload });
    },
    failed(payload) {
      hooks.push({ name: "enc.alpha", payload });
    },
  });
  const beta = defineJob({
    ...common,
    name: "enc.beta",
    handle(payload) {
      runs.push({ name: "enc.beta", payload });
    },
    failed(payload) {
      hooks.push({ name: "enc.beta", payload });
    },
  });
  const guarded = defineJob({
    ...common,
    name: "enc.guarded",
    middleware(payload) {
      middlewareSaw.push(payload);
      return [withoutOverlapping("enc-guarded")];
    },
    handle(payload) {
      runs.push({ name: "enc.guarded", payload });
    },
    failed(payload) {
      hooks.push({ name: "enc.guarded", payload });
    },
  });
  const plain = defineJob({
    name: "plain.job",
    schema: z.object({ n: z.number() }),
    handle() {
      runs.push({ name: "plain.job", payload: { secret: "", n: 0 } });
    },
  });
  return { alpha, beta, guarded, plain, runs, hooks, middlewareSaw };
}

type Jobs = ReturnType<typeof makeJobs>;

/** One tampered job: dispatched with `payload`, its stored text replaced by `tamper(...)`. */
interface TamperCase {
  readonly label: string;
  readonly job?: "alpha" | "beta" | "guarded";
  readonly payload?: SecretPayload;
  /** The new stored text, from this job's stored text and every case's, in order. */
  readonly tamper: (stored: string, all: readonly string[]) => string;
  /** What the PayloadIntegrityError's message says after `cannot be used: `. */
  readonly detail: RegExp;
}

/**
 * Dispatches one job per case, tampers with each row through a second
 * connection, works the queue in this isolate, and checks that every job
 * failed for good with PayloadIntegrityError on its first attempt, without
 * its handler, its middleware or its failed hook running, and without a retry.
 */
async function assertTamperedJobsFail(
  db: StoreContext,
  cases: readonly TamperCase[],
): Promise<void> {
  const jobs = makeJobs();
  await using queue = await db.open({
    jobs: [jobs.alpha, jobs.beta, jobs.guarded],
    appKey: KEY_A,
  });
  const ids: number[] = [];
  for (const [index, c] of cases.entries()) {
    ids.push(
      await queue.dispatch(jobs[c.job ?? "alpha"], c.payload ?? { secret: SECRET, n: index }),
    );
  }
  const original = await Promise.all(ids.map((id) => storedPayload(db, id)));
  const tampered = cases.map((c, index) => c.tamper(original[index]!, original));
  for (const [index, text] of tampered.entries()) {
    assert.notEqual(text, original[index], `${cases[index]!.label}: the tamper changed nothing`);
    await setPayload(db, ids[index]!, text);
  }
  const failedEvents = recordEvents(queue, "job:failed");
  const retryEvents = recordEvents(queue, "job:retry");
  const errors = recordEvents(queue, "queue:error");
  const worker = queue.work({ executor: "isolate", concurrency: 16, stopWhenEmpty: true });
  await worker.done;

  assert.deepEqual(jobs.runs, [], "a handler ran");
  assert.deepEqual(jobs.middlewareSaw, [], "a middleware ran");
  assert.deepEqual(jobs.hooks, [], "a failed hook ran");
  assert.deepEqual(worker.stats, { completed: 0, failed: cases.length, retried: 0 });
  assert.deepEqual(retryEvents, []);
  assert.deepEqual(errors, []);
  assert.equal(await unfinishedCount(queue), 0);

  const failed = new Map<number, FailedJob>(
    (await queue.failed({ limit: 1000 })).map((row) => [row.id, row]),
  );
  assert.equal(failed.size, cases.length);
  cases.forEach((c, index) => {
    const id = ids[index]!;
    const name = `enc.${c.job ?? "alpha"}`;
    const row = failed.get(id);
    assert.ok(row, `${c.label}: job ${id} is not among the failed jobs`);
    const prefix = `PayloadIntegrityError: Stored payload of "${name}" cannot be used: `;
    assert.ok(row.error.startsWith(prefix), `${c.label}: ${row.error}`);
    assert.match(row.error.slice(prefix.length), c.detail, c.label);
    assert.equal(row.attempts, 1, c.label);
    assert.equal(row.crashes, 0, c.label);
    assert.equal(row.payload, tampered[index], `${c.label}: failed_jobs keeps what was stored`);
    assertNoSecret(`${c.label}: failed row`, row.payload, row.error, row.stack);
    const events = failedEvents.filter((event) => event.id === id);
    assert.equal(events.length, 1, c.label);
    const event = events[0]!;
    assert.ok(event.error instanceof PayloadIntegrityError, `${c.label}: ${event.error}`);
    assert.equal(event.attempt, 1, c.label);
    const eventPrefix = `Stored payload of "${name}" cannot be used: `;
    assert.ok(event.error.message.startsWith(eventPrefix), `${c.label}: ${event.error.message}`);
    assert.match(event.error.message.slice(eventPrefix.length), c.detail, c.label);
    assertNoSecret(`${c.label}: job:failed event`, event.error.message, event.error.stack);
  });
}

const AUTH = /failed authentication \(changed, or not sealed for this job\)/;
const MALFORMED = /^the encrypted payload is malformed$/;
const NOT_ENCRYPTED = /^expected an encrypted payload$/;

/** A case per bit flip at `positions` of the IV, the ciphertext and the tag. */
function bitFlipCases(
  payload: SecretPayload,
  cipherLength: number,
  pick: (length: number) => number[],
): TamperCase[] {
  const cases: TamperCase[] = [];
  const add = (part: "iv" | "ciphertext" | "tag", index: number) => {
    const bit = index % 8;
    cases.push({
      label: `${part}[${index}] bit ${bit}`,
      payload,
      detail: AUTH,
      tamper(stored) {
        const parsed = parse(stored);
        assert.equal(parsed.sealed.length, cipherLength + 16);
        if (part === "iv") return build({ ...parsed, iv: flipBit(parsed.iv, index, bit) });
        const at = part === "ciphertext" ? index : cipherLength + index;
        return build({ ...parsed, sealed: flipBit(parsed.sealed, at, bit) });
      },
    });
  };
  for (const index of pick(12)) add("iv", index);
  for (const index of pick(cipherLength)) add("ciphertext", index);
  for (const index of pick(16)) add("tag", index);
  return cases;
}

function jsonBytes(payload: unknown): number {
  return encoder.encode(JSON.stringify(payload)).length;
}

// ---------------------------------------------------------------------------
// PayloadCipher

Deno.test("PayloadCipher: encrypt then decrypt gives back the text, for every kind of text", async () => {
  const cipher = await cipherOf(KEY_A);
  const texts = [
    JSON.stringify({ secret: SECRET }),
    "",
    "\u0000",
    "ünïcödé 🔐 \u{10FFFF} 中文",
    "x".repeat(100_000),
  ];
  for (const text of texts) {
    const stored = await cipher.encrypt("job", text);
    assert.equal(await cipher.decrypt("job", stored), text);
    assert.equal(parse(stored).sealed.length, encoder.encode(text).length + 16);
  }
});

Deno.test("PayloadCipher: stored text is enc1:<current key id>:<12-byte IV>:<ciphertext+tag>, without the plaintext", async () => {
  const cipher = await cipherOf(KEY_B, [KEY_A]);
  const idB = await keyIdOf(KEY_B);
  assert.equal(cipher.keyId, idB);
  assert.notEqual(idB, await keyIdOf(KEY_A));
  const text = JSON.stringify({ secret: SECRET, n: 1 });
  const stored = await cipher.encrypt("job", text);
  assert.ok(stored.startsWith(`enc1:${idB}:`), stored);
  const parsed = parse(stored);
  assert.equal(parsed.keyId, idB);
  assert.equal(parsed.iv.length, 12);
  assert.equal(parsed.sealed.length, encoder.encode(text).length + 16);
  assertNoSecret("stored text", stored);
  assert.ok(!stored.includes(SECRET.slice(0, 12)));
  // The same text twice: a fresh IV, so a different stored text.
  const again = await cipher.encrypt("job", text);
  assert.notEqual(again, stored);
  assert.notDeepEqual(parse(again).iv, parsed.iv);
});

Deno.test("PayloadCipher: the `base64:` prefix and surrounding spaces are accepted and give the same key id", async () => {
  const plain = await cipherOf(KEY_A);
  const prefixed = await cipherOf(` base64:${KEY_A}\n`);
  assert.equal(prefixed.keyId, plain.keyId);
  assert.equal(plain.keyId, await keyIdOf(KEY_A));
  const stored = await plain.encrypt("job", "hello");
  assert.equal(await prefixed.decrypt("job", stored), "hello");
});

Deno.test("PayloadCipher: every single-bit flip of IV, ciphertext and tag, and a different job name, fail authentication without showing the plaintext", async () => {
  const cipher = await cipherOf(KEY_A);
  const text = JSON.stringify({ secret: SECRET });
  const stored = await cipher.encrypt("job.a", text);
  const parsed = parse(stored);
  const tampered: string[] = [];
  for (let i = 0; i < parsed.iv.length; i++) {
    for (let bit = 0; bit < 8; bit++) {
      tampered.push(build({ ...parsed, iv: flipBit(parsed.iv, i, bit) }));
    }
  }
  for (let i = 0; i < parsed.sealed.length; i++) {
    for (let bit = 0; bit < 8; bit++) {
      tampered.push(build({ ...parsed, sealed: flipBit(parsed.sealed, i, bit) }));
    }
  }
  assert.equal(tampered.length, (12 + text.length + 16) * 8);
  const outcomes = await Promise.allSettled(tampered.map((t) => cipher.decrypt("job.a", t)));
  outcomes.forEach((outcome, index) => {
    assert.equal(outcome.status, "rejected", `flip ${index} opened`);
    const error = (outcome as PromiseRejectedResult).reason;
    assert.ok(error instanceof PayloadIntegrityError, String(error));
    assert.equal(error.name, "PayloadIntegrityError");
    assert.equal(
      error.message,
      'Stored payload of "job.a" cannot be used: the encrypted payload failed authentication (changed, or not sealed for this job)',
    );
    assertNoSecret("decrypt error", error.message, error.stack);
  });
  // The untouched text still opens, but only for the job it was sealed for.
  assert.equal(await cipher.decrypt("job.a", stored), text);
  await assert.rejects(cipher.decrypt("job.b", stored), (error: Error) => {
    assert.ok(error instanceof PayloadIntegrityError);
    assert.match(
      error.message,
      /^Stored payload of "job\.b" cannot be used: .*failed authentication/,
    );
    assertNoSecret("decrypt error", error.message, error.stack);
    return true;
  });
});

Deno.test("PayloadCipher: previous keys decrypt what they sealed; an unknown key id is named, and where the keys were set (options or environment)", async () => {
  const a = await cipherOf(KEY_A);
  const rotated = await cipherOf(KEY_B, [KEY_A]);
  const onlyB = await cipherOf(KEY_B);
  const fromA = await a.encrypt("job", "old");
  const fromB = await rotated.encrypt("job", "new");
  assert.equal(parse(fromB).keyId, await keyIdOf(KEY_B));
  assert.equal(await rotated.decrypt("job", fromA), "old");
  assert.equal(await rotated.decrypt("job", fromB), "new");
  assert.equal(await onlyB.decrypt("job", fromB), "new");
  const idA = await keyIdOf(KEY_A);
  const unknownKey = (keys: string) =>
    `Stored payload of "job" cannot be used: it was encrypted with key ${idA}, which is neither ${keys}`;
  await assert.rejects(onlyB.decrypt("job", fromA), (error: Error) => {
    assert.ok(error instanceof PayloadIntegrityError);
    assert.equal(error.message, unknownKey("appKey nor in previousAppKeys"));
    return true;
  });
  // Named where they were set: the options above, the environment or both here.
  for (
    const [current, previousList] of [
      ["APP_KEY", "APP_PREVIOUS_KEYS"],
      ["appKey", "APP_PREVIOUS_KEYS"],
      ["APP_KEY", "previousAppKeys"],
    ] as const
  ) {
    const named = await PayloadCipher.fromKeys({
      current: KEY_B,
      previous: [],
      names: { current, previousList, previous: [] },
    });
    await assert.rejects(named.decrypt("job", fromA), (error: Error) => {
      assert.equal(error.message, unknownKey(`${current} nor in ${previousList}`));
      return true;
    });
  }
  await assert.rejects(a.decrypt("job", fromB), PayloadIntegrityError);
});

Deno.test("Queue.open() names each of its keys where it was set, the option or the variable, for the errors about them", async () => {
  await withEnv({ APP_KEY: KEY_A, APP_PREVIOUS_KEYS: `${KEY_B}` }, () => {
    const names = (options: Partial<QueueOptions>) =>
      readAppKeys({ jobs: [], ...options }, [])?.names;
    assert.deepEqual(names({}), {
      current: "APP_KEY",
      previousList: "APP_PREVIOUS_KEYS",
      previous: ["APP_PREVIOUS_KEYS[0]"],
    });
    assert.deepEqual(names({ appKey: KEY_B }), {
      current: "appKey",
      previousList: "APP_PREVIOUS_KEYS",
      previous: ["APP_PREVIOUS_KEYS[0]"],
    });
    assert.deepEqual(names({ previousAppKeys: [] }), {
      current: "APP_KEY",
      previousList: "previousAppKeys",
      previous: [],
    });
    return Promise.resolve();
  });
});

Deno.test("PayloadCipher: with only previous keys it refuses to seal, naming where the current key was not set", async () => {
  for (
    const [current, previousList] of [
      ["APP_KEY", "APP_PREVIOUS_KEYS"],
      ["appKey", "previousAppKeys"],
    ] as const
  ) {
    const opener = await PayloadCipher.fromKeys({
      current: null,
      previous: [KEY_A],
      names: { current, previousList, previous: [`${previousList}[0]`] },
    });
    assert.equal(opener.canSeal, false);
    await assert.rejects(
      opener.encrypt("job", "x"),
      new TypeError(`Cannot seal for "job": ${current} is not set, only ${previousList}`),
    );
  }
});

Deno.test("PayloadCipher: 100,000 encryptions never repeat an IV", async () => {
  const cipher = await cipherOf(KEY_A);
  const total = 100_000;
  const ivs = new Set<string>();
  const chunk = 5_000;
  for (let start = 0; start < total; start += chunk) {
    const stored = await Promise.all(
      Array.from({ length: chunk }, () => cipher.encrypt("j", "1")),
    );
    for (const text of stored) {
      const iv = text.split(":")[2]!;
      assert.equal(iv.length, 16); // 12 bytes of base64, no padding
      ivs.add(iv);
    }
  }
  assert.equal(ivs.size, total);
});

// ---------------------------------------------------------------------------
// Dispatch and the stored payload

storeTest(
  "Queue: an encrypted job's row holds enc1 text under the current key with a fresh 12-byte IV, and its handler gets the payload back",
  async (db) => {
    const jobs = makeJobs();
    await using queue = await db.open({ jobs: [jobs.alpha], appKey: KEY_A });
    const payload = { secret: SECRET, n: 7 };
    const ids = await queue.dispatchMany(jobs.alpha, [payload, payload]);
    const stored = await Promise.all(ids.map((id) => storedPayload(db, id)));
    const idA = await keyIdOf(KEY_A);
    for (const text of stored) {
      assert.ok(text.startsWith(`enc1:${idA}:`), text);
      const parsed = parse(text);
      assert.equal(parsed.iv.length, 12);
      assert.equal(parsed.sealed.length, jsonBytes(payload) + 16);
      assertNoSecret("jobs row", text);
      assert.ok(!text.includes('"secret"'), text);
    }
    assert.notEqual(stored[0], stored[1]);
    assert.notDeepEqual(parse(stored[0]!).iv, parse(stored[1]!).iv);
    if (db.file !== null) {
      // The whole SQLite file holds no plaintext either.
      const side = new DatabaseSync(db.file, { timeout: 20_000 });
      try {
        side.exec("PRAGMA wal_checkpoint(FULL)");
      } finally {
        side.close();
      }
      const file = new TextDecoder().decode(await Deno.readFile(db.file));
      assert.ok(!file.includes(SECRET), "the database file holds the plaintext");
    }

    const worker = queue.work({ executor: "isolate", stopWhenEmpty: true });
    await worker.done;
    assert.deepEqual(worker.stats, { completed: 2, failed: 0, retried: 0 });
    assert.deepEqual(jobs.runs, [
      { name: "enc.alpha", payload },
      { name: "enc.alpha", payload },
    ]);
  },
);

storeTest(
  "Queue: a schedule of an encrypted job stores neither its payload nor its payload function's source, and a change of them alone is no change",
  async (db) => {
    const jobs = makeJobs();
    const byValue = (secret: string) =>
      defineSchedule({
        name: "by-value",
        everyMs: 60_000,
        job: jobs.alpha,
        payload: { secret, n: 1 },
      });
    const byFunction = defineSchedule({
      name: "by-function",
      everyMs: 60_000,
      job: jobs.alpha,
      payload: () => ({ secret: "in-the-source-" + SECRET, n: 2 }),
    });
    const stored = async () =>
      await Promise.all(
        ["by-value", "by-function"].map(async (name) => [name, await db.storedSchedule(name)]),
      );
    {
      await using _ = await db.open({
        jobs: [jobs.alpha, byValue(SECRET), byFunction],
        appKey: KEY_A,
      });
    }
    const first = await stored();
    assert.ok(first.every(([, row]) => row !== null), "both stored");
    for (const [name, definition] of first) {
      assertNoSecret(`schedule ${name}`, definition);
      assert.ok(!definition!.includes("in-the-source"), `${name}: ${definition}`);
    }
    {
      await using _ = await db.open({
        jobs: [jobs.alpha, byValue("another"), byFunction],
        appKey: KEY_A,
      });
    }
    assert.deepEqual(await stored(), first);
  },
);

storeTest(
  "Queue: the size cap applies to the plaintext JSON of an encrypted job, not its ciphertext",
  async (db) => {
    const jobs = makeJobs();
    const payload = { secret: "x", n: 1 };
    const cap = jsonBytes(payload);
    await using queue = await db.open({ jobs: [jobs.alpha], appKey: KEY_A, maxPayloadBytes: cap });
    await queue.dispatch(jobs.alpha, payload); // its ciphertext is far longer than the cap
    await assert.rejects(
      queue.dispatch(jobs.alpha, { secret: "xx", n: 1 }),
      /over the cap of \d+ bytes/,
    );
    assert.equal((await queue.counts()).default?.pending, 1);
  },
);

storeTest(
  "Queue: a failing encrypted job keeps only ciphertext in failed(), its job:failed event, and the failed hook sees the payload",
  async (db) => {
    const hooks: { payload: unknown; error: string }[] = [];
    const fails = defineJob({
      name: "enc.fails",
      schema: secretSchema,
      encrypted: true,
      maxAttempts: 1,
      handle() {
        throw new Error("the handler gave up");
      },
      failed(payload, error) {
        hooks.push({ payload, error: error.message });
      },
    });
    await using queue = await db.open({ jobs: [fails], appKey: KEY_A });
    const payload = { secret: SECRET, n: 3 };
    const id = await queue.dispatch(fails, payload);
    const stored = await storedPayload(db, id);
    const failedEvents = recordEvents(queue, "job:failed");
    await queue.work({ executor: "isolate", stopWhenEmpty: true }).done;

    assert.deepEqual(hooks, [{ payload, error: "the handler gave up" }]);
    const [row, ...more] = await queue.failed();
    assert.equal(more.length, 0);
    assert.equal(row!.id, id);
    assert.equal(row!.payload, stored);
    assert.equal(row!.error, "Error: the handler gave up");
    assertNoSecret("failed()", row!.payload, row!.error, row!.stack);
    assert.deepEqual((await queue.failedJob(id))?.payload, stored);
    const [rawPayload, rawError, rawStack] = await Promise.all(
      ["payload", "error", "stack"].map((column) => db.stored("failed_jobs", id, column)),
    );
    assert.equal(rawPayload, stored);
    assert.ok(rawError?.includes("the handler gave up"), `stored error: ${rawError}`);
    assertNoSecret("failed_jobs row", rawPayload, rawError, rawStack);
    assert.equal(failedEvents.length, 1);
    assertNoSecret("job:failed", failedEvents[0]!.error.message, failedEvents[0]!.error.stack);
  },
);

storeTest(
  "Queue: retrying a failed encrypted job keeps the identical ciphertext, and it then runs with the payload",
  async (db) => {
    const seen: unknown[] = [];
    let calls = 0;
    const flaky = defineJob({
      name: "enc.flaky",
      schema: secretSchema,
      encrypted: true,
      handle(payload) {
        seen.push(payload);
        if (++calls === 1) throw new PermanentError("not this time");
      },
    });
    await using queue = await db.open({ jobs: [flaky], appKey: KEY_A });
    const payload = { secret: SECRET, n: 9 };
    const id = await queue.dispatch(flaky, payload);
    const stored = await storedPayload(db, id);
    await queue.work({ executor: "isolate", stopWhenEmpty: true }).done;
    assert.equal((await queue.failedJob(id))?.payload, stored);

    assert.equal(await queue.retry(id), true);
    assert.equal(await storedPayload(db, id), stored);
    const worker = queue.work({ executor: "isolate", stopWhenEmpty: true });
    await worker.done;
    assert.deepEqual(worker.stats, { completed: 1, failed: 0, retried: 0 });
    assert.deepEqual(seen, [payload, payload]);
    assert.equal(await unfinishedCount(queue), 0);
    assert.deepEqual(await queue.failed(), []);
  },
);

storeTest(
  "Queue: an error the queue builds from an encrypted job's data (its output, a step's output, a signal, a payload its schema no longer takes) holds none of it, stored or in job:failed; a plain job's names the key",
  async (db) => {
    const numbers = z.record(z.string(), z.number());
    const jobOf = (name: string, handle: JobDefinition["handle"], more: object = {}) =>
      defineJob({ name, schema: z.null(), encrypted: true, maxAttempts: 1, handle, ...more });
    const refused = [
      jobOf("enc.output", () => ({ [SECRET]: Infinity }), { output: numbers }),
      jobOf("enc.strict", () => ({ ok: true, [SECRET]: 1 }), {
        output: z.strictObject({ ok: z.boolean() }),
      }),
      jobOf("enc.not-json", () => ({ [SECRET]: Infinity }), {
        output: z.record(z.string(), z.any()),
      }),
      jobOf("enc.step", async (_payload, ctx) => {
        await ctx.step("s", () => ({ [SECRET]: "x" }), { output: numbers });
      }),
      jobOf("enc.signal", async (_payload, ctx) => {
        await ctx.waitFor("go", { schema: numbers });
      }),
    ];
    const cardsOf = (value: z.ZodType) =>
      defineJob({
        name: "enc.changed",
        schema: z.object({ cards: z.record(z.string(), value) }),
        encrypted: true,
        maxAttempts: 1,
        handle() {},
      });
    const plain = defineJob({
      name: "plain.output",
      schema: z.null(),
      maxAttempts: 1,
      output: numbers,
      handle: () => ({ "visible-key": Infinity }),
    });
    const ids: number[] = [];
    {
      const numbered = cardsOf(z.number());
      await using before = await db.open({ jobs: [numbered], appKey: KEY_A });
      ids.push(await before.dispatch(numbered, { cards: { [SECRET]: 1 } }));
    }
    const changed = cardsOf(z.string());
    await using queue = await db.open({ jobs: [...refused, changed, plain], appKey: KEY_A });
    const refusal = await queue.dispatch(changed, { cards: { [SECRET]: 1 } }).then(
      () => assert.fail("dispatched"),
      (error: ValidationError) => error,
    );
    assert.ok(refusal instanceof ValidationError);
    assert.match(refusal.message, /withheld: the job is encrypted/);
    assertNoSecret("dispatch refusal", refusal.message, JSON.stringify(refusal.issues));
    assert.equal(refusal.cause, undefined);
    for (const job of refused) ids.push(await queue.dispatch(job, null));
    assert.equal(await queue.signal(ids.at(-1)!, "go", { [SECRET]: "x" }), "buffered");
    const plainId = await queue.dispatch(plain, null);
    const failedEvents = recordEvents(queue, "job:failed");
    await queue.work({ executor: "isolate", stopWhenEmpty: true }).done;

    const rows = new Map((await queue.failed()).map((row) => [row.id, row]));
    assert.match(rows.get(plainId)!.error, /output\.visible-key: /);
    for (const id of ids) {
      const row = rows.get(id);
      assert.ok(row !== undefined, `job ${id} failed`);
      assert.match(row.error, /withheld: the job is encrypted/);
      const stored = await Promise.all(
        ["error", "stack"].map((column) => db.stored("failed_jobs", id, column)),
      );
      assertNoSecret(`failed job ${row.name}`, row.error, row.stack, ...stored);
      assertNoSecret(`result() of ${row.name}`, (await queue.result(id))?.error);
    }
    assert.equal(failedEvents.length, ids.length + 1);
    for (const { error } of failedEvents) {
      if (error.message.includes("visible-key")) continue;
      const { issues, cause } = error as ValidationError;
      assertNoSecret("job:failed", error.message, error.stack, JSON.stringify(issues));
      assert.equal(cause, undefined, error.message);
    }
  },
);

storeTest(
  "Queue.dispatchSync() runs an encrypted job with the decrypted payload and stores nothing",
  async (db) => {
    const jobs = makeJobs();
    await using queue = await db.open({ jobs: [jobs.alpha], appKey: KEY_A });
    const payload = { secret: SECRET, n: 4, pad: "p" };
    await queue.dispatchSync(jobs.alpha, payload);
    assert.deepEqual(jobs.runs, [{ name: "enc.alpha", payload }]);
    assert.equal(await unfinishedCount(queue), 0);
  },
);

storeTest("Queue: middleware of an encrypted job sees the decrypted payload", async (db) => {
  const jobs = makeJobs();
  await using queue = await db.open({ jobs: [jobs.guarded], appKey: KEY_A });
  const payload = { secret: SECRET, n: 5 };
  await queue.dispatch(jobs.guarded, payload);
  const worker = queue.work({ executor: "isolate", stopWhenEmpty: true });
  await orQueueError(queue, worker.done);
  assert.deepEqual(worker.stats, { completed: 1, failed: 0, retried: 0 });
  assert.deepEqual(jobs.middlewareSaw, [payload]);
  assert.deepEqual(jobs.runs, [{ name: "enc.guarded", payload }]);
});

// ---------------------------------------------------------------------------
// S01: tampering

storeTest(
  "S01: a bit flip at every byte of a short payload's IV, ciphertext and tag fails its job for good, handler never run",
  async (db) => {
    const payload = { secret: SECRET, n: 1 };
    const length = jsonBytes(payload);
    const every = (n: number) => Array.from({ length: n }, (_, i) => i);
    const cases = bitFlipCases(payload, length, every);
    assert.equal(cases.length, 12 + length + 16);
    await assertTamperedJobsFail(db, cases);
  },
);

storeTest(
  "S01: sampled bit flips in a long payload's IV, ciphertext and tag fail their jobs for good",
  async (db) => {
    const payload = { secret: SECRET, n: 2, pad: "p".repeat(8_000) };
    const length = jsonBytes(payload);
    const sample = (
      n: number,
    ) => [...new Set([0, 1, Math.floor(n / 3), Math.floor(n / 2), n - 2, n - 1])];
    const cases = bitFlipCases(payload, length, sample);
    assert.ok(cases.length >= 15);
    await assertTamperedJobsFail(db, cases);
  },
);

storeTest(
  "S01: ciphertexts swapped between jobs of different names fail both (the name is bound)",
  async (db) => {
    await assertTamperedJobsFail(db, [
      { label: "alpha gets beta's", job: "alpha", detail: AUTH, tamper: (_, all) => all[1]! },
      { label: "beta gets alpha's", job: "beta", detail: AUTH, tamper: (_, all) => all[0]! },
      // The middleware path opens the payload before the handler would: still no run.
      { label: "guarded gets alpha's", job: "guarded", detail: AUTH, tamper: (_, all) => all[0]! },
    ]);
  },
);

storeTest("S01: truncated payloads fail their jobs for good", async (db) => {
  const cut = (stored: string, drop: number) => {
    const parsed = parse(stored);
    return build({ ...parsed, sealed: parsed.sealed.slice(0, parsed.sealed.length - drop) });
  };
  await assertTamperedJobsFail(db, [
    { label: "tag short by 1 byte", detail: AUTH, tamper: (s) => cut(s, 1) },
    { label: "whole tag gone", detail: AUTH, tamper: (s) => cut(s, 16) },
    {
      label: "under 16 bytes left",
      detail: MALFORMED,
      tamper: (s) => cut(s, parse(s).sealed.length - 15),
    },
    {
      label: "sealed part empty",
      detail: MALFORMED,
      tamper: (s) => cut(s, parse(s).sealed.length),
    },
    {
      label: "no sealed part",
      detail: MALFORMED,
      tamper: (s) => s.slice(0, s.lastIndexOf(":")),
    },
    { label: "prefix only", detail: MALFORMED, tamper: () => "enc1:" },
    { label: "empty text", detail: NOT_ENCRYPTED, tamper: () => "" },
  ]);
});

storeTest(
  "S01: a garbled format, key id, IV or field count fails its job for good",
  async (db) => {
    const idA = await keyIdOf(KEY_A);
    const otherId = idA.slice(0, -1) + (idA.endsWith("0") ? "1" : "0");
    const withIv = (s: string, iv: Uint8Array<ArrayBuffer>) => build({ ...parse(s), iv });
    // The queue's key comes from its appKey option, its previous keys from the environment.
    await assertTamperedJobsFail(db, [
      { label: "enc2 prefix", detail: NOT_ENCRYPTED, tamper: (s) => s.replace(/^enc1:/, "enc2:") },
      {
        label: "upper-case prefix",
        detail: NOT_ENCRYPTED,
        tamper: (s) => s.replace(/^enc1:/, "ENC1:"),
      },
      {
        label: "plaintext JSON in an encrypted job's row",
        detail: NOT_ENCRYPTED,
        tamper: () => JSON.stringify({ secret: "not-it", n: 1 }),
      },
      {
        label: "key id changed in its last digit",
        detail: new RegExp(
          `^it was encrypted with key ${otherId}, which is neither appKey nor in APP_PREVIOUS_KEYS$`,
        ),
        tamper: (s) => s.replace(`enc1:${idA}:`, `enc1:${otherId}:`),
      },
      {
        label: "key id of zeros",
        detail:
          /^it was encrypted with key 0{16}, which is neither appKey nor in APP_PREVIOUS_KEYS$/,
        tamper: (s) => s.replace(`enc1:${idA}:`, `enc1:${"0".repeat(16)}:`),
      },
      {
        label: "key id missing",
        detail: /^it was encrypted with key , which is neither appKey nor in APP_PREVIOUS_KEYS$/,
        tamper: (s) => s.replace(`enc1:${idA}:`, "enc1::"),
      },
      { label: "extra field", detail: MALFORMED, tamper: (s) => `${s}:AAAA` },
      {
        label: "IV not base64",
        detail: MALFORMED,
        tamper: (s) => s.replace(/^(enc1:[0-9a-f]+:)[^:]+:/, "$1!!!!not*base64!!!!:"),
      },
      {
        label: "IV of 11 bytes",
        detail: MALFORMED,
        tamper: (s) => withIv(s, parse(s).iv.slice(0, 11)),
      },
      { label: "IV of 16 bytes", detail: MALFORMED, tamper: (s) => withIv(s, new Uint8Array(16)) },
      {
        label: "sealed part not base64",
        detail: MALFORMED,
        tamper: (s) => s.replace(/:[^:]+$/, ":%%%%"),
      },
    ]);
  },
);

storeTest(
  "S01: in a Web Worker, a tampered job fails for good and its handler never runs; an untouched one runs",
  async (db) => {
    await using queue = await db.open({ jobs: JOBS_URL, appKey: KEY_A });
    using side = openSeen(db);
    const payload = (n: number) => ({ db: side.path, secret: SECRET, n });
    const [good, flipped, swapped] = [
      await queue.dispatch(secretJob, payload(0)),
      await queue.dispatch(secretJob, payload(1)),
      await queue.dispatch(secretJob, payload(2)),
    ];
    const other = await queue.dispatch(failingSecretJob, payload(3));
    const parsed = parse(await storedPayload(db, flipped!));
    const last = parsed.sealed.length - 1;
    await setPayload(db, flipped!, build({ ...parsed, sealed: flipBit(parsed.sealed, last, 7) }));
    await setPayload(db, swapped!, await storedPayload(db, other)); // sealed for "enc.fx.fails"
    await setPayload(db, other, (await storedPayload(db, good!)).replace(/^enc1:/, "enc9:"));
    const failedEvents = recordEvents(queue, "job:failed");
    const retryEvents = recordEvents(queue, "job:retry");
    const worker = queue.work({
      executor: "workers",
      workers: 2,
      concurrency: 4,
      stopWhenEmpty: true,
    });
    await worker.done;

    assert.deepEqual(worker.stats, { completed: 1, failed: 3, retried: 0 });
    assert.deepEqual(retryEvents, []);
    const seen = side.prepare("SELECT * FROM seen ORDER BY rowid").all() as unknown as SeenRow[];
    assert.deepEqual(
      seen.map(({ job_id, kind, payload, in_worker }) => ({ job_id, kind, in_worker, payload })),
      [{ job_id: good, kind: "handle", in_worker: 1, payload: JSON.stringify(payload(0)) }],
    );
    const failed = new Map((await queue.failed()).map((row) => [row.id, row]));
    const expectations: [number, string, RegExp][] = [
      [flipped!, "enc.fx.secret", AUTH],
      [swapped!, "enc.fx.secret", AUTH],
      [other, "enc.fx.fails", NOT_ENCRYPTED],
    ];
    for (const [id, name, detail] of expectations) {
      const row = failed.get(id);
      assert.ok(row, `job ${id} did not fail`);
      const prefix = `PayloadIntegrityError: Stored payload of "${name}" cannot be used: `;
      assert.ok(row.error.startsWith(prefix), row.error);
      assert.match(row.error.slice(prefix.length), detail);
      assert.equal(row.attempts, 1);
      assertNoSecret("failed row", row.payload, row.error, row.stack);
      const event = failedEvents.find((e) => e.id === id);
      assert.ok(event);
      assert.equal(event.error.name, "PayloadIntegrityError");
      assertNoSecret("job:failed", event.error.message, event.error.stack);
    }
  },
);

// ---------------------------------------------------------------------------
// Web Workers and the isolate executor

for (const executor of ["workers", "isolate"] as const) {
  storeTest(
    `Queue: encrypted jobs run with their payload in the ${executor} executor, and the failed hook sees it too`,
    async (db) => {
      await using queue = await db.open({ jobs: JOBS_URL, appKey: KEY_A });
      using side = openSeen(db);
      const payload = (n: number) => ({ db: side.path, secret: SECRET, n });
      const ids = await queue.dispatchMany(secretJob, [payload(0), payload(1), payload(2)]);
      const failing = await queue.dispatch(failingSecretJob, payload(3));
      const stored = await storedPayload(db, failing);
      const failedEvents = recordEvents(queue, "job:failed");
      const worker = queue.work({
        executor,
        ...(executor === "workers" && { workers: 2 }),
        concurrency: 4,
        stopWhenEmpty: true,
      });
      await worker.done;
      assert.deepEqual(worker.stats, { completed: 3, failed: 1, retried: 0 });

      const inWorker = executor === "workers" ? 1 : 0;
      const seen = side.prepare("SELECT * FROM seen ORDER BY job_id, kind DESC")
        .all() as unknown as SeenRow[];
      assert.deepEqual(
        seen.map(({ job_id, kind, payload, in_worker }) => ({ job_id, kind, in_worker, payload })),
        [
          ...ids.map((id, n) => ({
            job_id: id,
            kind: "handle",
            in_worker: inWorker,
            payload: JSON.stringify(payload(n)),
          })),
          {
            job_id: failing,
            kind: "handle",
            in_worker: inWorker,
            payload: JSON.stringify(payload(3)),
          },
          {
            job_id: failing,
            kind: "failed",
            in_worker: inWorker,
            payload: JSON.stringify(payload(3)),
          },
        ],
      );
      const [row] = await queue.failed();
      assert.equal(row?.id, failing);
      assert.equal(row.payload, stored);
      assert.equal(row.error, "Error: the handler gave up");
      assertNoSecret("failed row", row.payload, row.error, row.stack);
      assert.equal(failedEvents.length, 1);
      assertNoSecret("job:failed", failedEvents[0]!.error.message, failedEvents[0]!.error.stack);
    },
  );
}

// ---------------------------------------------------------------------------
// S02: rotation

/** Opens the fixture jobs' queue with these keys, through the options or through the environment. */
function openWithKeys(
  db: StoreContext,
  via: "options" | "env",
  current: string,
  previous: readonly string[],
): Promise<Queue> {
  if (via === "options") {
    return db.open({ jobs: JOBS_URL, appKey: current, previousAppKeys: previous });
  }
  return withEnv({
    APP_KEY: current,
    // A `base64:` prefix and spaces around the commas are allowed.
    APP_PREVIOUS_KEYS: previous.length === 0
      ? undefined
      : previous.map((key) => ` base64:${key} `).join(",") + ",",
  }, () => db.open({ jobs: JOBS_URL }));
}

for (
  const [via, executor] of [["options", "isolate"], ["env", "workers"]] as const
) {
  storeTest(
    `S02: rotating APP_KEY (keys through ${via}, ${executor} executor): old jobs run with the old key listed, fail naming it once dropped`,
    async (db) => {
      const [idA, idB] = [await keyIdOf(KEY_A), await keyIdOf(KEY_B)];
      // The failure names the keys where they were set.
      const keysNamed = via === "options"
        ? "appKey nor in previousAppKeys"
        : "APP_KEY nor in APP_PREVIOUS_KEYS";
      using side = openSeen(db);
      const payload = (n: number) => ({ db: side.path, secret: SECRET, n });
      const work = async (queue: Queue, queues: string[]) => {
        const worker = queue.work({
          executor,
          ...(executor === "workers" && { workers: 1 }),
          queues,
          stopWhenEmpty: true,
        });
        await worker.done;
        return worker.stats;
      };
      const seenIds = () =>
        (side.prepare("SELECT job_id FROM seen WHERE kind = 'handle' ORDER BY job_id").all() as {
          job_id: number;
        }[]).map((row) => row.job_id);

      // 1. Under key A.
      let aNow: number[], aLater: number[];
      {
        await using queue = await openWithKeys(db, via, KEY_A, []);
        aNow = await queue.dispatchMany(secretJob, [payload(1), payload(2)], { queue: "now" });
        aLater = await queue.dispatchMany(secretJob, [payload(3), payload(4)], { queue: "later" });
      }
      for (const id of [...aNow, ...aLater]) {
        assert.equal(parse(await storedPayload(db, id)).keyId, idA);
      }

      // 2. APP_KEY = B, A in APP_PREVIOUS_KEYS: the A jobs run; new ones are sealed with B.
      let bNow: number, bLater: number;
      {
        await using queue = await openWithKeys(db, via, KEY_B, [KEY_A]);
        bNow = await queue.dispatch(secretJob, payload(5), { queue: "now" });
        bLater = await queue.dispatch(secretJob, payload(6), { queue: "later" });
        assert.equal(parse(await storedPayload(db, bNow)).keyId, idB);
        assert.equal(parse(await storedPayload(db, bLater)).keyId, idB);
        assert.deepEqual(await work(queue, ["now"]), { completed: 3, failed: 0, retried: 0 });
        assert.deepEqual(seenIds(), [...aNow, bNow].sort((x, y) => x - y));
      }
      const seenPayloads = side.prepare("SELECT payload FROM seen ORDER BY job_id").all() as {
        payload: string;
      }[];
      assert.deepEqual(seenPayloads.map((row) => JSON.parse(row.payload).n), [1, 2, 5]);

      // 3. Only B: the jobs still sealed with A fail for good naming key A; B's runs.
      {
        await using queue = await openWithKeys(db, via, KEY_B, []);
        const retries = recordEvents(queue, "job:retry");
        assert.deepEqual(await work(queue, ["later"]), { completed: 1, failed: 2, retried: 0 });
        assert.deepEqual(retries, []);
        assert.deepEqual(seenIds(), [...aNow, bNow, bLater].sort((x, y) => x - y));
        const failed = await queue.failed();
        assert.deepEqual(failed.map((row) => row.id).sort((x, y) => x - y), aLater);
        for (const row of failed) {
          assert.equal(
            row.error,
            `PayloadIntegrityError: Stored payload of "enc.fx.secret" cannot be used: it was encrypted with key ${idA}, which is neither ${keysNamed}`,
          );
          assert.equal(row.attempts, 1);
          assertNoSecret("failed row", row.payload, row.error, row.stack);
        }
        assert.equal(await unfinishedCount(queue), 0);
      }
    },
  );
}

// ---------------------------------------------------------------------------
// Queue.open and keys. Refusing a key, and which variables are read, are
// settled before a store is opened: those tests run once, on SQLite's :memory:.

Deno.test("Queue.open() refuses to start without APP_KEY when an encrypted job is registered, naming APP_KEY (appKey when given empty) and the jobs", async () => {
  const jobs = makeJobs();
  await withEnv({ APP_KEY: undefined, APP_PREVIOUS_KEYS: undefined }, async () => {
    for (const appKey of [undefined, ""]) {
      await assert.rejects(
        Queue.open({
          path: ":memory:",
          jobs: [jobs.plain, jobs.alpha, jobs.beta],
          ...(appKey !== undefined && { appKey }),
        }),
        (error: Error) => {
          assert.ok(error instanceof TypeError, String(error));
          const name = appKey === undefined ? "APP_KEY" : "appKey";
          assert.ok(error.message.startsWith(`${name} is not set`), error.message);
          assert.ok(error.message.includes('"enc.alpha"'), error.message);
          assert.ok(error.message.includes('"enc.beta"'), error.message);
          assert.ok(!error.message.includes("plain.job"), error.message);
          return true;
        },
      );
    }
  });
});

Deno.test("Queue.open() refuses malformed keys naming where each was set (appKey, previousAppKeys[i], APP_KEY, APP_PREVIOUS_KEYS[i] counting empty entries), never printing the key", async () => {
  const jobs = makeJobs();
  const short = crypto.getRandomValues(new Uint8Array(16)).toBase64();
  const long = crypto.getRandomValues(new Uint8Array(33)).toBase64();
  const notBase64 = `not*base64*${crypto.randomUUID()}`;
  const cases: {
    label: string;
    appKey?: string;
    previousAppKeys?: string[];
    env?: Record<string, string>;
    name: string;
    bad: string;
    detail: RegExp | null;
  }[] = [
    { label: "16-byte appKey", appKey: short, name: "appKey", bad: short, detail: /16 bytes/ },
    { label: "33-byte appKey", appKey: long, name: "appKey", bad: long, detail: /33 bytes/ },
    {
      label: "appKey not base64",
      appKey: notBase64,
      name: "appKey",
      bad: notBase64,
      detail: null,
    },
    {
      label: "previous[0] short",
      appKey: KEY_A,
      previousAppKeys: [short],
      name: "previousAppKeys[0]",
      bad: short,
      detail: /16 bytes/,
    },
    {
      label: "previous[1] not base64",
      appKey: KEY_A,
      previousAppKeys: [KEY_B, notBase64],
      name: "previousAppKeys[1]",
      bad: notBase64,
      detail: null,
    },
    {
      label: "env APP_KEY short",
      env: { APP_KEY: short },
      name: "APP_KEY",
      bad: short,
      detail: /16 bytes/,
    },
    {
      label: "env APP_PREVIOUS_KEYS[0] not base64",
      env: { APP_KEY: KEY_A, APP_PREVIOUS_KEYS: notBase64 },
      name: "APP_PREVIOUS_KEYS[0]",
      bad: notBase64,
      detail: null,
    },
    {
      label: "env APP_PREVIOUS_KEYS[1] long",
      env: { APP_KEY: KEY_A, APP_PREVIOUS_KEYS: `${KEY_B},${long}` },
      name: "APP_PREVIOUS_KEYS[1]",
      bad: long,
      detail: /33 bytes/,
    },
    {
      label: "env APP_PREVIOUS_KEYS[2] long, after an empty entry",
      env: { APP_KEY: KEY_A, APP_PREVIOUS_KEYS: `${KEY_B}, ,${long}` },
      name: "APP_PREVIOUS_KEYS[2]",
      bad: long,
      detail: /33 bytes/,
    },
    {
      label: "appKey given, env APP_PREVIOUS_KEYS[1] short",
      appKey: KEY_A,
      env: { APP_PREVIOUS_KEYS: `,${short}` },
      name: "APP_PREVIOUS_KEYS[1]",
      bad: short,
      detail: /16 bytes/,
    },
  ];
  for (const c of cases) {
    await withEnv({ APP_KEY: undefined, APP_PREVIOUS_KEYS: undefined, ...c.env }, async () => {
      await assert.rejects(
        Queue.open({
          path: ":memory:",
          jobs: [jobs.alpha],
          ...(c.appKey !== undefined && { appKey: c.appKey }),
          ...(c.previousAppKeys !== undefined && { previousAppKeys: c.previousAppKeys }),
        }),
        (error: Error) => {
          assert.ok(error instanceof TypeError, `${c.label}: ${error}`);
          assert.ok(
            error.message.startsWith(`${c.name} must be the base64 of 32 random bytes`),
            `${c.label}: ${error.message}`,
          );
          if (c.detail === null) assert.ok(!error.message.includes("decodes to"), c.label);
          else assert.match(error.message, c.detail, c.label);
          for (const key of [c.bad, KEY_A, KEY_B]) {
            assert.ok(!error.message.includes(key), `${c.label}: the message shows a key`);
            assert.ok(!(error.stack ?? "").includes(key), `${c.label}: the stack shows a key`);
          }
          return true;
        },
      );
    });
  }
});

Deno.test("Queue.open() without an encrypted job needs no key, and leaves an APP_KEY that is not one of its keys unused", async () => {
  const jobs = makeJobs();
  await withEnv({ APP_KEY: "garbage!", APP_PREVIOUS_KEYS: "more,garbage" }, async () => {
    {
      await using queue = await Queue.open({ path: ":memory:", jobs: [jobs.plain] });
      await queue.dispatch(jobs.plain, { n: 1 });
      const worker = queue.work({ executor: "isolate", stopWhenEmpty: true });
      await worker.done;
      assert.equal(worker.stats.completed, 1);
    }
    // With an encrypted job registered, the same environment is refused.
    await assert.rejects(
      Queue.open({ path: ":memory:", jobs: [jobs.plain, jobs.alpha] }),
      /^TypeError: APP_KEY must be the base64/,
    );
  });
  await withEnv({ APP_KEY: undefined, APP_PREVIOUS_KEYS: undefined }, async () => {
    await using queue = await Queue.open({ path: ":memory:", jobs: [jobs.plain] });
    assert.equal(await queue.dispatch(jobs.plain, { n: 2 }), 1);
  });
});

Deno.test("Queue.open() without an encrypted job reads no APP_KEY it may not read, and never prompts for it", async () => {
  const script = `
    import { Queue } from ${JSON.stringify(new URL("../../mod.ts", import.meta.url).href)};
    await using queue = await Queue.open({ path: ":memory:", jobs: [] });
    console.log(String(await queue.result(1)));
  `;
  const output = await new Deno.Command(Deno.execPath(), {
    args: [
      "eval",
      "--no-prompt",
      "--allow-env=NO_COLOR",
      "--allow-read",
      "--allow-write",
      "--allow-ffi",
      script,
    ],
    env: { APP_KEY: KEY_A },
    stdin: "null",
  }).output();
  const stderr = new TextDecoder().decode(output.stderr);
  assert.equal(output.code, 0, stderr);
  assert.equal(new TextDecoder().decode(output.stdout).trim(), "null");
});

storeTest(
  "APP_KEY in the environment serves a process with only plain jobs: result() opens an encrypted job's output (APP_PREVIOUS_KEYS alone too), signals to it are sealed (with APP_KEY only), and a job turned encrypted: false runs its sealed payload",
  async (db) => {
    const charge = (encrypted: boolean) =>
      defineJob({
        name: "enc.off.charge",
        schema: z.object({ card: z.string() }),
        output: z.string(),
        encrypted,
        maxAttempts: 1,
        handle: ({ card }) => `charged ${card.length}`,
      });
    const [on, off] = [charge(true), charge(false)];
    const plain = makeJobs().plain;
    await withEnv({ APP_KEY: KEY_A, APP_PREVIOUS_KEYS: undefined }, async () => {
      let done: number, queued: number, parked: number;
      {
        await using queue = await db.open({ jobs: [on] });
        done = await queue.dispatch(on, { card: SECRET });
        await queue.drain({ maxTimeMs: 20_000 });
        queued = await queue.dispatch(on, { card: "4111" });
        parked = await queue.dispatch(on, { card: "4242" }, { delayMs: 3_600_000 });
      }
      {
        // A webhook or reader: only plain jobs registered.
        await using queue = await db.open({ jobs: [plain] });
        const result = await queue.result(done);
        assert.equal(result?.state, "completed");
        assert.equal(result?.output, `charged ${SECRET.length}`);
        assert.equal(result?.outputWithheld, undefined);
        assert.equal(await queue.signal(parked, "go", { secret: SECRET }), "buffered");
      }
      await withEnv({ APP_KEY: `base64:${KEY_B}` }, async () => {
        // Another app's well-formed key: a signal it would seal could never be opened by the job.
        await using queue = await db.open({ jobs: [plain] });
        await assert.rejects(
          queue.signal(parked, "go", { secret: SECRET }),
          /job \d+ is encrypted, and so must its signals be: set APP_KEY to the key it was dispatched with \(its key is neither APP_KEY nor in APP_PREVIOUS_KEYS\)$/,
        );
      });
      await withEnv({ APP_KEY: undefined, APP_PREVIOUS_KEYS: `${KEY_B},${KEY_A}` }, async () => {
        // The key rotated away: previous keys alone still open what they sealed, and seal nothing.
        await using queue = await db.open({ jobs: [plain] });
        assert.equal((await queue.result(done))?.output, `charged ${SECRET.length}`);
        await assert.rejects(
          queue.signal(parked, "go", { secret: SECRET }),
          /job \d+ is encrypted, and so must its signals be: set APP_KEY to the key it was dispatched with \(this queue has only APP_PREVIOUS_KEYS, which never seal\)$/,
        );
      });
      {
        // A redeploy that turned `encrypted` off: the sealed payload still opens.
        await using queue = await db.open({ jobs: [off] });
        await queue.drain({ maxTimeMs: 20_000 });
        const result = await queue.result(queued);
        assert.equal(result?.state, "completed", JSON.stringify(result));
        assert.equal(result?.output, "charged 4");
        assert.deepEqual(await queue.failed(), []);
      }
    });
  },
);

storeTest(
  "a process with no encrypted job leaves unused only the values that are not keys: the well-formed keys beside one still open what they sealed, and APP_KEY still seals",
  async (db) => {
    const sealed = defineJob({
      name: "enc.beside.charge",
      schema: z.object({ card: z.string() }),
      output: z.string(),
      encrypted: true,
      handle: ({ card }) => `charged ${card.length}`,
    });
    const plain = makeJobs().plain;
    await withEnv({ APP_KEY: undefined, APP_PREVIOUS_KEYS: undefined }, async () => {
      let done: number, parked: number;
      {
        await using queue = await db.open({ jobs: [sealed], appKey: KEY_A });
        done = await queue.dispatch(sealed, { card: SECRET });
        await queue.drain({ maxTimeMs: 20_000 });
        parked = await queue.dispatch(sealed, { card: SECRET }, { delayMs: 3_600_000 });
      }
      const cases: [env: Record<string, string | undefined>, previousAppKeys?: string[]][] = [
        [{ APP_KEY: KEY_A, APP_PREVIOUS_KEYS: "garbage" }],
        [{ APP_KEY: KEY_A, APP_PREVIOUS_KEYS: `${KEY_B},garbage` }],
        [{ APP_KEY: undefined, APP_PREVIOUS_KEYS: `garbage,${KEY_A}` }],
        [{ APP_KEY: "garbage!", APP_PREVIOUS_KEYS: KEY_A }],
        [{ APP_KEY: undefined, APP_PREVIOUS_KEYS: undefined }, ["garbage", KEY_A]],
      ];
      for (const [env, previousAppKeys] of cases) {
        const label = JSON.stringify({ ...env, previousAppKeys });
        await withEnv(env, async () => {
          await using queue = await db.open({
            jobs: [plain],
            ...(previousAppKeys !== undefined && { previousAppKeys }),
          });
          const result = await queue.result(done);
          assert.equal(
            result?.output,
            `charged ${SECRET.length}`,
            `${label}: ${JSON.stringify(result)}`,
          );
          assert.equal(result?.outputWithheld, undefined, label);
        });
      }
      await withEnv({ APP_KEY: KEY_A, APP_PREVIOUS_KEYS: "garbage" }, async () => {
        await using queue = await db.open({ jobs: [plain] });
        assert.equal(await queue.signal(parked, "go", { secret: SECRET }), "buffered");
      });
    });
  },
);

storeTest(
  "queue.signal() to an encrypted job it cannot seal for names the keys where they were set: the options when given, else the variables",
  async (db) => {
    const sealed = defineJob({
      name: "enc.signal.names",
      schema: z.object({ card: z.string() }),
      encrypted: true,
      handle() {},
    });
    const plain = makeJobs().plain;
    await withEnv({ APP_KEY: undefined, APP_PREVIOUS_KEYS: undefined }, async () => {
      let parked: number;
      {
        await using queue = await db.open({ jobs: [sealed], appKey: KEY_A });
        parked = await queue.dispatch(sealed, { card: SECRET }, { delayMs: 3_600_000 });
      }
      const refused = (why: string) =>
        new RegExp(
          `^Error: queue\\.signal: job ${parked} is encrypted, and so must its signals be: ${why}$`,
        );
      const cases: [options: { appKey?: string; previousAppKeys?: string[] }, why: string][] = [
        [
          { appKey: KEY_B },
          "set appKey to the key it was dispatched with \\(its key is neither appKey nor in APP_PREVIOUS_KEYS\\)",
        ],
        [
          { appKey: KEY_B, previousAppKeys: [generateAppKey()] },
          "set appKey to the key it was dispatched with \\(its key is neither appKey nor in previousAppKeys\\)",
        ],
        [
          { previousAppKeys: [KEY_B] },
          "set APP_KEY to the key it was dispatched with \\(this queue has only previousAppKeys, which never seal\\)",
        ],
        [
          {},
          "set APP_KEY \\(or Queue\\.open's appKey\\) to the key it was dispatched with \\(this queue has none\\)",
        ],
      ];
      for (const [options, why] of cases) {
        await using queue = await db.open({ jobs: [plain], ...options });
        await assert.rejects(queue.signal(parked, "go", { secret: SECRET }), refused(why));
      }
      await using keyed = await db.open({ jobs: [plain], appKey: KEY_A });
      assert.equal(await keyed.signal(parked, "go", { secret: SECRET }), "buffered");
    });
  },
);

storeTest(
  "An encrypted job's output swapped for plaintext at rest is refused by result() and by a flow child's ctx.parents, as a payload is",
  async (db) => {
    const FORGED = JSON.stringify("forged");
    const parentsSeen: unknown[] = [];
    const parent = defineJob({
      name: "enc.out.parent",
      schema: z.object({ n: z.number() }),
      output: z.string(),
      encrypted: true,
      maxAttempts: 1,
      handle: ({ n }) => `real ${n}`,
    });
    const child = defineJob({
      name: "enc.out.child",
      schema: z.object({}),
      maxAttempts: 1,
      handle: (_payload, ctx) => void parentsSeen.push(ctx.parents),
    });
    await using queue = await db.open({ jobs: [parent, child], appKey: KEY_A });
    const done = await queue.dispatch(parent, { n: 1 });
    await queue.drain({ maxTimeMs: 20_000 });
    assert.equal((await queue.result(done))?.output, "real 1");
    await db.setStored("completed_jobs", done, "output", FORGED);
    await assert.rejects(queue.result(done), (error: unknown) => {
      assert.ok(error instanceof PayloadIntegrityError, String(error));
      assert.equal(
        error.message,
        `Stored output of "enc.out.parent" cannot be used: expected an encrypted output`,
      );
      return true;
    });

    const flow = queue.flow("enc.out.flow");
    const a = flow.add(parent, { n: 2 }, { key: "a" });
    flow.add(child, {}, { after: [a] });
    await flow.dispatch();
    await queue.drain({ maxJobs: 1, maxTimeMs: 20_000 });
    const [waiting] = (await queue.jobs({ name: child.name })).jobs;
    assert.ok(waiting !== undefined);
    const carried = JSON.parse((await db.stored("jobs", waiting.id, "flow_parents"))!) as {
      outputs: Record<string, { output: string | null }>;
    };
    for (const node of Object.values(carried.outputs)) node.output = FORGED;
    await db.setStored("jobs", waiting.id, "flow_parents", JSON.stringify(carried));
    await queue.drain({ maxTimeMs: 20_000 });
    assert.deepEqual(parentsSeen, []);
    const failed = await queue.failed();
    assert.equal(failed.length, 1);
    assert.match(failed[0]!.error, /expected an encrypted output/);
  },
);

storeTest(
  "Queue.open() takes APP_KEY and APP_PREVIOUS_KEYS from the environment; the options win over it",
  async (db) => {
    const jobs = makeJobs();
    const [idA, idB] = [await keyIdOf(KEY_A), await keyIdOf(KEY_B)];
    await withEnv({ APP_KEY: KEY_A, APP_PREVIOUS_KEYS: undefined }, async () => {
      {
        await using queue = await db.open({ jobs: [jobs.alpha] });
        const id = await queue.dispatch(jobs.alpha, { secret: SECRET, n: 1 });
        assert.equal(parse(await storedPayload(db, id)).keyId, idA);
      }
      {
        await using queue = await db.open({ jobs: [jobs.alpha], appKey: KEY_B });
        const id = await queue.dispatch(jobs.alpha, { secret: SECRET, n: 1 });
        assert.equal(parse(await storedPayload(db, id)).keyId, idB);
      }
    });
  },
);

// ---------------------------------------------------------------------------
// CLI

Deno.test("CLI: key:generate prints one base64 line of 32 bytes and exits 0; two runs differ", async () => {
  const runs = await Promise.all([runCli(["key:generate"]), runCli(["key:generate"])]);
  const keys = runs.map(({ code, stdout, stderr }) => {
    assert.equal(code, 0, stderr);
    assert.equal(stderr, "");
    assert.match(stdout, /^[A-Za-z0-9+/]{43}=\n$/);
    const key = stdout.trimEnd();
    assert.equal(key.length, 44);
    assert.equal(Uint8Array.fromBase64(key).length, 32);
    return key;
  });
  assert.notEqual(keys[0], keys[1]);
  // What it prints is a key the queue takes.
  const cipher = await cipherOf(keys[0]!, [keys[1]!]);
  assert.equal(cipher.keyId, await keyIdOf(keys[0]!));
  assert.equal(generateAppKey().length, 44);
});
