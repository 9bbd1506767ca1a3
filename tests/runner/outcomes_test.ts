import assert from "node:assert/strict";
import { z } from "zod";
import { PermanentError } from "../../src/errors.ts";
import { defineJob } from "../../src/job.ts";
import {
  cancelled,
  expired,
  expiryBeforeStart,
  failBeforeStart,
  outcomeOf,
  putBack,
  putBackUnstarted,
  refusalBeforeStart,
  storedError,
} from "../../src/runner/outcomes.ts";
import type { ClaimedJob, Settlement } from "../../src/stores/store.ts";

const NOW = Date.UTC(2026, 0, 1);

const mail = defineJob({
  name: "mail",
  schema: z.object({ to: z.string() }),
  maxAttempts: 3,
  maxCrashes: 2,
  backoff: [1_000, 5_000],
  jitter: 0,
  handle() {},
});

/** A job as a claim hands it over, first attempt, overridable field by field. */
function claimed(fields: Partial<ClaimedJob> = {}): ClaimedJob {
  return {
    id: 7,
    queue: "default",
    name: "mail",
    payload: '{"to":"a@example.com"}',
    priority: 0,
    attempts: 1,
    crashes: 0,
    recovered: false,
    retryUntil: null,
    lastError: null,
    createdAt: NOW - 1_000,
    batchId: null,
    token: 42,
    ...fields,
  };
}

// refusalBeforeStart

Deno.test("refusalBeforeStart() lets a fresh claim run", () => {
  assert.equal(refusalBeforeStart(claimed(), mail, NOW), null);
});

Deno.test("refusalBeforeStart() refuses a job no definition in this process knows", () => {
  assert.equal(
    refusalBeforeStart(claimed({ name: "ghost" }), undefined, NOW),
    'no job named "ghost" is registered in the process that claimed it',
  );
});

Deno.test("refusalBeforeStart() lets the last allowed attempt run", () => {
  assert.equal(refusalBeforeStart(claimed({ attempts: 3 }), mail, NOW), null);
});

Deno.test("refusalBeforeStart() refuses a job released as many times as maxAttempts", () => {
  assert.equal(
    refusalBeforeStart(claimed({ attempts: 4 }), mail, NOW),
    "attempts spent: released 3 times",
  );
});

Deno.test("refusalBeforeStart() says the worker died when the last attempt was cut by a crash", () => {
  const job = claimed({ attempts: 4, crashes: 1, recovered: true });
  assert.equal(
    refusalBeforeStart(job, mail, NOW),
    "attempts spent: worker died during its last attempt",
  );
});

Deno.test("refusalBeforeStart() lets a job run after fewer crashes than maxCrashes", () => {
  assert.equal(
    refusalBeforeStart(claimed({ attempts: 2, crashes: 1, recovered: true }), mail, NOW),
    null,
  );
});

Deno.test("refusalBeforeStart() refuses a job whose workers crashed maxCrashes times", () => {
  assert.equal(
    refusalBeforeStart(claimed({ attempts: 3, crashes: 2, recovered: true }), mail, NOW),
    "worker crashed while running it: 2 of 2 crashes allowed",
  );
});

Deno.test("refusalBeforeStart() names the crashes before the attempts when both are spent", () => {
  const job = claimed({ attempts: 4, crashes: 2, recovered: true });
  assert.match(refusalBeforeStart(job, mail, NOW) ?? "", /^worker crashed while running it/);
});

Deno.test("expiryBeforeStart() expires a job never started once its expiry is reached", () => {
  const expireAt = NOW - 1;
  assert.equal(
    expiryBeforeStart(claimed({ expireAt }), NOW),
    `expired: not started by ${new Date(expireAt).toISOString()}`,
  );
  assert.match(expiryBeforeStart(claimed({ expireAt: NOW }), NOW) ?? "", /^expired: /);
  assert.equal(expiryBeforeStart(claimed({ expireAt: NOW + 1 }), NOW), null, "not yet");
  assert.equal(expiryBeforeStart(claimed({ expireAt: null }), NOW), null, "no expiry");
  assert.equal(expiryBeforeStart(claimed(), NOW), null, "none stored");
});

Deno.test("expiryBeforeStart() never expires a job that started before: a retry or a recovery", () => {
  const expireAt = NOW - 1;
  assert.equal(expiryBeforeStart(claimed({ expireAt, attempts: 2 }), NOW), null);
  assert.equal(
    expiryBeforeStart(claimed({ expireAt, attempts: 2, crashes: 1, recovered: true }), NOW),
    null,
  );
});

Deno.test("expired() settles as a cancel marked expired, its claim's attempt given back, kept until keepUntil", () => {
  const outcome = expired(claimed({ token: 9 }), "expired: late", NOW, NOW + 5_000);
  assert.deepEqual(outcome, {
    kind: "cancelled",
    reason: "expired: late",
    settlement: {
      kind: "cancel",
      id: 7,
      token: 9,
      at: NOW,
      reason: "expired: late",
      keepUntil: NOW + 5_000,
      refundAttempt: true,
      expired: true,
    },
  });
});

Deno.test("cancelled() gives the claim's attempt back only for a handler not started", () => {
  const job = claimed({ token: 9, attempts: 2 });
  const settlement = (handler: "started" | "not started") => {
    const outcome = cancelled(job, "asked", NOW, NOW + 5_000, handler);
    return outcome.kind === "cancelled" ? outcome.settlement : null;
  };
  const base = {
    kind: "cancel",
    id: 7,
    token: 9,
    at: NOW,
    reason: "asked",
    keepUntil: NOW + 5_000,
  };
  assert.deepEqual(settlement("started"), base);
  assert.deepEqual(settlement("not started"), { ...base, refundAttempt: true });
});

Deno.test("refusalBeforeStart() refuses a job whose retry deadline has passed", () => {
  const retryUntil = NOW - 1;
  assert.equal(
    refusalBeforeStart(claimed({ attempts: 2, retryUntil }), mail, NOW),
    `retry deadline passed at ${new Date(retryUntil).toISOString()}`,
  );
});

Deno.test("refusalBeforeStart() counts a retry deadline reached exactly as passed, as outcomeOf does", () => {
  assert.match(
    refusalBeforeStart(claimed({ attempts: 2, retryUntil: NOW }), mail, NOW) ?? "",
    /retry deadline passed/,
  );
  assert.equal(refusalBeforeStart(claimed({ attempts: 2, retryUntil: NOW + 1 }), mail, NOW), null);
});

Deno.test("refusalBeforeStart() never spends the attempts of a job with maxAttempts Infinity", () => {
  const forever = defineJob({
    name: "forever",
    schema: z.null(),
    maxAttempts: Infinity,
    retryUntil: (at) => new Date(at.getTime() + 60_000),
    handle() {},
  });
  const job = claimed({ name: "forever", attempts: 1_000, retryUntil: NOW + 1 });
  assert.equal(refusalBeforeStart(job, forever, NOW), null);
});

// failBeforeStart

Deno.test("failBeforeStart() fails the job with the reason and records only the starts so far", () => {
  const outcome = failBeforeStart(
    claimed({ attempts: 4 }),
    "attempts spent: released 3 times",
    NOW,
  );
  assert.equal(outcome.kind, "fail");
  assert.ok(outcome.kind === "fail" && outcome.error instanceof Error);
  assert.equal(
    outcome.kind === "fail" && outcome.error.message,
    "attempts spent: released 3 times",
  );
  assert.deepEqual(outcome.settlement, {
    kind: "fail",
    id: 7,
    token: 42,
    error: { message: "Error: attempts spent: released 3 times", stack: null },
    attempts: 3,
    at: NOW,
  });
});

// outcomeOf

Deno.test("outcomeOf() completes a job whose handler succeeded", () => {
  assert.deepEqual(outcomeOf(claimed(), mail, { kind: "success" }, NOW), {
    kind: "complete",
    settlement: { kind: "complete", id: 7, token: 42, at: NOW },
  });
});

Deno.test("outcomeOf() puts a released job back after its delay, counting the attempt", () => {
  assert.deepEqual(outcomeOf(claimed(), mail, { kind: "release", delayMs: 2_500 }, NOW), {
    kind: "retry",
    error: null,
    delayMs: 2_500,
    settlement: {
      kind: "release",
      id: 7,
      token: 42,
      availableAt: NOW + 2_500,
      error: null,
      refundAttempt: false,
      at: NOW,
    },
  });
});

Deno.test("outcomeOf() puts a job whose handler held its group back after the hold, its attempt given back", () => {
  const result = { kind: "release", delayMs: 30_000, holdsGroup: true } as const;
  assert.deepEqual(outcomeOf(claimed({ attempts: 3 }), mail, result, NOW), {
    kind: "retry",
    error: null,
    delayMs: 30_000,
    settlement: {
      kind: "release",
      id: 7,
      token: 42,
      availableAt: NOW + 30_000,
      error: "held back: its group was rate-limited by its handler",
      refundAttempt: true,
      started: true,
      holdsGroup: true,
      at: NOW,
    },
  });
});

Deno.test("outcomeOf() releases even on the last attempt: the next pickup decides", () => {
  const outcome = outcomeOf(claimed({ attempts: 3 }), mail, { kind: "release", delayMs: 0 }, NOW);
  assert.equal(outcome.kind, "retry");
  assert.equal(outcome.settlement.kind, "release");
});

Deno.test("outcomeOf() retries a thrown error after the backoff of the attempt that failed", () => {
  const error = new Error("smtp down");
  const first = outcomeOf(claimed(), mail, { kind: "error", error, permanent: false }, NOW);
  assert.deepEqual(first, {
    kind: "retry",
    error,
    delayMs: 1_000,
    settlement: {
      kind: "release",
      id: 7,
      token: 42,
      availableAt: NOW + 1_000,
      error: "Error: smtp down",
      refundAttempt: false,
      at: NOW,
    },
  });
  const second = outcomeOf(
    claimed({ attempts: 2 }),
    mail,
    { kind: "error", error, permanent: false },
    NOW,
  );
  assert.equal(second.kind === "retry" && second.delayMs, 5_000);
});

Deno.test("outcomeOf() spreads the retry delay with the random source it is given", () => {
  const jittery = defineJob({
    name: "jittery",
    schema: z.null(),
    backoff: [1_000],
    jitter: 0.5,
    handle() {},
  });
  const result = { kind: "error", error: new Error("x"), permanent: false } as const;
  const low = outcomeOf(claimed({ name: "jittery" }), jittery, result, NOW, () => 0);
  const high = outcomeOf(claimed({ name: "jittery" }), jittery, result, NOW, () => 1);
  assert.equal(low.kind === "retry" && low.delayMs, 500);
  assert.equal(high.kind === "retry" && high.delayMs, 1_500);
  assert.equal(low.settlement.kind === "release" && low.settlement.availableAt, NOW + 500);
});

Deno.test("outcomeOf() fails a permanent error at once, recording the attempts", () => {
  const error = new PermanentError("card declined");
  const outcome = outcomeOf(claimed(), mail, { kind: "error", error, permanent: true }, NOW);
  assert.equal(outcome.kind, "fail");
  assert.equal(outcome.kind === "fail" && outcome.error, error);
  assert.deepEqual(outcome.settlement, {
    kind: "fail",
    id: 7,
    token: 42,
    error: { message: "PermanentError: card declined", stack: error.stack ?? null },
    attempts: 1,
    at: NOW,
  });
});

Deno.test("outcomeOf() fails an error on the last allowed attempt", () => {
  const error = new Error("still down");
  const outcome = outcomeOf(
    claimed({ attempts: 3 }),
    mail,
    { kind: "error", error, permanent: false },
    NOW,
  );
  assert.equal(outcome.kind, "fail");
  assert.equal(outcome.settlement.kind === "fail" && outcome.settlement.attempts, 3);
});

Deno.test("outcomeOf() fails an error once the retry deadline is reached, attempts left or not", () => {
  const result = { kind: "error", error: new Error("late"), permanent: false } as const;
  const atDeadline = outcomeOf(claimed({ retryUntil: NOW }), mail, result, NOW);
  const pastDeadline = outcomeOf(claimed({ retryUntil: NOW - 1 }), mail, result, NOW);
  const beforeDeadline = outcomeOf(claimed({ retryUntil: NOW + 1 }), mail, result, NOW);
  assert.equal(atDeadline.kind, "fail");
  assert.equal(pastDeadline.kind, "fail");
  assert.equal(beforeDeadline.kind, "retry");
});

// putBack

Deno.test("putBack() puts the job back at once and gives its attempt back, marked started", () => {
  const why = new Error("worker stopped during the attempt");
  assert.deepEqual(putBack(claimed({ attempts: 2 }), NOW, why), {
    kind: "retry",
    error: why,
    delayMs: 0,
    settlement: {
      kind: "release",
      id: 7,
      token: 42,
      availableAt: NOW,
      error: "worker stopped during the attempt",
      refundAttempt: true,
      started: true,
      at: NOW,
    },
  });
});

// storedError

Deno.test("putBackUnstarted() gives a job back due when its claim found it due, never later than now, with its claim's lease for the store", () => {
  const leaseMs = 30_000;
  const back = (job: ClaimedJob, claimNow: number | undefined) => {
    const outcome = putBackUnstarted(job, NOW, { now: claimNow, leaseMs }, "worker stopped");
    assert.equal(outcome.kind, "notStarted");
    const settlement = outcome.settlement as Extract<Settlement, { kind: "release" }>;
    assert.deepEqual(
      [settlement.at, settlement.refundAttempt, settlement.unclaimedLeaseMs, settlement.error],
      [NOW, true, leaseMs, "worker stopped"],
    );
    return settlement.availableAt;
  };
  // Claimed 5 s ago, 2 s after it was due: due 7 s ago.
  assert.equal(back(claimed({ waitedMs: 2_000 }), NOW - 5_000), NOW - 7_000);
  assert.equal(back(claimed({ waitedMs: 0 }), NOW - 5_000), NOW - 5_000);
  // No claim noted (its time unknown): its wait before now.
  assert.equal(back(claimed({ waitedMs: 2_000 }), undefined), NOW - 2_000);
  // A claim the clock reads after now (a clock moved back): never due later than now.
  assert.equal(back(claimed({ waitedMs: 0 }), NOW + 60_000), NOW);
});

Deno.test("storedError() keeps the error as `Name: message` with its stack", () => {
  const error = new TypeError("bad");
  assert.deepEqual(storedError(error), { message: "TypeError: bad", stack: error.stack ?? null });
  const bare = new Error("no stack");
  delete bare.stack;
  assert.deepEqual(storedError(bare), { message: "Error: no stack", stack: null });
});
