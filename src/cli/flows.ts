/**
 * The flow commands: `flows` (a table of flows, newest first), `flow <id>`
 * (a table of one flow's nodes) and `prune-flows`. Like the other admin commands they
 * open the queue with no jobs registered.
 *
 * @module
 * @internal
 */
import type { FlowStatus } from "../flow.ts";
import { expectPositionals, readInteger, readSwitch } from "./args.ts";
import { HOURS_FLAG, openAdminQueue, plural, readHours, readIds } from "./admin.ts";
import type { Command } from "./command.ts";
import { firstLine, formatTable, shortName, tableTime } from "./table.ts";

/** How many of a flow's nodes are in `state`. */
function count(flow: FlowStatus, state: string): string {
  return String(flow.nodes.filter((node) => node.state === state).length);
}

const flows: Command = {
  name: "flows",
  operands: "",
  summary: "list flows, newest first, with how far their nodes got",
  description:
    "Lists flows, newest first: id, name, state (running while a node can still run, then\nsucceeded, failed or cancelled), and how many of their nodes succeeded, failed, were skipped,\nand are left (waiting, pending or running), out of the total.",
  flags: {
    limit: { type: "string", value: "N", help: "show at most N flows, 1 to 1000 (default 100)" },
    json: { type: "boolean", help: "print a JSON array" },
  },
  async run(args) {
    expectPositionals(args, 0, 0, "");
    const limit = readInteger(args, "limit", 1, 1000) ?? 100;
    const json = readSwitch(args, "json");
    await using queue = await openAdminQueue(args);
    const list = await queue.flows({ limit });
    if (json) {
      console.log(JSON.stringify(list, null, 2));
    } else if (list.length === 0) {
      console.log("No flows");
    } else {
      console.log(formatTable(
        ["id", "name", "state", "nodes", "succeeded", "failed", "skipped", "left", "created at"],
        list.map((flow) => [
          String(flow.id),
          shortName(flow.name, 40),
          flow.state,
          String(flow.nodes.length),
          count(flow, "succeeded"),
          count(flow, "failed"),
          count(flow, "skipped"),
          String(
            flow.nodes.filter((node) => ["waiting", "pending", "running"].includes(node.state))
              .length,
          ),
          tableTime(flow.createdAt),
        ]),
        ["right", "left", "left", "right", "right", "right", "right", "right"],
      ));
    }
    return 0;
  },
};

const flow: Command = {
  name: "flow",
  operands: "<id>",
  summary: "show one flow's nodes: state, job, parents and error",
  description:
    "Shows one flow: its state, then each node (parents before children) with its key, job name,\nstate (waiting, pending, running, succeeded, failed, skipped or cancelled), job id once\nqueued, the nodes it waits for, and the error of a failed one. Exits 1 if there is no such flow.",
  flags: { json: { type: "boolean", help: "print the flow as JSON" } },
  async run(args) {
    expectPositionals(args, 1, 1, "the flow id");
    const [id] = readIds(args, "flow");
    const json = readSwitch(args, "json");
    await using queue = await openAdminQueue(args);
    const status = await queue.flowStatus(id!);
    if (status === null) {
      console.error(`queue flow: no flow ${id}`);
      return 1;
    }
    if (json) {
      console.log(JSON.stringify(status, null, 2));
      return 0;
    }
    console.log(
      `Flow ${status.id} "${shortName(status.name, 60)}": ${status.state}, created ${
        tableTime(status.createdAt)
      }`,
    );
    console.log(formatTable(
      ["key", "job", "state", "job id", "after", "error"],
      status.nodes.map((node) => [
        shortName(node.key, 40),
        shortName(node.name, 40),
        node.state,
        node.jobId === null ? "-" : String(node.jobId),
        node.parents.length === 0 ? "-" : shortName(node.parents.join(", "), 60),
        node.error === null ? "" : firstLine(node.error, 60),
      ]),
      ["left", "left", "left", "right", "left", "left"],
    ));
    return 0;
  },
};

const pruneFlows: Command = {
  name: "prune-flows",
  operands: "",
  summary: "delete flows that ended more than some hours ago",
  description:
    "Deletes the flows that ended (no node left waiting, queued or running, cancelled or not) more\nthan --hours ago, counted from their end, not their dispatch, with their nodes and kept outputs.\nTheir jobs are not touched.",
  flags: HOURS_FLAG,
  async run(args) {
    expectPositionals(args, 0, 0, "");
    const hours = readHours(args);
    await using queue = await openAdminQueue(args);
    const count = await queue.pruneFlows({ olderThanMs: hours * 3_600_000 });
    console.log(
      `Deleted ${plural(count, "flow")} that ended more than ${plural(hours, "hour")} ago`,
    );
    return 0;
  },
};

/** The flow commands, in the order the help lists them. */
export const FLOW_COMMANDS: readonly Command[] = [flows, flow, pruneFlows];
