/**
 * Reading a command's arguments (src/cli/args.ts): a negative number is a
 * flag's value or a positional argument, in its place, never a flag.
 *
 * @module
 */
import assert from "node:assert/strict";
import { type Flag, parseFlags } from "../../src/cli/args.ts";

const FLAGS: Record<string, Flag> = {
  limit: { type: "string", value: "N", help: "at most N" },
  json: { type: "boolean", help: "print JSON" },
};

Deno.test("parseFlags() reads a negative number as a flag's value after a flag that takes one, else as a positional argument in its place", () => {
  const parsed = parseFlags("retry", ["1", "-2", "--limit", "-3", "--json", "4", "-5e2"], FLAGS);
  assert.deepEqual(parsed.positionals, ["1", "-2", "4", "-5e2"]);
  assert.deepEqual({ ...parsed.values }, { limit: "-3", json: true });
  assert.deepEqual(parseFlags("logs", ["-5"], FLAGS).positionals, ["-5"]);
  assert.deepEqual(parseFlags("logs", ["--", "-5", "--json"], FLAGS).positionals, [
    "-5",
    "--json",
  ]);
  assert.throws(() => parseFlags("logs", ["-x"], FLAGS), /unknown flag -x/);
});

Deno.test("parseFlags() refuses a flag that takes a value given twice, in either form, since which one was meant is not known; a switch twice is taken", () => {
  for (const args of [["--limit", "1", "--limit", "2"], ["--limit=1", "--limit", "1"]]) {
    assert.throws(
      () => parseFlags("failed", args, FLAGS),
      {
        name: "UsageError",
        message: "queue failed: --limit is given twice: give it once (see failed --help)",
      },
    );
  }
  assert.deepEqual({ ...parseFlags("failed", ["--json", "--json"], FLAGS).values }, { json: true });
});
