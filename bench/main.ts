/**
 * `deno task bench`: our dispatch and drain rates beside the raw SQLite
 * ceiling of this machine, every figure a median of several interleaved runs
 * and a ratio to a baseline measured in the same run.
 *
 * @module
 */
import { ceilingMeasurements } from "./ceiling.ts";
import { readEnvironment } from "./environment.ts";
import { parseBenchFlags, USAGE, UsageError } from "./flags.ts";
import { queueMeasurements } from "./queue.ts";
import { buildRows, formatJson, formatMarkdown, type Report } from "./report.ts";
import { runRounds } from "./rounds.ts";

/** The warm-up round's share of the jobs of a timed run. */
const WARMUP_SHARE = 0.1;

/** Runs the bench with `args` (`Deno.args`) and returns the process exit code. */
export async function main(args: readonly string[]): Promise<number> {
  let flags;
  try {
    flags = parseBenchFlags(args);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    console.error(`bench: ${error.message}\n\n${USAGE}`);
    return 2;
  }
  if (flags.help) {
    console.log(USAGE);
    return 0;
  }
  const started = performance.now();
  const environment = readEnvironment();
  const measurements = [...ceilingMeasurements(), ...queueMeasurements()];
  const warmupJobs = Math.max(1, Math.round(flags.jobs * WARMUP_SHARE));
  const samples = await runRounds(measurements, {
    runs: flags.runs,
    jobs: flags.jobs,
    warmupJobs,
    onRound: (round, runs) =>
      console.error(round === 0 ? "bench: warm-up round" : `bench: round ${round} of ${runs}`),
  });
  const report: Report = {
    environment,
    runs: flags.runs,
    jobs: flags.jobs,
    warmupJobs,
    elapsedMs: performance.now() - started,
    rows: buildRows(measurements, samples),
  };
  console.log(formatMarkdown(report));
  if (flags.json) console.log(formatJson(report));
  return 0;
}

if (import.meta.main) Deno.exit(await main(Deno.args));
