/** `Queue.workers()`: each worker's heartbeat row, written at its start and on its renewal timer, gone at its stop. */
import assert from "node:assert/strict";
import { z } from "zod";
import { defineJob, Queue } from "../../mod.ts";
import { ManualClock, waitUntil } from "../_helpers.ts";

const NOON = Date.UTC(2026, 0, 1, 12, 0, 0);
const noop = defineJob({ name: "noop", schema: z.null(), queue: "low", handle() {} });

Deno.test("Queue.workers() lists each running worker from its start, as seen within seenWithinMs, until it stops", async () => {
  const clock = new ManualClock(NOON);
  await using queue = await Queue.open({ path: ":memory:", jobs: [noop], clock });
  assert.deepEqual(await queue.workers(), []);
  const one = queue.work({ executor: "isolate", queues: ["high", "low"], concurrency: 3 });
  const two = queue.work({ executor: "isolate", queues: ["low"] });
  try {
    await waitUntil(async () => (await queue.workers()).length === 2, { what: "both heartbeats" });
    const seen = await queue.workers();
    assert.deepEqual(
      seen.map(({ host, pid, queues, concurrency, startedAt, lastSeenAt, running }) => ({
        host,
        pid,
        queues,
        concurrency,
        startedAt,
        lastSeenAt,
        running,
      })).sort((a, b) => b.concurrency - a.concurrency),
      [
        {
          host: Deno.hostname(),
          pid: Deno.pid,
          queues: ["high", "low"],
          concurrency: 3,
          startedAt: new Date(NOON),
          lastSeenAt: new Date(NOON),
          running: 0,
        },
        {
          host: Deno.hostname(),
          pid: Deno.pid,
          queues: ["low"],
          concurrency: 1,
          startedAt: new Date(NOON),
          lastSeenAt: new Date(NOON),
          running: 0,
        },
      ],
    );
    assert.notEqual(seen[0]!.id, seen[1]!.id);
    clock.advance(30_001); // no heartbeat for 30 s on this clock (the next is 10 s away in real time)
    assert.deepEqual(await queue.workers(), []);
    assert.equal((await queue.workers({ seenWithinMs: 31_000 })).length, 2);
    await one.stop();
    assert.equal(
      (await queue.workers({ seenWithinMs: 31_000 })).length,
      1,
      "a stopped worker is gone",
    );
  } finally {
    await Promise.all([one.stop(), two.stop()]);
  }
  assert.deepEqual(await queue.workers({ seenWithinMs: 86_400_000 }), []);
  for (const seenWithinMs of [999, 86_400_001, Number.NaN]) {
    const lists = {
      workers: () => queue.workers({ seenWithinMs }),
      unclaimed: () => queue.unclaimed({ seenWithinMs }),
    };
    for (const [method, list] of Object.entries(lists)) {
      await assert.rejects(
        list(),
        new RegExp(
          `^RangeError: ${method}: seenWithinMs must be a number of ms from 1000 to 86400000: got ${seenWithinMs}$`,
        ),
      );
    }
  }
});
