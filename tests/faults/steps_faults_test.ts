/**
 * Durable steps under real faults: worker processes killed with SIGKILL or
 * stopped with SIGTERM, a step that spins in synchronous code past its
 * timeout in a Web Worker, signals sent from another process, and many
 * jobs parked at once; and an encrypted job's steps and signal in a Web
 * Worker of this process. Every test runs on each store (`storeTest`), its
 * workers and signallers in child processes (tests/fixtures/steps/) on the
 * test's database (`db.childArgs()`) unless it says otherwise, and counts what ran in a ledger file
 * each step appends a line to (outside the database, so a step run twice
 * shows up twice). Waits are on conditions with generous deadlines; no
 * duration is asserted. The peer test each one follows is named in its
 * doc, from ../shared/research/workflows.md (§1c and its M1 scenarios).
 *
 * @module
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { ChildScript } from "../_child.ts";
import { generateAppKey, isEncryptedPayload } from "../../src/encryption.ts";
import { unfinishedCount, waitUntil } from "../_helpers.ts";
import { type StoreContext, storeTest } from "../_stores.ts";
import type { Queue } from "../../mod.ts";
import {
  fiveSteps,
  type LedgerLine,
  napper,
  plain,
  readLedger,
  sleeper,
  SPIN_TIMEOUT_MS,
  spinningStep,
  tenSteps,
  waiter,
} from "../fixtures/steps/jobs.ts";
import { sealedSteps } from "../fixtures/steps/sealed_jobs.ts";

const WORKER = new URL("../fixtures/steps/worker_child.ts", import.meta.url);
const SIGNALLER = new URL("../fixtures/steps/signal_child.ts", import.meta.url);
const JOBS = new URL("../fixtures/steps/jobs.ts", import.meta.url).href;
const SEALED_JOBS = new URL("../fixtures/steps/sealed_jobs.ts", import.meta.url).href;
/** How long a step of a test may take on a loaded machine before it counts as stuck. */
const DEADLINE_MS = 60_000;

/** A worker process on the test's database, working with `options`, once it printed `ready`. */
async function startWorker(
  db: StoreContext,
  options: Record<string, unknown>,
): Promise<ChildScript> {
  const child = new ChildScript(WORKER, [JSON.stringify(options), ...await db.childArgs()]);
  try {
    await child.line("ready", DEADLINE_MS);
  } catch (error) {
    await child[Symbol.asyncDispose]();
    throw error;
  }
  return child;
}

/** A process sending signals on the test's database, once it printed `ready`. */
async function startSignaller(db: StoreContext): Promise<ChildScript> {
  const child = new ChildScript(SIGNALLER, await db.childArgs());
  try {
    await child.line("ready", DEADLINE_MS);
  } catch (error) {
    await child[Symbol.asyncDispose]();
    throw error;
  }
  return child;
}

/**
 * Stops a worker process with SIGTERM; resolves once it exited with what
 * its `stopped` line said (its stop reason) and when that line was read
 * (epoch ms): from then on it claimed nothing.
 */
async function stopWorker(child: ChildScript): Promise<{ reason: string; seenAt: number }> {
  child.kill("SIGTERM");
  const line = await child.line("stopped", DEADLINE_MS);
  const seenAt = Date.now();
  const stopped = JSON.parse(line.slice("stopped ".length));
  const status = await child.exit(DEADLINE_MS);
  assert.equal(status.code, 0, `the worker exited ${status.code}: ${child.stderr}`);
  return { reason: stopped.reason, seenAt };
}

/** The next `job:retry` or `job:failed` event worker process `child` printed for job `id`. */
async function eventOf(
  child: ChildScript,
  id: number,
): Promise<{ type: string; id: number; error: string }> {
  for (;;) {
    const event = JSON.parse((await child.line("event ", DEADLINE_MS)).slice("event ".length));
    if (event.id === id) return event;
  }
}

/** The ledger lines of job `id`, as `<what>@<attempt>`. */
function runs(ledger: string, id: number): string[] {
  return readLedger(ledger).filter((line) => line.id === id).map(({ what, attempt }) =>
    `${what}@${attempt}`
  );
}

/** Waits until job `id` completed, and returns its result. */
async function completed(queue: Queue, id: number, timeoutMs = DEADLINE_MS) {
  return await waitUntil(async () => {
    const result = await queue.result(id);
    if (result?.state === "failed") {
      throw new Error(`job ${id} failed: ${result.error}`);
    }
    return result?.state === "completed" ? result : null;
  }, { what: `job ${id} completed`, timeoutMs });
}

/** The names of the Web Worker threads of process `pid` (`worker-N`), read from /proc. */
function webWorkerThreads(pid: number): string[] {
  const names: string[] = [];
  try {
    for (const task of Deno.readDirSync(`/proc/${pid}/task`)) {
      try {
        const name = Deno.readTextFileSync(`/proc/${pid}/task/${task.name}/comm`).trim();
        if (name.startsWith("worker-")) names.push(name);
      } catch {
        // the thread ended between listing and reading
      }
    }
  } catch {
    // the process has exited
  }
  return names;
}

/**
 * A 5-step job whose worker process, running it with `executor`, is killed
 * (SIGKILL) in the middle of step 3, then finished by a new process.
 * Follows workflows.md §1c scenario 10, "process killed": OpenWorkflow's
 * worker.test.ts "recovers from crashes during parallel step execution" and
 * chaos.test.ts "workflow completes despite random worker deaths"; and
 * scenario 9, River's resumable_test.go "SavesLastCompletedStepOnContextCancellation",
 * here with the whole `work` process killed rather than stopped.
 */
async function killMidStepThree(db: StoreContext, executor: "workers" | "isolate"): Promise<void> {
  await using queue = await db.open({ jobs: JOBS });
  const ledger = join(db.dir, "ledger.txt");
  const gate = join(db.dir, "gate");
  const id = await queue.dispatch(fiveSteps, { ledger, gate });

  const first = await startWorker(db, { executor, leaseMs: 2_000, pollMs: 50 });
  try {
    await waitUntil(() => runs(ledger, id).includes("step-3@1"), {
      what: "step 3 started",
      timeoutMs: DEADLINE_MS,
    });
  } finally {
    await first[Symbol.asyncDispose](); // SIGKILL: the whole process (and its Web Workers)
  }
  assert.equal((await first.status).signal, "SIGKILL");
  // What was recorded before step 3 began: steps 1 and 2, by attempt 1.
  assert.deepEqual(
    (await queue.steps(id)).map(({ key, output, attempt }) => ({ key, output, attempt })),
    [
      { key: "step-1", output: "step-1@1", attempt: 1 },
      { key: "step-2", output: "step-2@1", attempt: 1 },
    ],
  );

  await Deno.writeTextFile(gate, "open");
  const second = await startWorker(db, { executor, leaseMs: 2_000, pollMs: 50 });
  try {
    const result = await completed(queue, id);
    assert.deepEqual(result.output, [
      "step-1@1",
      "step-2@1",
      "step-3@2",
      "step-4@2",
      "step-5@2",
    ]);
    assert.equal(result.attempts, 2, "the kill cost one attempt");
    await stopWorker(second);
  } finally {
    await second[Symbol.asyncDispose]();
  }

  const lines = readLedger(ledger).filter((line) => line.id === id);
  assert.deepEqual(lines.map(({ what, attempt }) => `${what}@${attempt}`), [
    "step-1@1",
    "step-2@1",
    "step-3@1",
    "step-3@2",
    "step-4@2",
    "step-5@2",
    "finished@2",
  ]);
  assert.ok(
    lines.every(({ thread }) => thread.startsWith("worker-") === (executor === "workers")),
    `every step ran ${executor === "workers" ? "in a Web Worker" : "in the worker's isolate"}`,
  );
  const pids = lines.map((line) => line.pid);
  assert.equal(new Set(pids.slice(0, 3)).size, 1, "steps 1 to 3 ran in one process");
  assert.equal(new Set(pids.slice(3)).size, 1, "the rest ran in one process");
  assert.notEqual(pids[0], pids[3], "the second process finished the job");
  assert.deepEqual(
    (await queue.steps(id)).map(({ seq, key, kind, state, output, attempt }) => ({
      seq,
      key,
      kind,
      state,
      output,
      attempt,
    })),
    [1, 2, 3, 4, 5].map((n) => ({
      seq: n,
      key: `step-${n}`,
      kind: "step",
      state: "done",
      output: `step-${n}@${n <= 2 ? 1 : 2}`,
      attempt: n <= 2 ? 1 : 2,
    })),
  );
}

storeTest(
  "a 5-step job whose worker process is killed (SIGKILL) in the middle of step 3 is finished by a new process: steps 1, 2, 4 and 5 ran once, step 3 twice, and 5 memos are listed",
  (db) => killMidStepThree(db, "workers"),
);

storeTest(
  "with the isolate executor too, a 5-step job whose worker process is killed (SIGKILL) in the middle of step 3 is finished by a new process that runs steps 3 to 5 only",
  (db) => killMidStepThree(db, "isolate"),
);

storeTest(
  "30 jobs of 10 steps on 2 worker processes, one killed (SIGKILL) and replaced 4 times, all complete with one memo per step in order, and only steps in flight at a kill ran again",
  // Follows workflows.md §1c scenario 10, "process killed": OpenWorkflow's
  // chaos.test.ts "workflow completes despite random worker deaths" (50 steps
  // and a kill every 200 ms there; 30 jobs of 10 steps of 100 ms and 4 kills
  // here, each costing a lease of 2 s).
  async (db) => {
    const jobs = 30;
    const kills = 4;
    const concurrency = 4;
    await using queue = await db.open({ jobs: JOBS });
    const ledger = join(db.dir, "ledger.txt");
    const ids = await queue.dispatchMany(
      tenSteps,
      Array.from({ length: jobs }, (_, n) => ({ ledger, n, stepMs: 100 })),
    );
    const options = { concurrency, leaseMs: 2_000, pollMs: 50 };
    const workers = [await startWorker(db, options), await startWorker(db, options)];
    try {
      for (let kill = 0; kill < kills; kill++) {
        const from = readLedger(ledger).length;
        // A quick machine may finish every job before the last kills: the storm ends there.
        const flowing = await waitUntil(
          async () =>
            readLedger(ledger).length >= from + 20
              ? "flowing"
              : (await unfinishedCount(queue)) === 0
              ? "drained"
              : null,
          { what: `20 steps started before kill ${kill + 1}`, timeoutMs: DEADLINE_MS },
        );
        if (flowing === "drained") break;
        const index = kill % 2;
        await workers[index]![Symbol.asyncDispose](); // SIGKILL
        workers[index] = await startWorker(db, options);
      }
      for (const id of ids) await completed(queue, id, 120_000);
      for (const worker of workers) await stopWorker(worker);
    } finally {
      for (const worker of workers) await worker[Symbol.asyncDispose]();
    }

    const keys = Array.from({ length: 10 }, (_, k) => `step-${k + 1}`);
    for (const [n, id] of ids.entries()) {
      const result = await queue.result(id);
      assert.deepEqual(result?.output, keys.map((_, k) => `${n}:${k + 1}`), `job ${id}'s outputs`);
      const steps = await queue.steps(id);
      assert.deepEqual(
        steps.map(({ seq, key }) => `${seq}:${key}`),
        keys.map((key, k) => `${k + 1}:${key}`),
      );
    }
    const starts = readLedger(ledger);
    for (const id of ids) {
      const order = starts.filter((line) => line.id === id).map((line) => line.what);
      const firstRuns = keys.map((key) => order.indexOf(key));
      assert.ok(
        firstRuns.every((at, k) => at >= 0 && (k === 0 || at > firstRuns[k - 1]!)),
        `job ${id} ran its steps out of order: ${order.join(", ")}`,
      );
    }
    const again = starts.length - jobs * keys.length;
    console.log(
      `[figure] kill storm, ${db.kind}: ${jobs} jobs of 10 steps, ${kills} kills at concurrency ` +
        `${concurrency}: ${again} steps ran again`,
    );
    // Each kill ends at most one step in flight per slot of the killed process.
    assert.ok(again <= kills * concurrency, `${again} steps ran again after ${kills} kills`);
  },
);

storeTest(
  "a 5-step job whose worker process is stopped (SIGTERM) in the middle of step 3 is put back with its attempt given back, and a new process runs steps 3 to 5 only",
  // Follows workflows.md §1c scenario 9, "stop mid-run": River's resumable_test.go
  // "SavesLastCompletedStepOnContextCancellation", Rails' continuation_test.rb
  // "continuable job can be interrupted and resumed".
  async (db) => {
    await using queue = await db.open({ jobs: JOBS });
    const ledger = join(db.dir, "ledger.txt");
    const gate = join(db.dir, "gate");
    const id = await queue.dispatch(fiveSteps, { ledger, gate });

    const first = await startWorker(db, { graceMs: 100, pollMs: 50 });
    try {
      await waitUntil(() => runs(ledger, id).includes("step-3@1"), {
        what: "step 3 started",
        timeoutMs: DEADLINE_MS,
      });
      assert.equal((await stopWorker(first)).reason, "requested");
    } finally {
      await first[Symbol.asyncDispose]();
    }
    const stopped = await queue.result(id);
    assert.deepEqual(
      { state: stopped?.state, attempts: stopped?.attempts },
      { state: "pending", attempts: 0 },
      "put back with its attempt given back",
    );
    assert.deepEqual((await queue.steps(id)).map(({ key }) => key), ["step-1", "step-2"]);

    await Deno.writeTextFile(gate, "open");
    const second = await startWorker(db, { pollMs: 50 });
    try {
      const result = await completed(queue, id);
      assert.equal(result.attempts, 1, "the stop cost no attempt");
      await stopWorker(second);
    } finally {
      await second[Symbol.asyncDispose]();
    }
    assert.deepEqual(runs(ledger, id), [
      "step-1@1",
      "step-2@1",
      "step-3@1",
      "step-3@1",
      "step-4@1",
      "step-5@1",
      "finished@1",
    ]);
    assert.deepEqual((await queue.steps(id)).map(({ key }) => key), [
      "step-1",
      "step-2",
      "step-3",
      "step-4",
      "step-5",
    ]);
  },
);

storeTest(
  "a step that spins in synchronous code past its timeoutMs in a Web Worker ends its attempt with StepTimeoutError, its Web Worker is terminated, and the next attempt resumes at that step; a durable job sharing that Web Worker resumes after its last memo with its attempt given back",
  /**
   * Follows workflows.md M1 scenario 1 (DBOS step_timeout.test.ts
   * "uncooperative-zombie-resolution-is-discarded": DBOS lets the zombie
   * step finish; here its Web Worker is terminated), M1 scenario 2 (DBOS
   * "timeout-attempt-is-retried-then-succeeds") and M1 scenario 4 (a
   * co-resident job, River #1291: no peer test).
   *
   * What Deno 2.9.6 does with `worker.terminate()` on a thread busy in a
   * synchronous loop, seen here and in a bare script (a Web Worker spinning
   * on `performance.now()` or on plain arithmetic for 3 s, terminated after
   * 1 s): the loop is NOT interrupted; it runs to its end, then the rest of
   * that task runs too (a `writeTextFileSync` right after the loop, and the
   * microtasks it queues, still happen), and only then does the thread
   * stop: no later macrotask (a `setTimeout(0)` callback) ever runs, and
   * the thread is gone moments after the loop ends. DESIGN.md's remark
   * holds: an endless loop would keep its thread (and the process) alive,
   * which the pool reports as stuck. So the spin here is bounded
   * (`SPIN_MS`, 2 s, ending well within the pool's 3 s wait for a
   * terminated thread), the marker that must never appear is written one
   * macrotask after the loop (`spin-marker`), and the line written
   * synchronously right after it (`spin-sync`) is only reported, not
   * asserted: it shows Deno did not interrupt the loop. What matters for
   * durability holds either way: whatever the terminated thread still runs
   * cannot record its step (the main thread no longer answers it, and the
   * attempt's lease is gone), so the step's memo is written by attempt 2.
   */
  async (db) => {
    await using queue = await db.open({ jobs: JOBS });
    const ledger = join(db.dir, "ledger.txt");
    const gate = join(db.dir, "gate");
    // One Web Worker, two slots: the durable job shares the spinning step's Web Worker.
    const worker = await startWorker(db, {
      concurrency: 2,
      workers: 1,
      graceMs: 300,
      pollMs: 50,
    });
    try {
      const sharing = await queue.dispatch(fiveSteps, { ledger, gate });
      await waitUntil(() => runs(ledger, sharing).includes("step-3@1"), {
        what: "the sharing job reached step 3",
        timeoutMs: DEADLINE_MS,
      });
      const id = await queue.dispatch(spinningStep, { ledger });
      const spinStart = await waitUntil(
        () => readLedger(ledger).find((line) => line.id === id && line.what === "spin-start"),
        { what: "the spin started", timeoutMs: DEADLINE_MS },
      );
      const sharingThread = readLedger(ledger).find((line) =>
        line.id === sharing && line.what === "step-3"
      )!.thread;
      assert.equal(spinStart.thread, sharingThread, "both jobs ran in the one Web Worker");

      assert.deepEqual(await eventOf(worker, id), {
        type: "job:retry",
        id,
        error: `StepTimeoutError: Step "spin" timed out after ${SPIN_TIMEOUT_MS} ms`,
      });
      const result = await completed(queue, id);
      assert.equal(result.output, "quick@2", "attempt 2 resumed at the step and ran it");
      assert.equal(result.attempts, 2);

      // The spinning thread ends once its bounded loop does; only then is the marker decided
      // (a thread left running, not terminated, would write it about when the loop ends).
      await waitUntil(
        () =>
          !webWorkerThreads(spinStart.pid).includes(spinStart.thread) ||
          runs(ledger, id).includes("spin-marker@1"),
        { what: `the terminated thread ${spinStart.thread} ended`, timeoutMs: DEADLINE_MS },
      );
      const lines = readLedger(ledger).filter((line) => line.id === id);
      const kept = lines.filter((line) => line.what !== "spin-sync");
      assert.deepEqual(kept.map(({ what, attempt }) => `${what}@${attempt}`), [
        "before@1",
        "spin-start@1",
        "spin-quick@2",
        "after@2",
      ], "the step before ran once; no marker after the spin; the step ran again on attempt 2");
      assert.notEqual(
        lines.find((line) => line.what === "spin-quick")!.thread,
        spinStart.thread,
        "attempt 2 ran in the Web Worker that replaced the terminated one",
      );
      assert.deepEqual(
        (await queue.steps(id)).map(({ key, attempt }) => `${key}@${attempt}`),
        ["before@1", "spin@2", "after@2"],
      );

      // The job that shared the terminated Web Worker: interrupted, not charged, resumed.
      await Deno.writeTextFile(gate, "open");
      const shared = await completed(queue, sharing);
      assert.equal(shared.attempts, 1, "the interruption gave its attempt back");
      assert.deepEqual(runs(ledger, sharing), [
        "step-1@1",
        "step-2@1",
        "step-3@1",
        "step-3@1",
        "step-4@1",
        "step-5@1",
        "finished@1",
      ]);
      const stopped = await stopWorker(worker);
      assert.notEqual(stopped.reason, "stuck", "the bounded spin's thread ended in time");
      console.log(
        `spinning step: a line written synchronously after the loop ${
          lines.some((line) => line.what === "spin-sync")
            ? "appeared (terminate() did not interrupt the loop)"
            : "did not appear (terminate() interrupted the loop)"
        }`,
      );
    } finally {
      await worker[Symbol.asyncDispose]();
    }
  },
);

storeTest(
  "a job that sleeps 2 s in a worker process stopped (SIGTERM) before its wake is completed by a new process after the wake, without running its first step again",
  // Follows workflows.md §1c scenario 12, "sleep frees the slot" (OpenWorkflow
  // "step.sleep postpones workflow execution", Absurd "sleepFor suspends until
  // duration elapses"), across a process restart; and scenario 15 (the sleep
  // spends no attempt).
  async (db) => {
    await using queue = await db.open({ jobs: JOBS });
    const ledger = join(db.dir, "ledger.txt");
    const id = await queue.dispatch(napper, { ledger, ms: 2_000 });

    const first = await startWorker(db, { pollMs: 50 });
    let nap;
    let stopped;
    try {
      nap = await waitUntil(
        async () => (await queue.steps(id)).find((step) => step.key === "nap"),
        { what: "the job parked in its sleep", timeoutMs: DEADLINE_MS },
      );
      stopped = await stopWorker(first);
      assert.equal(stopped.reason, "requested");
    } finally {
      await first[Symbol.asyncDispose]();
    }
    const wake = nap.until!.getTime();
    assert.ok(
      stopped.seenAt < wake,
      `the first worker stopped ${stopped.seenAt - wake} ms after the wake: the test shows ` +
        "nothing (a loaded machine?)",
    );
    assert.deepEqual(runs(ledger, id), ["first@1"]);
    const parked = await queue.result(id);
    assert.deepEqual(
      { state: parked?.state, attempts: parked?.attempts },
      { state: "pending", attempts: 0 },
      "parked with its attempt given back",
    );

    const second = await startWorker(db, { pollMs: 50 });
    try {
      const result = await completed(queue, id);
      assert.equal(result.attempts, 1, "the sleep spent no attempt");
      await stopWorker(second);
    } finally {
      await second[Symbol.asyncDispose]();
    }
    const lines = readLedger(ledger).filter((line) => line.id === id);
    assert.deepEqual(lines.map(({ what, attempt }) => `${what}@${attempt}`), [
      "first@1",
      "second@1",
    ]);
    assert.notEqual(lines[1]!.pid, lines[0]!.pid, "the new process finished it");
    assert.ok(lines[1]!.t >= wake, `the job went on at ${lines[1]!.t}, before its wake at ${wake}`);
    assert.deepEqual(
      (await queue.steps(id)).map(({ key, kind, state }) => `${key}:${kind}:${state}`),
      ["first:step:done", "nap:sleep:done", "second:step:done"],
    );
  },
);

storeTest(
  "a signal sent by another process to a job parked in waitFor is delivered, and the job completes with its payload",
  // Follows workflows.md §1c scenario 17, "signal wakes": DBOS dbos.test.ts
  // "simple-workflow-notifications", OpenWorkflow "sendSignal sends a signal
  // and returns workflow run IDs"; the sender a process of its own.
  async (db) => {
    await using queue = await db.open({ jobs: JOBS });
    const ledger = join(db.dir, "ledger.txt");
    const id = await queue.dispatch(waiter, { ledger, stepMs: 0, timeoutMs: 600_000 });
    const worker = await startWorker(db, { pollMs: 50 });
    try {
      await waitUntil(
        async () =>
          (await queue.steps(id)).some((step) => step.key === "go" && step.state === "parked") &&
          (await queue.result(id))?.state === "pending",
        { what: "the job parked in its wait", timeoutMs: DEADLINE_MS },
      );
      const payload = { approved: true, by: "another process", n: [1, 2, 3] };
      await using signaller = await startSignaller(db);
      await signaller.send(`0 ${id} go ${JSON.stringify(payload)}\n`);
      await signaller.closeStdin();
      const answer = (await signaller.line("signalled", DEADLINE_MS)).split(" ");
      assert.deepEqual(answer.slice(0, 3), ["signalled", String(id), "delivered"]);
      await signaller.line("done", DEADLINE_MS);

      const result = await completed(queue, id);
      assert.deepEqual(result.output, payload);
      assert.equal(result.attempts, 1, "the wait spent no attempt");
      await stopWorker(worker);
    } finally {
      await worker[Symbol.asyncDispose]();
    }
    assert.deepEqual(runs(ledger, id), ["first@1", "woke@1"]);
    const steps = await queue.steps(id);
    assert.deepEqual(
      steps.map(({ key, kind, state, output }) => ({ key, kind, state, output })),
      [
        { key: "first", kind: "step", state: "done", output: undefined },
        {
          key: "go",
          kind: "wait",
          state: "done",
          output: { approved: true, by: "another process", n: [1, 2, 3] },
        },
      ],
    );
    const { signals } = await (await db.store()).jobSteps(id);
    assert.deepEqual(signals, [], "the wait took the signal from the mailbox");
  },
);

storeTest(
  "no lost wake-up: 100 jobs on 2 worker processes, each signalled by a third process from its dispatch on (before it starts, while it runs its step, after its wait parked), all complete with their payload well before their timeouts",
  // Follows workflows.md §1c scenario 25, "no lost wake-up": Absurd
  // tests/test_events.py "test_await_emit_event_race_does_not_lose_wakeup"
  // (200 jobs there, 100 here to keep the file short on a loaded machine).
  async (db) => {
    const count = 100;
    await using queue = await db.open({ jobs: JOBS });
    const ledger = join(db.dir, "ledger.txt");
    const workers = [
      await startWorker(db, { concurrency: 8, pollMs: 50 }),
      await startWorker(db, { concurrency: 8, pollMs: 50 }),
    ];
    const signaller = await startSignaller(db);
    try {
      // Both processes' Web Workers loaded (a second or more on a loaded machine), so that the
      // signals below race jobs being picked up, not jobs waiting for their executor to load.
      // More warm-up jobs each time the last ones are done: on a loaded machine one process can
      // take a whole round before the other's Web Workers are loaded.
      const warmUp = join(db.dir, "warm-up.txt");
      await waitUntil(async () => {
        if (new Set(readLedger(warmUp).map((line) => line.pid)).size === 2) return true;
        if ((await unfinishedCount(queue)) === 0) {
          await queue.dispatchMany(plain, Array(40).fill({ ledger: warmUp }));
        }
        return false;
      }, { what: "both worker processes ran a job", timeoutMs: DEADLINE_MS });
      await waitUntil(async () => (await unfinishedCount(queue)) === 0, {
        what: "the warm-up jobs settled",
        timeoutMs: DEADLINE_MS,
      });
      const ids: number[] = [];
      const dispatchedAt = new Map<number, number>();
      const started = Date.now();
      for (let n = 0; n < count; n++) {
        const id = await queue.dispatch(waiter, {
          ledger,
          stepMs: (n % 4) * 20, // 0 to 60 ms before the wait
          timeoutMs: 60_000,
        });
        ids.push(id);
        dispatchedAt.set(id, Date.now());
        // Sent at once or up to 1.5 s later, so signals land before the job starts, while it
        // runs its step, and after its wait parked, whatever the store's pick-up latency.
        const delayMs = [0, 0, 50, 150, 300, 600, 1_000, 1_500][n % 8]!;
        await signaller.send(`${delayMs} ${id} go ${JSON.stringify({ n })}\n`);
      }
      await signaller.closeStdin();
      const outcomes = new Map<number, string>();
      const answeredAt = new Map<number, number>();
      for (let n = 0; n < count; n++) {
        const [, id, outcome, t] = (await signaller.line("signalled", DEADLINE_MS)).split(" ");
        outcomes.set(Number(id), outcome!);
        answeredAt.set(Number(id), Number(t));
      }
      await signaller.line("done", DEADLINE_MS);
      assert.deepEqual(
        [...outcomes.values()].filter((outcome) =>
          outcome !== "delivered" && outcome !== "buffered"
        ),
        [],
        "every signal found its job waiting or still to wait",
      );

      // Well before the waits' 60 s: a lost wake-up would only end at its timeout.
      await waitUntil(async () => (await unfinishedCount(queue)) === 0, {
        what: "every job completed",
        timeoutMs: 45_000,
      }).catch(async (error) => {
        const left = (await queue.jobs({ limit: 1_000 })).jobs.map((job) => job.id);
        const signalled = left.map((id) => `${id} (${outcomes.get(id)})`).join(", ");
        throw new Error(`${error.message}: wake-ups lost by jobs ${signalled}`, { cause: error });
      });
      const finishedMs = Date.now() - started;
      for (const [n, id] of ids.entries()) {
        const result = await queue.result(id);
        assert.equal(result?.state, "completed", `job ${id}: ${JSON.stringify(result)}`);
        assert.deepEqual(result.output, { n }, `job ${id} woke without its payload`);
      }
      const lines = readLedger(ledger);
      const byJob = Map.groupBy(lines, (line: LedgerLine) => line.id);
      for (const id of ids) {
        assert.deepEqual(
          byJob.get(id)?.map(({ what }) => what),
          ["first", "woke"],
          `job ${id} ran its step once and woke once`,
        );
      }
      const delivered = [...outcomes.values()].filter((outcome) => outcome === "delivered").length;
      const pickUps = ids.map((id) =>
        byJob.get(id)!.find((line) => line.what === "first")!.t - dispatchedAt.get(id)!
      ).sort((a, b) => a - b);
      const beforeStart = ids.filter((id) =>
        outcomes.get(id) === "buffered" &&
        answeredAt.get(id)! < byJob.get(id)!.find((line) => line.what === "first")!.t
      ).length;
      console.log(
        `[figure] no lost wake-up, ${db.kind}: ${count} jobs done ${finishedMs} ms after the first ` +
          `dispatch; signals delivered to a parked wait: ${delivered}, buffered: ${
            count - delivered
          } (${beforeStart} of them stored before the job started, ${
            count - delivered - beforeStart
          } while it ran or as it started); from dispatch to the step's start: median ${
            pickUps[count >> 1]
          } ms, max ${pickUps[count - 1]} ms`,
      );
      for (const worker of workers) await stopWorker(worker);
    } finally {
      await signaller[Symbol.asyncDispose]();
      for (const worker of workers) await worker[Symbol.asyncDispose]();
    }
  },
);

storeTest(
  "1,000 jobs sleeping for an hour hold no slot: a worker at concurrency 4 runs 20 other jobs meanwhile, and counts() shows the sleepers delayed, not running",
  // Follows workflows.md §1c scenario 12, "sleep frees the slot" (OpenWorkflow
  // "step.sleep postpones workflow execution", Absurd "sleepFor suspends until
  // duration elapses"), with 1,000 sleepers against 4 slots.
  async (db) => {
    const sleepers = 1_000;
    await using queue = await db.open({ jobs: JOBS });
    const ledger = join(db.dir, "ledger.txt");
    const ids = await queue.dispatchMany(
      sleeper,
      Array.from({ length: sleepers }, () => ({ ms: 3_600_000 })),
    );
    const worker = await startWorker(db, { concurrency: 4, pollMs: 50 });
    try {
      await waitUntil(async () => (await queue.counts()).default?.delayed === sleepers, {
        what: `all ${sleepers} sleepers parked`,
        timeoutMs: 120_000,
        everyMs: 200,
      });
      const others = await queue.dispatchMany(plain, Array(20).fill({ ledger }));
      await waitUntil(() => readLedger(ledger).length === others.length, {
        what: "the 20 other jobs ran",
        timeoutMs: DEADLINE_MS,
      });
      await waitUntil(async () => (await unfinishedCount(queue)) === sleepers, {
        what: "the 20 other jobs settled",
        timeoutMs: DEADLINE_MS,
      });
      const counts = (await queue.counts()).default!;
      assert.deepEqual(
        {
          pending: counts.pending,
          delayed: counts.delayed,
          reserved: counts.reserved,
          failed: counts.failed,
        },
        { pending: 0, delayed: sleepers, reserved: 0, failed: 0 },
      );
      assert.deepEqual(
        readLedger(ledger).map((line) => line.id).sort((a, b) => a - b),
        others,
        "each other job ran once",
      );
      const steps = await queue.steps(ids[sleepers - 1]!);
      assert.deepEqual(steps.map(({ key, kind, state }) => `${key}:${kind}:${state}`), [
        "first:step:done",
        "nap:sleep:done",
      ]);
      assert.ok(steps[1]!.until!.getTime() > Date.now() + 3_000_000, "it sleeps an hour");
      const stats = await stopWorker(worker);
      assert.equal(stats.reason, "requested");
    } finally {
      await worker[Symbol.asyncDispose]();
    }
  },
);

storeTest(
  "in a Web Worker, an encrypted job's step output and the signal it waits for are sealed at rest, and the job resumes after its wait with both opened, its step run once",
  async (db) => {
    const appKey = generateAppKey();
    await using queue = await db.open({ jobs: SEALED_JOBS, appKey });
    const ledger = join(db.dir, "ledger.txt");
    const id = await queue.dispatch(sealedSteps, { ledger, secret: "s3cret-pin" });
    const worker = queue.work({ executor: "workers", pollMs: 20 });
    try {
      await waitUntil(
        async () => (await queue.steps(id)).some((step) => step.state === "parked"),
        { what: "the job parked in its wait", timeoutMs: DEADLINE_MS },
      );
      assert.equal(await queue.signal(id, "answer", { ok: "yes-answer" }), "delivered");
      const result = await completed(queue, id);
      assert.deepEqual(result.output, { secret: "s3cret-pin", answer: { ok: "yes-answer" } });
    } finally {
      await worker.stop();
    }
    const lines = readLedger(ledger).filter((line) => line.id === id);
    assert.deepEqual(lines.map(({ what }) => what), ["secret", "answered"], "the step ran once");
    assert.ok(lines.every(({ thread }) => thread.startsWith("worker-")), "ran in a Web Worker");
    const listed = await queue.steps(id);
    assert.deepEqual(listed.map(({ key, encrypted, output }) => ({ key, encrypted, output })), [
      { key: "secret", encrypted: true, output: undefined },
      { key: "answer", encrypted: true, output: undefined },
    ]);
    const { steps } = await (await db.store()).jobSteps(id);
    assert.equal(steps.length, 2);
    for (const step of steps) {
      assert.ok(step.output !== null && isEncryptedPayload(step.output), `${step.key} is sealed`);
      assert.ok(!step.output.includes("s3cret") && !step.output.includes("yes-answer"));
    }
  },
);
