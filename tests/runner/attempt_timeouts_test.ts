import assert from "node:assert/strict";
import { AttemptTimeouts } from "../../src/runner/attempt_timeouts.ts";

/** Timeouts that record which items timed out, and resolve once `count` have. */
function recording(count: number) {
  const timedOut: string[] = [];
  let resolve!: () => void;
  const reached = new Promise<void>((done) => resolve = done);
  const timeouts = new AttemptTimeouts<string>((item) => {
    timedOut.push(item);
    if (timedOut.length === count) resolve();
  });
  return { timeouts, timedOut, reached };
}

Deno.test("AttemptTimeouts times out attempts of one length in the order they started", async () => {
  const { timeouts, timedOut, reached } = recording(3);
  for (const item of ["a", "b", "c"]) timeouts.add(item, 5);
  await reached;
  assert.deepEqual(timedOut, ["a", "b", "c"]);
  timeouts.close();
});

Deno.test("AttemptTimeouts never times out an attempt that ended", async () => {
  const { timeouts, timedOut, reached } = recording(1);
  const ended = timeouts.add("ended", 1);
  timeouts.add("running", 30);
  timeouts.end(ended);
  await reached; // the later deadline of the same length came: the earlier one was passed over
  assert.deepEqual(timedOut, ["running"]);
  timeouts.end(ended); // ending twice is harmless
  timeouts.close();
});

Deno.test("AttemptTimeouts keeps lanes of different lengths apart", async () => {
  const { timeouts, timedOut, reached } = recording(3);
  timeouts.add("slow", 60);
  timeouts.add("quick", 1);
  timeouts.add("middle", 20);
  await reached;
  assert.deepEqual(timedOut, ["quick", "middle", "slow"]);
  timeouts.close();
});

Deno.test("AttemptTimeouts forgets ended attempts once none runs, and times out the next ones", async () => {
  const { timeouts, timedOut, reached } = recording(1);
  const first = timeouts.add("first", 5);
  const second = timeouts.add("second", 10);
  timeouts.end(first);
  timeouts.end(second);
  timeouts.add("third", 20);
  await reached;
  assert.deepEqual(timedOut, ["third"]);
  timeouts.close(); // the test's timer sanitizer fails it if a timer is left behind
});

Deno.test("AttemptTimeouts.close() ends every attempt: none times out later", () => {
  const { timeouts, timedOut } = recording(1);
  const deadline = timeouts.add("running", 60_000);
  timeouts.close();
  timeouts.end(deadline); // after close: ignored, nothing goes negative
  timeouts.add("again", 60_000);
  timeouts.close();
  assert.deepEqual(timedOut, []);
});

Deno.test("AttemptTimeouts drops ended deadlines behind a long one and still times out the rest", async () => {
  const { timeouts, timedOut, reached } = recording(2);
  timeouts.add("long", 40);
  for (let index = 0; index < 1_000; index++) timeouts.end(timeouts.add(`quick ${index}`, 40));
  timeouts.add("last", 40);
  await reached;
  assert.deepEqual(timedOut, ["long", "last"]);
  timeouts.close();
});
