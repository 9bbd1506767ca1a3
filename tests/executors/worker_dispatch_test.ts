/**
 * What handlers dispatch from a Web Worker is stored as the same dispatch
 * from the isolate executor stores it, and refused with the same errors:
 * the payloads are checked and encoded in the Web Worker, on the values the
 * handler passed, not on the copy `postMessage` makes of them.
 *
 * @module
 */
import assert from "node:assert/strict";
import { generateAppKey } from "../../mod.ts";
import { isEncryptedPayload } from "../../src/encryption.ts";
import { storeTest } from "../_stores.ts";
import { sender, type Sent } from "../fixtures/web_workers/dispatch_jobs.ts";

const JOBS = import.meta.resolve("../fixtures/web_workers/dispatch_jobs.ts");

const KINDS = [
  "to-json",
  "class",
  "url",
  "function",
  "bigint",
  "transform",
  "invalid",
  "date",
  "sealed",
];

storeTest(
  "ctx.queue.dispatch() from a Web Worker stores what the isolate executor stores, and refuses what it refuses with the same errors",
  async (db) => {
    const appKey = generateAppKey();
    const seen: Record<string, Record<string, unknown>> = {};
    for (const executor of ["isolate", "workers"] as const) {
      const queue = await db.open({ jobs: JOBS, appKey });
      const ids = await queue.dispatchMany(sender, KINDS.map((kind) => ({ kind })));
      const worker = queue.work({ executor, queues: ["default"], stopWhenEmpty: true });
      await worker.done;
      assert.deepEqual(worker.stats, { completed: KINDS.length, failed: 0, retried: 0 });
      const byKind: Record<string, unknown> = {};
      for (const [index, id] of ids.entries()) {
        const sent = (await queue.result(id))?.output as Sent;
        if (!("ids" in sent)) {
          byKind[KINDS[index]!] = sent;
          continue;
        }
        const stored = [];
        for (const jobId of new Set(sent.ids)) {
          const payload = (await queue.unfinishedJob(jobId))!.payload;
          stored.push(isEncryptedPayload(payload) ? "(sealed)" : payload);
        }
        byKind[KINDS[index]!] = { ids: sent.ids.length, stored };
      }
      seen[executor] = byKind;
      await queue.close();
    }
    assert.deepEqual(seen.workers, seen.isolate);
    assert.deepEqual(seen.isolate, {
      "to-json": { ids: 1, stored: ['{"amount":{"cents":1234}}'] },
      class: { ids: 1, stored: ['{"at":[1,2]}'] },
      url: { ids: 1, stored: ['{"url":"https://example.com/x"}'] },
      function: { ids: 1, stored: ['{"n":1}'] },
      bigint: {
        error: "ValidationError",
        isValidationError: true,
        issues: [],
        message:
          'Cannot dispatch "dispatched.anything": payload is not JSON: Do not know how to serialize a BigInt',
      },
      transform: { ids: 2, stored: ['{"n":2}', '{"n":3}'] },
      invalid: {
        error: "ValidationError",
        isValidationError: true,
        issues: [{ path: ["n"], message: "Invalid input: expected number, received string" }],
        message:
          'Cannot dispatch "dispatched.counted": payload.n: Invalid input: expected number, received string',
      },
      // The second is a duplicate of the first: one job, keyed by the Date the handler passed.
      date: { ids: 2, stored: ['{"at":"2024-05-17T00:00:00.000Z"}'] },
      sealed: { ids: 1, stored: ["(sealed)"] },
    });
  },
);
