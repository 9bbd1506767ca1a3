/**
 * The floor of every awaited call on Redis, with no queue in the way: a
 * `PING` through the store's client (node-redis) on a connection of its
 * own, the next one sent when the answer came. A one-at-a-time dispatch, or
 * any store call a worker awaits, makes at least this round trip, so its
 * rate bounds theirs; beside BullMQ's `add()` it says what share of BullMQ's
 * single add one bare round trip is.
 *
 * @module
 */
// deno-lint-ignore no-import-prefix
import { createClient } from "npm:@redis/client@^6.4";
import { measureRate } from "./measurement.ts";

/**
 * Round trips made on each new connection before the timing starts: its
 * client is new to every run, as the bench's warm-up round's was.
 */
const WARMUP_ROUND_TRIPS = 500;

/** Times `roundTrips` awaited `PING`s to the server at `url`, one at a time; per second. */
export async function rawRedisRoundTripRate(url: string, roundTrips: number): Promise<number> {
  const client = createClient({ url });
  client.on("error", () => {});
  await client.connect();
  try {
    for (let n = 0; n < WARMUP_ROUND_TRIPS; n++) await client.sendCommand(["PING"]);
    return await measureRate(roundTrips, async () => {
      for (let n = 0; n < roundTrips; n++) await client.sendCommand(["PING"]);
    });
  } finally {
    await client.close();
  }
}
