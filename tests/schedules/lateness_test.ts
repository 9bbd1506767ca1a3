/**
 * The lateness figure of schedules, short form: an `everyMs: 1000` schedule
 * over 5 slots, printed beside a plain timer's (the full 200-slot figure is
 * `deno task bench:schedules`). Printed, never asserted as a duration: the
 * machine is shared. What is asserted: no job starts before its slot.
 */
import assert from "node:assert/strict";
import { describeLateness, measureLateness } from "../../bench/schedule_lateness.ts";
import { postgresTestUrl } from "../_postgres.ts";

for (const store of ["sqlite", "postgres"] as const) {
  Deno.test({
    name: `${store}: slot lateness of an every-second schedule over 5 slots (printed)`,
    ignore: store === "postgres" && postgresTestUrl() === null,
    async fn() {
      const sample = await measureLateness(5, store);
      assert.equal(sample.schedule.length, 5);
      for (const late of sample.schedule) {
        assert.ok(late >= 0, `a job started before its slot: ${late} ms`);
      }
      console.log(
        `${store}, everyMs 1000, 5 slots: job start after its slot ${
          describeLateness(sample.schedule)
        }; setTimeout baseline ${describeLateness(sample.timer)}`,
      );
    },
  });
}
