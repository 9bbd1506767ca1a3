import assert from "node:assert/strict";
import { assertBackoff, defaultBackoff, retryDelayMs } from "../src/backoff.ts";
import { seededRandom } from "./fixtures/runner/harness.ts";

const middle = () => 0.5;

Deno.test("retryDelayMs() takes an array's delay for the attempt that failed", () => {
  const backoff = [1_000, 5_000, 30_000];
  assert.deepEqual([1, 2, 3].map((attempt) => retryDelayMs(backoff, attempt, 0)), [
    1_000,
    5_000,
    30_000,
  ]);
});

Deno.test("retryDelayMs() repeats an array's last delay once attempts outrun it", () => {
  const backoff = [1_000, 5_000];
  assert.deepEqual([2, 3, 4, 50].map((attempt) => retryDelayMs(backoff, attempt, 0)), [
    5_000,
    5_000,
    5_000,
    5_000,
  ]);
  assert.equal(retryDelayMs([250], 9, 0), 250);
});

Deno.test("retryDelayMs() calls a backoff function with the attempt that failed", () => {
  const seen: number[] = [];
  const backoff = (attempt: number) => {
    seen.push(attempt);
    return attempt * attempt * 100;
  };
  assert.deepEqual([1, 2, 3].map((attempt) => retryDelayMs(backoff, attempt, 0)), [
    100,
    400,
    900,
  ]);
  assert.deepEqual(seen, [1, 2, 3]);
});

Deno.test("the default backoff waits 10 s times the attempt that failed", () => {
  assert.deepEqual([1, 2, 3, 7].map((attempt) => retryDelayMs(defaultBackoff, attempt, 0)), [
    10_000,
    20_000,
    30_000,
    70_000,
  ]);
});

Deno.test("retryDelayMs() with jitter 0 ignores the random source", () => {
  assert.equal(retryDelayMs([60_000], 1, 0, () => 0), 60_000);
  assert.equal(retryDelayMs([60_000], 1, 0, () => 0.999), 60_000);
});

Deno.test("retryDelayMs() spreads by exactly ±jitter at the ends of the random range", () => {
  assert.equal(retryDelayMs([60_000], 1, 0.2, () => 0), 48_000);
  assert.equal(retryDelayMs([60_000], 1, 0.2, middle), 60_000);
  assert.equal(retryDelayMs([60_000], 1, 0.2, () => 0.75), 66_000);
  assert.equal(retryDelayMs([60_000], 1, 0.2, () => 1), 72_000);
  assert.equal(retryDelayMs((attempt) => attempt * 1_000, 3, 0.5, () => 0), 1_500);
});

Deno.test("retryDelayMs() stays within ±jitter of the delay for any random value", () => {
  const random = seededRandom(42);
  for (let i = 0; i < 10_000; i++) {
    const delay = retryDelayMs([60_000], 1, 0.2, random);
    assert.ok(delay >= 48_000 && delay <= 72_000, `delay ${delay} outside 48000..72000`);
  }
});

Deno.test("retryDelayMs() returns whole milliseconds and never a negative delay", () => {
  assert.equal(retryDelayMs(() => 1.4, 1, 0), 1);
  assert.equal(retryDelayMs(() => 1.6, 1, 0), 2);
  assert.equal(retryDelayMs([1_000], 1, 1, () => 0), 0);
  assert.equal(retryDelayMs([0], 1, 1, () => 1), 0);
  assert.ok(Number.isInteger(retryDelayMs([777], 1, 0.3, seededRandom(7))));
});

Deno.test("retryDelayMs() refuses a backoff function's negative or non-finite delay, naming the attempt", () => {
  assert.throws(() => retryDelayMs(() => -1, 2, 0), (error: unknown) => {
    assert.ok(error instanceof RangeError);
    assert.match(error.message, /attempt 2/);
    assert.match(error.message, /-1/);
    return true;
  });
  assert.throws(() => retryDelayMs(() => NaN, 1, 0), RangeError);
  assert.throws(() => retryDelayMs(() => Infinity, 1, 0), RangeError);
});

Deno.test("assertBackoff() accepts a function or a non-empty array of delays >= 0", () => {
  assertBackoff("job", (attempt) => attempt);
  assertBackoff("job", [0, 1_000]);
});

Deno.test("assertBackoff() refuses an empty array, naming the job", () => {
  assert.throws(() => assertBackoff("mailer", []), (error: unknown) => {
    assert.ok(error instanceof TypeError);
    assert.match(error.message, /"mailer"/);
    return true;
  });
});

Deno.test("assertBackoff() refuses a negative or non-finite delay, naming the job", () => {
  for (const bad of [[-1], [1_000, NaN], [Infinity], ["5" as unknown as number]]) {
    assert.throws(() => assertBackoff("mailer", bad), (error: unknown) => {
      assert.ok(error instanceof RangeError, `expected a RangeError for ${String(bad)}`);
      assert.match(error.message, /"mailer"/);
      return true;
    });
  }
});
