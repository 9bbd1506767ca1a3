/**
 * Durable steps on the embedded SQLite default: two onboarding jobs
 * (examples/steps/jobs.ts) each record a step, sleep a second without
 * holding a slot, and wait for a survey answer. Ada's answer is sent once
 * her job waits for it (`"delivered"`: due at once); Grace's is sent before
 * her job reaches its wait (`"buffered"`: kept in its mailbox). Then the
 * steps each job recorded are printed, and the example ends on its own.
 *
 * ```sh
 * deno run -A examples/steps/main.ts
 * ```
 *
 * @module
 */
import { Queue } from "../../mod.ts";
import { onboard } from "./jobs.ts";

const path = "./.renox/steps.db";
for (const suffix of ["", "-wal", "-shm"]) await Deno.remove(path + suffix).catch(() => {});

await using queue = await Queue.open({ path, jobs: import.meta.resolve("./jobs.ts") });
const finished = new Set<number>();
queue.addEventListener("job:complete", ({ detail }) => finished.add(detail.id));
queue.addEventListener("job:failed", ({ detail }) => {
  console.error(`job ${detail.id} failed: ${detail.error.message}`);
  finished.add(detail.id);
  Deno.exitCode = 1;
});

const ada = await queue.dispatch(onboard, { userId: 1, name: "Ada" });
const grace = await queue.dispatch(onboard, { userId: 2, name: "Grace" });
console.log(
  `Grace's answer, sent before her job waits: ${await queue.signal(grace, "survey", { score: 7 })}`,
);

const worker = queue.work({ concurrency: 2, pollMs: 100 });

/** Resolves once `ready()` holds, checking every 50 ms; throws after `ms`. */
async function until(what: string, ready: () => Promise<boolean> | boolean, ms = 30_000) {
  const deadline = Date.now() + ms;
  while (!await ready()) {
    if (Date.now() > deadline) throw new Error(`gave up waiting for ${what} after ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

await until(
  "Ada's job to wait for her survey",
  async () =>
    (await queue.steps(ada)).some((step) => step.kind === "wait" && step.state === "parked"),
);
console.log(
  `Ada's answer, sent while her job waits: ${await queue.signal(ada, "survey", { score: 9 })}`,
);

await until("both jobs to finish", () => finished.has(ada) && finished.has(grace));
await worker.stop();

for (const id of [ada, grace]) {
  const result = await queue.result(id);
  console.log(`\njob ${id}: ${result?.state}, ${JSON.stringify(result?.output)}`);
  for (const step of await queue.steps(id)) {
    const output = step.output === undefined ? "" : ` ${JSON.stringify(step.output)}`;
    console.log(
      `  ${step.seq}. ${step.kind} ${step.key}: ${step.state} (attempt ${step.attempt})${output}`,
    );
  }
}
