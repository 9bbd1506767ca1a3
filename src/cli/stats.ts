/**
 * The `stats` command: jobs per queue by state, once or refreshed every
 * second until a signal.
 *
 * @module
 * @internal
 */
import type { QueueCounts } from "../admin/listing.ts";
import type { UnclaimedJobs } from "../admin/workers.ts";
import { expectPositionals, readSwitch } from "./args.ts";
import { openAdminQueue } from "./admin.ts";
import type { Command } from "./command.ts";
import { onSignals } from "./stop_signals.ts";
import { formatTable } from "./table.ts";

const REFRESH_MS = 1_000;

/**
 * The counts per queue, then the running jobs with their progress, then
 * `unclaimed`, the due jobs no worker knows, if any.
 */
function countsTable(counts: Record<string, QueueCounts>, unclaimed: UnclaimedJobs[]): string {
  const table = queueTables(counts);
  if (unclaimed.length === 0) return table;
  return `${table}\n\nDue jobs no running worker knows (waiting for one that does)\n${
    formatTable(
      ["queue", "name", "due"],
      unclaimed.map(({ queue, name, pending }) => [queue, name, String(pending)]),
      ["left", "left", "right"],
    )
  }`;
}

function queueTables(counts: Record<string, QueueCounts>): string {
  const queues = Object.keys(counts).sort();
  if (queues.length === 0) return "No jobs";
  const columns = ["pending", "delayed", "reserved", "failed"] as const;
  const table = formatTable(
    ["queue", ...columns],
    queues.map((queue) => [queue, ...columns.map((column) => String(counts[queue]![column]))]),
    ["left", "right", "right", "right", "right"],
  );
  const running = queues.flatMap((queue) => counts[queue]!.running.map((job) => ({ queue, job })));
  if (running.length === 0) return table;
  return `${table}\n\nRunning\n${
    formatTable(
      ["id", "queue", "name", "attempt", "progress"],
      running.map(({ queue, job }) => [
        String(job.id),
        queue,
        job.name,
        String(job.attempt),
        job.progress === null ? "-" : `${Math.floor(job.progress)}%`,
      ]),
      ["right", "left", "left", "right", "right"],
    )
  }`;
}

/** `stats [--watch] [--json]`. */
export const stats: Command = {
  name: "stats",
  operands: "",
  summary: "count jobs per queue: pending, delayed, reserved, failed; list running ones",
  description:
    "Counts the jobs of each queue by state: pending (due now), delayed (due later), reserved\n(running) and failed, then lists the running jobs with the progress their handlers report.\nWith --watch, counts again every second until Ctrl-C.",
  flags: {
    watch: { type: "boolean", help: "refresh every second until SIGINT or SIGTERM" },
    json: { type: "boolean", help: "print JSON (with --watch, one line per refresh)" },
  },
  async run(args) {
    expectPositionals(args, 0, 0, "");
    const json = readSwitch(args, "json");
    const watch = readSwitch(args, "watch");
    await using queue = await openAdminQueue(args);
    const print = async () => {
      const counts = await queue.counts();
      const table = async () => countsTable(counts, await queue.unclaimed());
      if (json) console.log(JSON.stringify(counts, null, watch ? undefined : 2));
      else if (watch && Deno.stdout.isTerminal()) {
        // Home and clear, then the table: a screen that redraws in place.
        console.log(`\x1b[H\x1b[2J${new Date().toLocaleTimeString()}\n\n${await table()}`);
      } else console.log(await table());
    };
    if (!watch) {
      await print();
      return 0;
    }
    // Listening before the first count: a signal at any point after start ends it with 0.
    const stopped = Promise.withResolvers<void>();
    using _signals = onSignals(() => stopped.resolve());
    await print();
    for (;;) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const tick = new Promise<"tick">((resolve) =>
        timer = setTimeout(() => resolve("tick"), REFRESH_MS)
      );
      const woke = await Promise.race([tick, stopped.promise]);
      clearTimeout(timer);
      if (woke !== "tick") return 0;
      await print();
    }
  },
};
