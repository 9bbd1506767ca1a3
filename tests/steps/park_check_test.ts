/**
 * The rule a parked attempt keeps, on the steps of one attempt with no
 * worker around them: once a sleep parked it, any later step, sleep or
 * wait of the same run is refused at its call, naming both. The worker
 * test in steps_test.ts cannot time its call between the park and the
 * attempt's end; here the park is heard as it happens.
 *
 * @module
 */
import assert from "node:assert/strict";
import { z } from "zod";
import { defineJob } from "../../mod.ts";
import { DurableSteps } from "../../src/executors/durable_steps.ts";
import type { StepPort } from "../../src/executors/executor.ts";
import type { StepWrite } from "../../src/stores/rows/steps.ts";

Deno.test("a step called after a sleep parked the attempt is refused at its call, naming both, and not recorded", async () => {
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
  const steps = new DurableSteps(port, job, 1, 1, new AbortController().signal, null);
  const parked = Promise.withResolvers<void>();
  steps.onPark = () => parked.resolve();
  void steps.sleep("nap", 60_000); // never resolves: the attempt ends with the park
  await parked.promise;
  assert.equal(steps.parkRequest?.step.key, "nap");
  let ran = false;
  await assert.rejects(
    steps.step("later", () => ran = true),
    {
      name: "TypeError",
      message: 'ctx: "later" was called after "nap" parked the attempt: a sleep or a wait ends it',
    },
  );
  await assert.rejects(steps.sleep("again", 1_000), /"again" was called after "nap" parked/);
  assert.equal(ran, false, "the step's function never ran");
  assert.deepEqual(
    recorded,
    [],
    "the park's memo is the executor's to write, with the attempt's end",
  );
});
