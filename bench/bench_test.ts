/**
 * Runs `deno task bench` once per store, at a size that proves it still
 * runs, not how fast: every group of the store with one run of 100 jobs.
 * The bench asserts nothing about speed; this asserts that it ends well and
 * prints a figure on every row, so that a schema step or a renamed export
 * cannot break it unnoticed. PostgreSQL and Redis run when their
 * `QUEUE_TEST_*_URL` variables are set, as the store tests do.
 *
 * @module
 */
import assert from "node:assert/strict";

const POSTGRES_URL = Deno.env.get("QUEUE_TEST_POSTGRES_URL");
const REDIS_URL = Deno.env.get("QUEUE_TEST_REDIS_URL");

/** Runs the bench with `flags` and gives back what it printed, failing on a non-zero exit. */
async function bench(flags: string[], env: Record<string, string> = {}): Promise<string> {
  const main = new URL("./main.ts", import.meta.url).pathname;
  const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", main, "--runs", "1", "--jobs", "100", ...flags],
    env: { ...env, NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const printed = new TextDecoder().decode(stdout);
  const errors = new TextDecoder().decode(stderr);
  assert.equal(code, 0, `the bench exited ${code}:\n${errors}\n${printed}`);
  return printed;
}

/** Every row of the report's tables: none may lack its figure. */
function assertEveryRowMeasured(report: string): void {
  const rows = report.split("\n").filter((line) => /^\| (?!-|measurement|pick-up)/.test(line));
  assert.ok(rows.length > 0, `no table rows in:\n${report}`);
  for (const row of rows) {
    const figure = row.split("|")[2]?.trim() ?? "";
    assert.match(figure, /^[0-9][0-9,.]*$/, `a row without a figure: ${row}`);
  }
}

Deno.test("deno task bench runs every SQLite group", async () => {
  assertEveryRowMeasured(await bench([]));
});

Deno.test({
  name: "deno task bench --store postgres runs every group",
  ignore: POSTGRES_URL === undefined,
  async fn() {
    assertEveryRowMeasured(await bench(["--store", "postgres", "--postgres-url", POSTGRES_URL!]));
  },
});

Deno.test({
  name: "deno task bench --store redis runs every group",
  ignore: REDIS_URL === undefined,
  async fn() {
    assertEveryRowMeasured(
      await bench(["--store", "redis"], { QUEUE_BENCH_REDIS_URL: REDIS_URL! }),
    );
  },
});
