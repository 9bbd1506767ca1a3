/**
 * Outputs survive their trip through JSON: a schema whose values would come
 * back changed is refused at `defineJob`, naming the job and the part; a
 * returned value that would change is refused when it is stored, and the
 * wait rejects instead of resolving with a value that contradicts its type.
 *
 * @module
 */
import assert from "node:assert/strict";
import { z } from "zod";
import { defineJob, type PayloadSchema } from "../mod.ts";
import { holdsTransform, jsonChange, MAX_JSON_DEPTH } from "../src/json_safe.ts";
import { failedCount, within } from "./_helpers.ts";
import { storeTest } from "./_stores.ts";

const PREFIX =
  'Job "out": output is stored as JSON, and its schema has a part that does not survive it: ';

function refused(output: PayloadSchema, part: string): void {
  assert.throws(
    () => defineJob({ name: "out", schema: z.null(), output, handle: () => undefined as never }),
    (error: Error) => {
      assert.ok(error instanceof TypeError);
      assert.equal(error.message.slice(0, PREFIX.length), PREFIX);
      assert.equal(error.message.slice(PREFIX.length, PREFIX.length + part.length), part);
      return true;
    },
  );
}

Deno.test("defineJob() refuses an output schema that does not survive JSON, naming the part", () => {
  refused(z.map(z.string(), z.number()), "output: a Map comes back as {}: use z.record()");
  refused(z.date(), "output: a Date comes back as a string: use z.iso.datetime()");
  refused(z.coerce.date(), "output: a Date comes back as a string");
  refused(z.object({ order: z.object({ when: z.date() }) }), "output.order.when: a Date");
  refused(z.array(z.set(z.string())), "output[]: a Set comes back as {}");
  refused(z.tuple([z.string(), z.bigint()]), "output[1]: a BigInt cannot be written as JSON");
  refused(z.record(z.string(), z.symbol()), "output.*: a symbol cannot be written as JSON");
  refused(z.object({ id: z.number() }).catchall(z.nan()), "output.*: NaN comes back as null");
  refused(z.union([z.string(), z.promise(z.string())]), "output: a Promise comes back as {}");
  refused(z.string().optional(), "output: undefined comes back as null: use z.null()");
  refused(z.array(z.undefined()), "output[]: undefined comes back as null");
  refused(z.literal([1, 2n]), "output: a BigInt");
  refused(z.string().pipe(z.coerce.date()), "output: a Date");
  refused(z.any().pipe(z.map(z.string(), z.string())).nullable().default(null), "output: a Map");
  const Node: z.ZodType = z.lazy(() => z.object({ at: z.date(), next: Node.optional() }));
  refused(Node, "output.at: a Date");
});

Deno.test("defineJob() accepts output schemas whose values survive JSON", () => {
  const Tree: z.ZodType = z.lazy(() =>
    z.object({ name: z.string(), children: z.array(Tree), note: z.string().optional() })
  );
  for (
    const output of [
      z.object({
        at: z.iso.datetime(),
        tags: z.array(z.string()),
        maybe: z.string().optional(),
        gone: z.undefined(),
        count: z.number().int().nullable(),
        kind: z.enum(["a", "b"]),
        pairs: z.array(z.tuple([z.string(), z.number()])),
        byName: z.record(z.string(), z.boolean().optional()),
      }),
      z.string().transform((text) => text.length),
      z.union([z.literal("x"), z.null()]),
      Tree,
      z.any(),
    ]
  ) {
    defineJob({ name: "out", schema: z.null(), output, handle: () => null as never });
  }
});

storeTest(
  "a returned output that JSON would change fails the job, and dispatchAndWait rejects",
  async (db) => {
    const dated = defineJob({
      name: "dated",
      schema: z.null(),
      maxAttempts: 1,
      output: z.string().transform(() => new Date(0)),
      handle: () => "then",
    });
    const mapped = defineJob({
      name: "mapped",
      schema: z.null(),
      maxAttempts: 1,
      output: z.object({ index: z.instanceof(Map) }),
      handle: () => ({ index: new Map([["a", 1]]) }),
    });
    const plain = defineJob({
      name: "plain",
      schema: z.null(),
      output: z.object({ at: z.iso.datetime(), note: z.string().optional() }),
      handle: () => ({ at: new Date(0).toISOString(), note: undefined }),
    });
    const queue = await db.open({ jobs: [dated, mapped, plain] });
    const worker = queue.work({ executor: "isolate" });
    await assert.rejects(
      within(queue.dispatchAndWait(dated, null), 60_000, "the dated job"),
      /Cannot store the output of "dated": output does not survive JSON: output: a Date comes back as what toJSON\(\) returned/,
    );
    await assert.rejects(
      within(queue.dispatchAndWait(mapped, null), 60_000, "the mapped job"),
      /output does not survive JSON: output\.index: a Map comes back as a plain object/,
    );
    assert.deepEqual(await within(queue.dispatchAndWait(plain, null), 60_000, "the plain job"), {
      at: "1970-01-01T00:00:00.000Z",
    });
    assert.equal(await failedCount(queue), 2);
    await worker.stop();
  },
);

Deno.test("holdsTransform() finds a transform or a pipe anywhere in a schema, and calls no default", () => {
  const Tree: z.ZodType = z.lazy(() =>
    z.object({ name: z.string().transform((name) => name.toUpperCase()), children: z.array(Tree) })
  );
  for (
    const schema of [
      z.string().transform((text) => text.length),
      z.preprocess((value) => value, z.number()),
      z.string().pipe(z.coerce.number()),
      z.codec(z.string(), z.number(), { decode: Number, encode: String }),
      z.stringbool(),
      z.object({ user: z.object({ tags: z.array(z.string().transform((tag) => tag.trim())) }) }),
      z.union([z.null(), z.tuple([z.number()], z.string().transform(Number))]),
      z.record(z.string(), z.number().transform(String)).optional().default({}),
      Tree,
    ]
  ) {
    assert.equal(holdsTransform(schema), true, JSON.stringify(schema._zod.def.type));
  }
  const Plain: z.ZodType = z.lazy(() => z.object({ name: z.string(), children: z.array(Plain) }));
  const defaults = z.object({
    at: z.iso.datetime(),
    name: z.string().trim().toLowerCase(),
    list: z.array(z.number()).default(() => {
      throw new Error("the walk called a default");
    }),
  });
  for (
    const schema of [
      defaults,
      z.object({ id: z.number() }).strict().or(z.literal("none")),
      z.discriminatedUnion("kind", [
        z.object({ kind: z.literal("a") }),
        z.object({ kind: z.literal("b") }),
      ]),
      z.number().catch(0).nullable(),
      Plain,
      z.any(),
    ]
  ) {
    assert.equal(holdsTransform(schema), false, JSON.stringify(schema._zod.def.type));
  }
});

Deno.test("jsonChange() refuses a value nested deeper than MAX_JSON_DEPTH, at any depth, without overflowing the stack", () => {
  const nested = (depth: number, wrap: (inner: unknown) => unknown) => {
    let value: unknown = 1;
    for (let level = 0; level < depth; level++) value = wrap(value);
    return value;
  };
  assert.equal(MAX_JSON_DEPTH, 1_000);
  for (const wrap of [(inner: unknown) => [inner], (inner: unknown) => ({ next: inner })]) {
    assert.equal(jsonChange(nested(1_000, wrap), "output"), null);
    for (const depth of [1_001, 5_000, 1_000_000]) {
      assert.equal(
        jsonChange(nested(depth, wrap), "output"),
        "output: nested deeper than 1000 arrays and objects, the most a stored value may hold",
      );
    }
  }
  const shared = { a: 1 };
  assert.equal(
    jsonChange({ x: [shared, shared], y: { z: [undefined] } }, "v"),
    "v.y.z[0]: undefined comes back as null: use z.null(), or an optional object property",
  );
  const circular: Record<string, unknown> = { list: [1] };
  (circular.list as unknown[]).push({ back: circular });
  assert.equal(
    jsonChange(circular, "v"),
    "v.list[1].back: a circular reference cannot be written as JSON",
  );
  assert.equal(jsonChange({ a: undefined, b: [null, "s", true, 0] }, "v"), null);
});

storeTest(
  "a job output nested deeper than 1000 arrays and objects fails the job with a ValidationError naming it, as a step's output does",
  async (db) => {
    let value: unknown = 1;
    for (let level = 0; level < 5_000; level++) value = [value];
    const deep = defineJob({
      name: "deep-output",
      schema: z.null(),
      maxAttempts: 1,
      output: z.any(),
      handle: () => value,
    });
    const queue = await db.open({ jobs: [deep] });
    const worker = queue.work({ executor: "isolate" });
    await assert.rejects(
      within(queue.dispatchAndWait(deep, null), 60_000, "the deep job"),
      /^ValidationError: Cannot store the output of "deep-output": output does not survive JSON: output: nested deeper than 1000 arrays and objects/,
    );
    await worker.stop();
    await queue.close();
  },
);
