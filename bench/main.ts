/**
 * `deno task bench`: our dispatch and drain rates beside the raw SQLite
 * ceiling of this machine, the Web Worker executor beside the isolate one,
 * CPU-bound jobs in 1 and 2 Web Workers, and cross-process pick-up latency;
 * every figure a median of several interleaved runs and a ratio to a
 * baseline measured in the same run. `--store postgres` measures the
 * PostgreSQL store beside the raw PostgreSQL ceiling instead; `--store
 * redis` the Redis store beside BullMQ on the same server.
 *
 * @module
 */
import { ceilingMeasurements } from "./ceiling.ts";
import { delayedStartMeasurement } from "./delayed_start.ts";
import { flowFanInMeasurement } from "./flow_fan_in.ts";
import { CPU_JOB_MS, cpuMeasurements } from "./cpu.ts";
import { calibrateSpin, type SpinCalibration } from "./cpu_work.ts";
import { readEnvironment } from "./environment.ts";
import { parseBenchFlags, USAGE, UsageError } from "./flags.ts";
import { withComparisons } from "./groups.ts";
import { pickupMeasurements } from "./pickup.ts";
import { buildPickupRows } from "./pickup_report.ts";
import type { PostgresBench } from "./postgres_groups.ts";
import type { RedisBench } from "./redis_groups.ts";
import { resolveRedisUrl } from "./redis_url.ts";
import { redactPassword } from "../src/stores/database_url.ts";
import { redactPostgresUrl, resolvePostgresUrl } from "./postgres_url.ts";
import {
  delayedBesideMeasurement,
  dispatchMeasurements,
  fairDrainMeasurements,
  isolateDrainMeasurements,
  stepMeasurements,
  workerDrainMeasurements,
} from "./queue.ts";
import { buildRows, formatJson, formatMarkdown, type Report } from "./report.ts";
import { runRounds } from "./rounds.ts";
import { runScale } from "./scale.ts";
import { runSoak } from "./soak.ts";
import { storeRulesMeasurement } from "./store_rules_replay.ts";

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
  if (flags.soakMinutes !== null) return await runSoak(flags.soakMinutes);
  if (flags.scale !== null) return await runScale(flags.scale, flags.jobs);
  const started = performance.now();
  const environment = readEnvironment();
  const warmupJobs = Math.max(1, Math.round(flags.jobs * WARMUP_SHARE));
  let cpu: SpinCalibration | null = null;
  let postgres: PostgresBench | null = null;
  let redis: RedisBench | null = null;
  if (flags.store === "postgres") {
    const url = resolvePostgresUrl(flags.postgresUrl, (name) => Deno.env.get(name));
    // Imported only here, so that the SQLite bench never loads the driver.
    const { postgresBench } = await import("./postgres_groups.ts");
    try {
      postgres = await postgresBench(url, flags.jobs, flags.peers);
    } catch (error) {
      console.error(
        `bench: cannot reach PostgreSQL at ${redactPostgresUrl(url)}: ${
          error instanceof Error ? error.message : String(error)
        }`,
      );
      return 1;
    }
  }
  if (flags.store === "redis") {
    let url = "";
    try {
      url = resolveRedisUrl((name) => Deno.env.get(name));
      // Imported only here, so that the other benches never load the client.
      const { redisBench } = await import("./redis_groups.ts");
      redis = await redisBench(url, flags.jobs);
    } catch (error) {
      console.error(
        `bench: cannot reach Redis at ${redactPassword(url)}: ${
          error instanceof Error ? error.message : String(error)
        }`,
      );
      return 1;
    }
  }
  const server = postgres ?? redis;
  const measurements = withComparisons(
    server?.byGroup ?? {
      ceiling: [...ceilingMeasurements(), storeRulesMeasurement()],
      dispatch: dispatchMeasurements(),
      drain: [...isolateDrainMeasurements(), delayedBesideMeasurement()],
      workers: workerDrainMeasurements(),
      cpu: cpuMeasurements(() => cpu ??= calibrateSpin(CPU_JOB_MS)),
      steps: stepMeasurements(),
      fair: fairDrainMeasurements(),
      // Imported only here, so that a bench without --peers loads none of them.
      ...(flags.peers && {
        peers: await (await import("./peers/mod.ts")).peerMeasurements((why) =>
          console.error(`bench: --peers: ${why}`)
        ),
      }),
    },
    flags.only,
  );
  const samples = await runRounds(measurements, {
    runs: flags.runs,
    jobs: flags.jobs,
    warmupJobs,
    onRound: (round, runs) =>
      progress(started, round === 0 ? "warm-up round" : `round ${round} of ${runs}`),
  });
  const pickups = server !== null ? withComparisons(server.pickups, flags.only) : [
    ...(flags.only.has("pickup") ? [...pickupMeasurements(), delayedStartMeasurement()] : []),
    ...(flags.only.has("flows") ? [flowFanInMeasurement()] : []),
  ];
  // Every pick-up measurement has fixed counts: `jobs` is unused, `warmupJobs` only turns the
  // warm-up round on.
  const pickupSamples = await runRounds(pickups, {
    runs: flags.runs,
    jobs: 0,
    warmupJobs: 1,
    onRound: (round, runs) =>
      progress(
        started,
        round === 0 ? "pick-up warm-up round" : `pick-up round ${round} of ${runs}`,
      ),
  });
  const report: Report = {
    environment,
    store: flags.store,
    postgres: postgres?.server ?? null,
    redis: redis?.server ?? null,
    runs: flags.runs,
    jobs: flags.jobs,
    warmupJobs,
    workerDrains: measurements.some(({ id }) => id.startsWith("drain-workers-")),
    cpu,
    elapsedMs: performance.now() - started,
    rows: buildRows(measurements, samples),
    pickup: buildPickupRows(pickups, pickupSamples),
  };
  console.log(formatMarkdown(report));
  if (flags.json) console.log(formatJson(report));
  return 0;
}

/** Says on stderr what starts now, and how long the bench has run. */
function progress(started: number, what: string): void {
  console.error(`bench: ${what} (at ${((performance.now() - started) / 1000).toFixed(0)} s)`);
}

if (import.meta.main) Deno.exit(await main(Deno.args));
