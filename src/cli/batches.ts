/**
 * The batch commands: `batches` (a table), `cancel-batch`, `retry-batch` and
 * `prune-batches`. Like the other admin commands they open the queue with no
 * jobs registered.
 *
 * @module
 * @internal
 */
import { type BatchStatus, ranShare } from "../batch.ts";
import { expectPositionals, readInteger, readSwitch } from "./args.ts";
import { HOURS_FLAG, openAdminQueue, plural, readHours, readIds } from "./admin.ts";
import type { Command } from "./command.ts";
import { formatTable, shortName, tableTime } from "./table.ts";

/** A batch's state in one word. */
function state(batch: BatchStatus): string {
  if (batch.finished) return batch.cancelled ? "cancelled" : batch.failed > 0 ? "failed" : "done";
  return batch.cancelled ? "cancelling" : "running";
}

const batches: Command = {
  name: "batches",
  operands: "",
  summary: "list batches, newest first, with their progress",
  description:
    "Lists batches, newest first: id, name, state, progress (the share of jobs that ran: succeeded\nor failed, not skipped), and how many jobs are pending, succeeded, failed and skipped out of\nthe total.",
  flags: {
    limit: { type: "string", value: "N", help: "show at most N batches, 1 to 1000 (default 100)" },
    json: { type: "boolean", help: "print a JSON array" },
  },
  async run(args) {
    expectPositionals(args, 0, 0, "");
    const limit = readInteger(args, "limit", 1, 1000) ?? 100;
    const json = readSwitch(args, "json");
    await using queue = await openAdminQueue(args);
    const list = await queue.batches({ limit });
    if (json) {
      console.log(
        JSON.stringify(list.map((batch) => ({ ...batch, progress: batch.progress() })), null, 2),
      );
    } else if (list.length === 0) {
      console.log("No batches");
    } else {
      console.log(formatTable(
        [
          "id",
          "name",
          "state",
          "progress",
          "total",
          "pending",
          "succeeded",
          "failed",
          "skipped",
          "created at",
        ],
        list.map((batch) => [
          String(batch.id),
          shortName(batch.name, 40),
          state(batch),
          `${ranShare(batch)}%`,
          String(batch.total),
          String(batch.pending),
          String(batch.succeeded),
          String(batch.failed),
          String(batch.skipped),
          tableTime(batch.createdAt),
        ]),
        ["right", "left", "left", "right", "right", "right", "right", "right", "right"],
      ));
    }
    return 0;
  },
};

const cancelBatch: Command = {
  name: "cancel-batch",
  operands: "<id>",
  summary: "cancel a batch: skip its jobs that have not started",
  description:
    "Cancels a batch: its jobs that are not running are skipped, running ones finish, its then\ncallbacks never run and its finally callbacks run once nothing is pending. Exits 1 if there\nis no such batch, or it was cancelled already or has finished.",
  flags: {},
  async run(args) {
    expectPositionals(args, 1, 1, "the batch id");
    const [id] = readIds(args, "batch");
    await using queue = await openAdminQueue(args);
    if (!await queue.cancelBatch(id!)) {
      const batch = await queue.batchStatus(id!);
      const why = batch === null
        ? "no such batch"
        : batch.cancelled
        ? "already cancelled"
        : "it has finished";
      console.error(`queue cancel-batch: cannot cancel batch ${id}: ${why}`);
      return 1;
    }
    console.log(`Cancelled batch ${id}`);
    return 0;
  },
};

const retryBatch: Command = {
  name: "retry-batch",
  operands: "<id>",
  summary: "put a batch's failed jobs back on their queues",
  description:
    "Puts every failed job of a batch back on its queue, due now, with fresh attempts; they are\npending in the batch again. Exits 1 if there is no such batch.",
  flags: {},
  async run(args) {
    expectPositionals(args, 1, 1, "the batch id");
    const [id] = readIds(args, "batch");
    await using queue = await openAdminQueue(args);
    if (await queue.batchStatus(id!) === null) {
      console.error(`queue retry-batch: no batch ${id}`);
      return 1;
    }
    console.log(`Retried ${plural(await queue.retryBatch(id!), "failed job")} of batch ${id}`);
    return 0;
  },
};

const pruneBatches: Command = {
  name: "prune-batches",
  operands: "",
  summary: "delete batches that ended more than some hours ago",
  description:
    "Deletes the batches that ended (nothing left pending, cancelled or not) more than --hours ago,\nwith their callbacks that never ran. A cancelled batch with a job still running has not ended.\nTheir jobs are not touched.",
  flags: HOURS_FLAG,
  async run(args) {
    expectPositionals(args, 0, 0, "");
    const hours = readHours(args);
    await using queue = await openAdminQueue(args);
    const count = await queue.pruneBatches({ olderThanMs: hours * 3_600_000 });
    console.log(
      `Deleted ${plural(count, "batch", "batches")} that ended more than ${
        plural(hours, "hour")
      } ago`,
    );
    return 0;
  },
};

/** The batch commands, in the order the help lists them. */
export const BATCH_COMMANDS: readonly Command[] = [batches, cancelBatch, retryBatch, pruneBatches];
