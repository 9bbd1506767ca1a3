/**
 * The rule a parked attempt keeps, on the steps of one attempt with no
 * worker around them: once a sleep parked it, any later step, sleep or
 * wait of the same run never settles and never runs (a rejection nobody
 * awaits would end the process), and neither does one called once the
 * attempt ended. The worker test in steps_test.ts cannot time its call
 * between the park and the attempt's end; here the park is heard as it
 * happens.
 *
 * @module
 */
import assert from "node:assert/strict";
import { z } from "zod";
import { defineJob } from "../../mod.ts";
import { DurableSteps } from "../../src/executors/durable_steps.ts";
import type { StepPort } from "../../src/executors/executor.ts";
import type { StepWrite } from "../../src/stores/rows/steps.ts";

Deno.test("a step called after a sleep parked the attempt, or after the attempt ended, never settles, never runs and is not recorded", async () => {
  const job = defineJob({ name: "parks", schema: z.object({}), handle() {} });
  const recorded: StepWrite[] = [];
  // The port of an attempt whose job has no memo yet: what a first run reads.
  const port: StepPort = {
    load: () => Promise.resolve({ steps: [], signals: [] }),
    record: (write) => {
      recorded.push(write);
      return Promise.resolve();
    },
    timeStep: () => () => {},
  };
  const unsettled = (promise: Promise<unknown>) =>
    Promise.race([
      promise.then(() => "resolved", () => "rejected"),
      new Promise((resolve) => setTimeout(() => resolve("unsettled"), 50)),
    ]);
  const steps = new DurableSteps(port, job, 1, 1, new AbortController().signal, null);
  const parked = Promise.withResolvers<void>();
  steps.onPark = () => parked.resolve();
  void steps.sleep("nap", 60_000); // never resolves: the attempt ends with the park
  await parked.promise;
  assert.equal(steps.parkRequest?.step.key, "nap");
  let ran = false;
  assert.equal(await unsettled(steps.step("later", () => ran = true)), "unsettled");
  assert.equal(await unsettled(steps.sleep("again", 1_000)), "unsettled");
  assert.equal(await unsettled(steps.waitFor("w")), "unsettled");
  assert.equal(ran, false, "the step's function never ran");
  assert.deepEqual(
    recorded,
    [],
    "the park's memo is the executor's to write, with the attempt's end",
  );
  // An attempt that returned: a step first called then, or whose function throws then.
  const ended = new DurableSteps(port, job, 2, 1, new AbortController().signal, null);
  const throwing = ended.step("throws", async () => {
    await new Promise((resolve) => setTimeout(resolve, 10));
    throw new Error("thrown after the attempt ended");
  });
  ended.end();
  assert.equal(await unsettled(throwing), "unsettled");
  assert.equal(await unsettled(ended.step("after", () => ran = true)), "unsettled");
  assert.equal(ran, false, "a step first called after the attempt ended ran");
  assert.deepEqual(recorded, []);
});
