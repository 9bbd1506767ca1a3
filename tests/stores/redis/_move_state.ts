/**
 * A queue with every kind of state a move copies, built through the
 * `Store` methods on any store, for the move tests: jobs pending, delayed,
 * grouped, keyed and running (with overlap locks and a rate window),
 * finished and kept, failed, a chain, a batch and a flow part way through,
 * schedules that fired, pauses, memos, a signal, log lines and metrics.
 *
 * @module
 */
import assert from "node:assert/strict";
import type { Store, WaitingJobRow } from "../../../src/stores/store.ts";
import { BOOM, LEASE_MS, newJob, T0 } from "../contract/fixtures.ts";

/** A job that waits for its chain, batch or flow, named `name`, in `queue`. */
function waiting(name: string, queue: string): WaitingJobRow {
  return { queue, name, payload: `{"w":"${name}"}`, priority: 0, delayMs: 0, retryForMs: null };
}

/** A schedule of job "tick" in queue "sched", every minute unless `cron` is given. */
function schedule(name: string, overlap: string, cron: string | null = null) {
  const row = {
    name,
    job: "tick",
    queue: "sched",
    cron,
    everyMs: cron === null ? 60_000 : null,
    timezone: "UTC",
    missed: "once",
    maxCatchUp: 1,
    overlap,
    jitterMs: 0,
  };
  return { ...row, definition: JSON.stringify(row) };
}

/** What {@linkcode buildState} stored, by role. */
export interface BuiltState {
  readonly batchId: number;
  readonly chainId: number;
  readonly flowId: number;
  /** A finished job kept in the history, with output `"ok"`. */
  readonly keptId: number;
  /** A failed job. */
  readonly failedId: number;
  /** A job left running (leased by token 11), holding an overlap lock. */
  readonly runningId: number;
  /** A job left running with a memo and a signal in its mailbox. */
  readonly steppedId: number;
  /** The schedule job fired for slot T0 of "every-minute" (its overlap rule: skip). */
  readonly firedId: number;
}

/** Every queue a job of the state is in (none of them paused). */
export const STATE_QUEUES = [
  "default",
  "g",
  "keyed",
  "chain",
  "batch",
  "flow",
  "cb",
  "work",
  "sched",
];

/** Builds the state on `store` (times from T0, the caller's clock). */
export async function buildState(store: Store): Promise<BuiltState> {
  await store.insertJobs([
    newJob({ payload: '{"n":1}' }),
    newJob({
      payload: '{"n":2}',
      availableAt: T0 + 3_600_000,
      priority: 5,
      trace: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
      retryUntil: T0 + 86_400_000,
      expireAt: T0 + 7_200_000,
    }),
    newJob({ queue: "g", name: "g-job", group: { key: "acct-1", limit: 2, ordered: false } }),
    newJob({ queue: "g", name: "g-job", group: { key: "acct-1", limit: 2, ordered: false } }),
    newJob({ queue: "g", name: "g-job", group: { key: "acct-2", limit: null, ordered: true } }),
    newJob({ queue: "g", name: "g-job", group: { key: "acct-2", limit: null, ordered: true } }),
  ]);
  const keyed = await store.insertKeyed([
    {
      ...newJob({ queue: "keyed", name: "u" }),
      key: { kind: "unique", key: "u:1", expiresAt: T0 + 3_600_000, releaseOnStart: false },
    },
    {
      ...newJob({ queue: "keyed", name: "d", availableAt: T0 + 1_000 }),
      key: { kind: "debounce", key: "d:1", latestAt: T0 + 60_000 },
    },
  ]);
  assert.deepEqual(keyed.map((row) => row.outcome), ["stored", "stored"]);
  const chainId = await store.insertChain({
    first: newJob({ queue: "chain", name: "c1" }),
    next: [waiting("c2", "chain"), waiting("c3", "chain")],
    onFailure: [waiting("c-catch", "cb")],
  });
  const batch = await store.insertBatch({
    name: "b",
    allowFailures: true,
    createdAt: T0,
    jobs: ["b1", "b2", "b3"].map((name) => newJob({ queue: "batch", name })),
    then: [waiting("b-then", "cb")],
    catch: [waiting("b-catch", "cb")],
    finally: [waiting("b-finally", "cb")],
  });
  const node = (key: string, parents: number[], continueOnFailure = false) => ({
    key,
    job: {
      ...newJob({ queue: "flow", name: key, payload: `{"node":"${key}"}` }),
      delayMs: 0,
      retryForMs: null,
    },
    parents,
    continueOnFailure,
  });
  const flow = await store.insertFlow({
    name: "f",
    createdAt: T0,
    nodes: [node("a", []), node("b", [0]), node("c", [0, 1], true)],
    onFailure: [waiting("f-catch", "cb")],
  });
  await store.syncSchedules(
    [schedule("every-minute", "skip"), schedule("hourly", "allow", "0 * * * *")],
    T0,
  );
  const [firedId] = await store.runSchedule("every-minute", [{
    slot: T0,
    manual: false,
    row: newJob({ queue: "sched", name: "tick" }),
  }], T0 + 5);
  await store.runSchedule("hourly", [{
    slot: T0 + 6,
    manual: true,
    row: newJob({ queue: "sched", name: "tick", payload: '{"manual":true}' }),
  }], T0 + 6);
  await store.pause("paused-q", T0, T0 + 3_600_000, "maintenance");
  await store.pause("paused-forever", T0, null, null);
  await store.pauseGroup("g-job", "acct-9", T0, null);
  await store.pauseGroup("g-job", "acct-7", T0, T0 + 3_600_000);

  // Work: one kept finished, one failed, one running with a lock and a rate window, one with a
  // memo and a signal.
  const [keptId, failedId, runningId, steppedId] = await store.insertJobs(
    ["w-done", "w-fail", "w-run", "w-step"].map((name) => newJob({ queue: "work", name })),
  );
  const token = 11;
  const claimed = await store.claim({
    queues: ["work"],
    limit: 4,
    now: T0 + 10,
    leaseMs: LEASE_MS,
    token,
  });
  assert.equal(claimed.length, 4);
  assert.deepEqual(
    await store.acquire([{
      id: runningId!,
      token,
      locks: [{ key: "lock-a", limit: 2, expiresAt: T0 + 60_000, retryAt: T0 + 1_000 }],
      rates: [{ key: "rate-a", max: 10, perMs: 60_000 }],
    }], T0 + 10),
    [null],
  );
  const line = (jobId: number, message: string) => ({
    jobId,
    attempt: 1,
    at: T0 + 15,
    level: "info",
    message,
    fields: '{"k":1}',
    encrypted: false,
    bytes: message.length + 7,
  });
  const settled = await store.settle(
    [
      {
        kind: "complete",
        id: keptId!,
        token,
        at: T0 + 20,
        durationMs: 10,
        output: '"ok"',
        keepUntil: T0 + 86_400_000,
      },
      { kind: "fail", id: failedId!, token, error: BOOM, attempts: 1, at: T0 + 20 },
      {
        kind: "step",
        id: steppedId!,
        token,
        at: T0 + 20,
        step: {
          seq: 1,
          key: "charge",
          kind: "step",
          output: '"charged"',
          until: null,
          done: true,
          attempt: 1,
          durationMs: 3,
        },
      },
    ],
    undefined,
    {
      logs: {
        lines: [line(keptId!, "started"), line(keptId!, "done"), line(failedId!, "oops")],
        maxBytesPerJob: 65_536,
      },
    },
  );
  assert.deepEqual(settled.applied, [true, true, true]);
  assert.equal(
    await store.signal({ jobId: steppedId!, name: "go", payload: '"now"', now: T0 + 30 }),
    "buffered",
  );

  // The chain's first link done (its second is queued), a batch member done and one failed (its
  // catch queued), the flow's root done (its child queued).
  const moveOn = await store.claim({
    queues: ["chain", "batch", "flow"],
    limit: 10,
    now: T0 + 40,
    leaseMs: LEASE_MS,
    token: 12,
  });
  const byName = new Map(moveOn.map((job) => [job.name, job.id]));
  const done = (name: string) => ({
    kind: "complete" as const,
    id: byName.get(name)!,
    token: 12,
    at: T0 + 50,
    output: `"${name}"`,
  });
  const failed = {
    kind: "fail" as const,
    id: byName.get("b2")!,
    token: 12,
    error: BOOM,
    attempts: 1,
    at: T0 + 50,
  };
  const release = ["b3"].map((name) => ({
    kind: "release" as const,
    id: byName.get(name)!,
    token: 12,
    at: T0 + 50,
    availableAt: T0 + 50,
    error: null,
    refundAttempt: true,
  }));
  assert.deepEqual(
    (await store.settle([done("c1"), done("b1"), failed, done("a"), ...release])).applied,
    [true, true, true, true, true],
  );
  return {
    batchId: batch.id,
    chainId,
    flowId: flow.id,
    keptId: keptId!,
    failedId: failedId!,
    runningId: runningId!,
    steppedId: steppedId!,
    firedId: firedId!,
  };
}
