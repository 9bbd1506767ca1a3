/**
 * What `deno task bench --store postgres` measures, by group: the raw
 * PostgreSQL ceiling, dispatch, drains in one and in several processes, and
 * cross-process pick-up latency. `main.ts` imports this module only for
 * `--store postgres`, so that the SQLite bench never loads the driver.
 *
 * @module
 */
import type { Group } from "./groups.ts";
import type { Measurement } from "./measurement.ts";
import type { PickupMeasurement } from "./pickup.ts";
import { postgresCeilingMeasurements } from "./postgres_ceiling.ts";
import { type PostgresServer, SERVER_SETTINGS } from "./postgres_environment.ts";
import { postgresPickupMeasurements } from "./postgres_pickup.ts";
import {
  postgresDispatchMeasurements,
  postgresDrainMeasurements,
  postgresStepMeasurements,
} from "./postgres_queue_rates.ts";
import { connectRaw } from "./postgres_schema.ts";
import { postgresSizes } from "./postgres_sizes.ts";
import { redactPostgresUrl } from "./postgres_url.ts";

/** The PostgreSQL bench of one run. */
export interface PostgresBench {
  /** The server, read before anything is measured (so an unreachable one fails at once). */
  readonly server: PostgresServer;
  /** Throughput measurements by group. */
  readonly byGroup: Readonly<Partial<Record<Group, readonly Measurement[]>>>;
  /** The pick-up latency measurements by group: ours, and with `peers` the peers'. */
  readonly pickups: Readonly<Partial<Record<Group, readonly PickupMeasurement[]>>>;
}

/**
 * The measurements on the server at `url`, sized by `--jobs`; with `peers`,
 * pg-boss's and Graphile Worker's too.
 */
export async function postgresBench(
  url: string,
  jobs: number,
  peers: boolean,
): Promise<PostgresBench> {
  const server = await readPostgresServer(url);
  const sizes = postgresSizes(jobs);
  // Imported only here, so that a bench without --peers loads none of them.
  const peerRows = peers
    ? (await import("./peers/postgres.ts")).postgresPeerMeasurements(url, sizes)
    : null;
  return {
    server,
    byGroup: {
      ceiling: postgresCeilingMeasurements(url, sizes),
      dispatch: postgresDispatchMeasurements(url, sizes),
      drain: postgresDrainMeasurements(url, sizes),
      steps: postgresStepMeasurements(url, sizes),
      ...(peerRows !== null && { peers: peerRows.measurements }),
    },
    pickups: {
      pickup: postgresPickupMeasurements(url),
      ...(peerRows !== null && { peers: peerRows.pickups }),
    },
  };
}

/** Reads the server's version and settings; fails when the server cannot be reached. */
async function readPostgresServer(url: string): Promise<PostgresServer> {
  const sql = connectRaw(url);
  try {
    const [row] = await sql.unsafe(SERVER_SETTINGS);
    return {
      url: redactPostgresUrl(url),
      version: String(row!.version),
      synchronousCommit: String(row!.synchronous_commit),
      fsync: String(row!.fsync),
      walSyncMethod: String(row!.wal_sync_method),
    };
  } finally {
    await sql.end({ timeout: 5 });
  }
}
