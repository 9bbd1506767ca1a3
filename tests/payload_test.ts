import assert from "node:assert/strict";
import { storedCounts } from "./_helpers.ts";
import { z } from "zod";
import { defineJob, Queue, type QueueCounts, ValidationError } from "../mod.ts";
import { workUntilEmpty } from "../src/testing.ts";
import { storeTest } from "./_stores.ts";

const CAP = 256 * 1024;

/** A job that keeps whatever payload it receives, by job id. */
function recorder(schema: z.ZodType = z.any()) {
  const seen = new Map<number, unknown>();
  const job = defineJob({
    name: "record",
    schema,
    handle(payload, ctx) {
      seen.set(ctx.id, payload);
    },
  });
  return { job, seen };
}

const text = z.object({ text: z.string() });
const textJob = defineJob({ name: "text", schema: text, handle() {} });

/** A `{ text }` payload whose JSON is exactly `bytes` bytes long. */
function payloadOfBytes(bytes: number): { text: string } {
  const overhead = JSON.stringify({ text: "" }).length;
  return { text: "x".repeat(bytes - overhead) };
}

async function totals(queue: Queue): Promise<Omit<QueueCounts, "running">> {
  let pending = 0, delayed = 0, reserved = 0, failed = 0;
  for (const counts of Object.values(await queue.counts())) {
    pending += counts.pending;
    delayed += counts.delayed;
    reserved += counts.reserved;
    failed += counts.failed;
  }
  return { pending, delayed, reserved, failed };
}

function assertValidationError(jobName: string, detail: RegExp) {
  return (error: unknown) => {
    assert.ok(error instanceof ValidationError, `expected a ValidationError, got ${error}`);
    assert.equal(error.name, "ValidationError");
    assert.equal(error.jobName, jobName);
    assert.ok(error.message.startsWith(`Cannot dispatch "${jobName}": `), error.message);
    assert.match(error.message, detail);
    return true;
  };
}

Deno.test("Queue.dispatch() accepts a payload exactly at the default 256 KiB cap", async () => {
  await using queue = await Queue.open({ path: ":memory:", jobs: [textJob] });
  const payload = payloadOfBytes(CAP);
  assert.equal(new TextEncoder().encode(JSON.stringify(payload)).length, CAP);
  await queue.dispatch(textJob, payload);
  assert.equal((await totals(queue)).pending, 1);
});

Deno.test("Queue.dispatch() refuses a payload one byte over the cap and stores nothing", async () => {
  await using queue = await Queue.open({ path: ":memory:", jobs: [textJob] });
  await assert.rejects(
    queue.dispatch(textJob, payloadOfBytes(CAP + 1)),
    assertValidationError("text", /payload is 262145 bytes of JSON: over the cap of 262144 bytes/),
  );
  assert.deepEqual(await storedCounts(queue), {});
});

Deno.test("Queue.dispatch() refuses a 10 MB payload and stores nothing", async () => {
  await using queue = await Queue.open({ path: ":memory:", jobs: [textJob] });
  await assert.rejects(
    queue.dispatch(textJob, { text: "y".repeat(10 * 1024 * 1024) }),
    assertValidationError("text", /over the cap of 262144 bytes/),
  );
  assert.deepEqual(await storedCounts(queue), {});
});

Deno.test("Queue.dispatchMany() refuses the whole batch when one payload is over the cap", async () => {
  await using queue = await Queue.open({ path: ":memory:", jobs: [textJob] });
  const payloads = Array.from({ length: 10 }, () => payloadOfBytes(100));
  payloads[7] = payloadOfBytes(CAP + 1);
  await assert.rejects(queue.dispatchMany(textJob, payloads), ValidationError);
  assert.deepEqual(await storedCounts(queue), {});
});

Deno.test("Queue.open() applies a custom maxPayloadBytes", async () => {
  await using queue = await Queue.open({ path: ":memory:", jobs: [textJob], maxPayloadBytes: 100 });
  await queue.dispatch(textJob, payloadOfBytes(100));
  await assert.rejects(
    queue.dispatch(textJob, payloadOfBytes(101)),
    assertValidationError("text", /payload is 101 bytes of JSON: over the cap of 100 bytes/),
  );
  assert.equal((await totals(queue)).pending, 1);
});

Deno.test("The payload cap counts UTF-8 bytes, not UTF-16 units", async () => {
  await using queue = await Queue.open({ path: ":memory:", jobs: [textJob], maxPayloadBytes: 100 });
  const overhead = JSON.stringify({ text: "" }).length; // 11 bytes
  // 22 emoji are 88 bytes of UTF-8 (44 UTF-16 units): 99 bytes in all.
  await queue.dispatch(textJob, { text: "😀".repeat(22) });
  // 23 emoji are 92 bytes: 103 in all, over the cap though only 57 UTF-16 units.
  await assert.rejects(
    queue.dispatch(textJob, { text: "😀".repeat(23) }),
    assertValidationError("text", new RegExp(`payload is ${overhead + 92} bytes`)),
  );
  assert.equal((await totals(queue)).pending, 1);
});

Deno.test("Queue.open() refuses a maxPayloadBytes that is not an integer >= 2", async () => {
  for (const maxPayloadBytes of [1, 0, -5, 1.5, NaN, Infinity]) {
    await assert.rejects(
      Queue.open({ path: ":memory:", jobs: [textJob], maxPayloadBytes }),
      (error: unknown) => error instanceof RangeError && /maxPayloadBytes/.test(error.message),
    );
  }
});

Deno.test("Queue.dispatch() refuses a payload that fails its schema with zod's issues", async () => {
  const order = defineJob({
    name: "x",
    schema: z.object({ orderId: z.number().int(), email: z.email() }),
    handle() {},
  });
  await using queue = await Queue.open({ path: ":memory:", jobs: [order] });
  await assert.rejects(
    queue.dispatch(order, { orderId: "7", email: "nope" } as never),
    (error: unknown) => {
      assertValidationError("x", /^Cannot dispatch "x": payload\.orderId: .*expected number/)(
        error,
      );
      const { issues, cause } = error as ValidationError;
      assert.deepEqual(issues.map(({ path }) => path), [["orderId"], ["email"]]);
      assert.ok(issues.every(({ message }) => message.length > 0));
      assert.match((error as Error).message, /; payload\.email: /);
      assert.ok(cause instanceof z.ZodError, "cause is zod's error");
      return true;
    },
  );
  assert.deepEqual(await storedCounts(queue), {});
});

Deno.test("Queue.dispatch() checks the payload as the worker will see it after JSON, and says which given value JSON changed", async () => {
  const numbers = defineJob({
    name: "numbers",
    schema: z.object({ n: z.number(), list: z.array(z.number()).optional() }),
    handle() {},
  });
  const dates = defineJob({ name: "dates", schema: z.object({ at: z.date() }), handle() {} });
  await using queue = await Queue.open({ path: ":memory:", jobs: [numbers, dates] });
  for (const n of [NaN, Infinity, -Infinity]) {
    await assert.rejects(
      queue.dispatch(numbers, { n }),
      assertValidationError(
        "numbers",
        new RegExp(
          `payload\\.n: .*received null \\(payload\\.n was ${n}, which JSON stores as null\\)$`,
        ),
      ),
    );
  }
  await assert.rejects(
    queue.dispatch(numbers, { n: 1, list: [1, undefined as unknown as number] }),
    assertValidationError(
      "numbers",
      /\(payload\.list\.1 was undefined, which JSON stores as null in an array\)$/,
    ),
  );
  await assert.rejects(
    queue.dispatch(numbers, { n: "1" as unknown as number }),
    assertValidationError("numbers", /payload\.n: [^(]*$/),
  );
  await assert.rejects(
    queue.dispatch(dates, { at: new Date() }),
    assertValidationError(
      "dates",
      /payload\.at: .*\(payload\.at was a Date, which JSON stores as its ISO string\)$/,
    ),
  );
  assert.deepEqual(await storedCounts(queue), {});
});

Deno.test("Queue.dispatch() refuses payloads that are not JSON with a ValidationError", async () => {
  const { job } = recorder();
  await using queue = await Queue.open({ path: ":memory:", jobs: [job] });
  const cycle: Record<string, unknown> = { name: "loop" };
  cycle.self = cycle;
  const cases: [string, unknown][] = [
    ["a BigInt", { big: 10n }],
    ["a cycle", cycle],
    ["undefined", undefined],
    ["a function", () => 1],
    ["a symbol", Symbol("s")],
    ["a throwing toJSON", {
      toJSON() {
        throw new Error("boom");
      },
    }],
  ];
  for (const [what, payload] of cases) {
    await assert.rejects(
      queue.dispatch(job, payload),
      (error: unknown) => {
        assertValidationError("record", /payload is not JSON: /)(error);
        return true;
      },
      what,
    );
  }
  assert.deepEqual(await storedCounts(queue), {});
});

Deno.test("Fuzzed payloads round-trip exactly to the handler or are refused with a ValidationError (S03)", async () => {
  const { job, seen } = recorder(z.unknown());
  await using queue = await Queue.open({ path: ":memory:", jobs: [job] });
  const cases: [string, unknown][] = [
    ["emoji", { text: "😀👩‍👩‍👧‍👦🏳️‍🌈", "🔑": "✓" }],
    ["lone surrogates", { high: "\ud800", low: "\udfff", mixed: "a\udc00b\ud83d" }],
    ["right-to-left text", { text: "\u202eשלום עולם\u202c مرحبا", "\u200f": "rtl key" }],
    ["control characters", { text: "\u0000\u0001\b\f\n\r\t\u001f\u007f\u2028\u2029" }],
    ["__proto__ key", JSON.parse('{"__proto__": {"polluted": true}, "ok": 1}')],
    ["constructor key", JSON.parse('{"constructor": {"prototype": {"polluted": true}}}')],
    ["nested __proto__", JSON.parse('{"a": [{"__proto__": {"polluted": true}}]}')],
    ["prototype-named keys", { prototype: 1, hasOwnProperty: 2, toString: 3, valueOf: 4 }],
    ["huge array", Array.from({ length: 60_000 }, (_, index) => index % 10)],
    ["empty values", { a: "", b: [], c: {}, d: null }],
    ["extreme numbers", [Number.MAX_SAFE_INTEGER, -Number.MAX_VALUE, 5e-324, 1e21]],
    ["a bare string", "just text"],
    ["null", null],
    ["a long key", { ["k".repeat(50_000)]: true }],
  ];
  const dispatched = new Map<number, [string, unknown]>();
  for (const [what, payload] of cases) {
    try {
      dispatched.set(await queue.dispatch(job, payload), [what, payload]);
    } catch (error) {
      assert.ok(error instanceof ValidationError, `${what}: refused with ${error}`);
    }
  }
  await workUntilEmpty(queue);
  for (const [id, [what, payload]] of dispatched) {
    assert.ok(seen.has(id), `${what}: the handler ran`);
    assert.deepStrictEqual(seen.get(id), payload, `${what}: round-trips exactly`);
  }
  assert.equal(dispatched.size, cases.length, "every case here fits the cap and is JSON");
  assert.equal(({} as Record<string, unknown>).polluted, undefined);
  assert.equal(Object.prototype.hasOwnProperty.call(Object.prototype, "polluted"), false);
});

Deno.test("Deeply nested payloads never crash the process: they round-trip or are refused (S03)", async () => {
  const { job, seen } = recorder(z.unknown());
  await using queue = await Queue.open({ path: ":memory:", jobs: [job] });
  const outcomes: string[] = [];
  for (const depth of [10_000, 100_000, 1_000_000]) {
    let objects: unknown = "leaf";
    let arrays: unknown = 0;
    for (let level = 0; level < depth; level++) {
      objects = { a: objects };
      arrays = [arrays];
    }
    for (const payload of [objects, arrays]) {
      let id: number;
      try {
        id = await queue.dispatch(job, payload);
      } catch (error) {
        assert.ok(error instanceof ValidationError, `depth ${depth}: refused with ${error}`);
        outcomes.push(`${depth}: refused`);
        continue;
      }
      await workUntilEmpty(queue);
      assert.equal(JSON.stringify(seen.get(id)), JSON.stringify(payload), `depth ${depth}`);
      seen.delete(id);
      outcomes.push(`${depth}: ran`);
    }
  }
  assert.equal(outcomes.length, 6);
  assert.equal(outcomes.filter((outcome) => outcome === "1000000: refused").length, 2);
  assert.deepEqual(await storedCounts(queue), {});
});

Deno.test("A __proto__ payload does not pollute prototypes through a zod object schema", async () => {
  const { job, seen } = recorder(z.looseObject({ ok: z.number() }));
  await using queue = await Queue.open({ path: ":memory:", jobs: [job] });
  const id = await queue.dispatch(
    job,
    JSON.parse('{"ok": 1, "__proto__": {"polluted": true}, "constructor": {"polluted": true}}'),
  );
  await workUntilEmpty(queue);
  const got = seen.get(id) as Record<string, unknown>;
  assert.equal(got.ok, 1);
  assert.equal(got.polluted, undefined, "the payload's own prototype is untouched");
  assert.equal(({} as Record<string, unknown>).polluted, undefined);
});

storeTest(
  "a payload nested deeper than 1000 arrays and objects is refused at dispatch with a ValidationError naming it, and nothing is stored; 1000 levels are stored and run",
  async (db) => {
    const nested = (depth: number, wrap: (inner: unknown) => unknown) => {
      let value: unknown = '[{\\"';
      for (let level = 0; level < depth; level++) value = wrap(value);
      return value;
    };
    let ran = 0;
    const deep = defineJob({
      name: "deep-payload",
      schema: z.any(),
      handle() {
        ran++;
      },
    });
    const queue = await db.open({ jobs: [deep] });
    for (const wrap of [(inner: unknown) => [inner], (inner: unknown) => ({ next: inner })]) {
      for (const refused of [1_001, 20_000]) {
        await assert.rejects(
          queue.dispatch(deep, nested(refused, wrap)),
          (error: Error) =>
            error instanceof ValidationError &&
            /payload is nested deeper than 1000 arrays and objects, the most a stored value may hold/
              .test(error.message),
        );
        await assert.rejects(
          queue.dispatchMany(deep, [null, nested(refused, wrap)]),
          ValidationError,
        );
      }
      await queue.dispatch(deep, nested(1_000, wrap));
    }
    assert.equal((await queue.counts())["default"]?.pending, 2);
    await queue.work({ executor: "isolate", stopWhenEmpty: true }).done;
    assert.equal(ran, 2);
    await queue.close();
  },
);
