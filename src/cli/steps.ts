/**
 * The durable-step commands: `steps <id>` (a table of the steps a job
 * recorded) and `signal <id> <name> [json]` (a signal for a job's
 * `ctx.waitFor`). Like the other admin commands they open the queue with
 * no jobs registered.
 *
 * @module
 * @internal
 */
import { assertStepName, signalPayloadJson, stepStateText } from "../admin/steps.ts";
import type { JobStep, SignalOutcome } from "../steps.ts";
import { expectPositionals, type ParsedArgs, readSwitch, UsageError } from "./args.ts";
import { jobKnown, noSuchJob, openAdminQueue, readId } from "./admin.ts";
import { type Command, EXIT } from "./command.ts";
import { firstLine, formatTable, printable, shortName, tableTime } from "./table.ts";

/** A step's run time: `850 ms`, `1.2 s`, `4.5 min`; `-` for sleeps and waits, which run nothing. */
function duration(step: JobStep): string {
  if (step.kind !== "step") return "-";
  const ms = step.durationMs;
  if (ms < 1_000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1_000).toFixed(1)} s`;
  return `${(ms / 60_000).toFixed(1)} min`;
}

/** A step's state in words (see {@linkcode stepStateText}). */
export function stepState(step: JobStep, now: number): string {
  return stepStateText(step, now, tableTime);
}

/** A step's output in one line: its JSON, `(encrypted)`, or empty for sleeps and open waits. */
function output(step: JobStep): string {
  if (step.encrypted) return "(encrypted)";
  if (step.output === undefined) return "";
  return firstLine(JSON.stringify(step.output), 80);
}

const steps: Command = {
  name: "steps",
  operands: "<id>",
  summary: "list the durable steps a job recorded",
  description:
    "Lists what a job's handler recorded with ctx.step, ctx.sleep and ctx.waitFor, by call position:\nseq, key (a name used again in one run is numbered: send, send#2), kind, state (done, parked\nfor a signal, or sleeping until its wake time), the attempt that recorded it, how long the step\nran, and its output (a wait's: the signal's payload, null when it timed out). An encrypted output\nis shown as (encrypted), never opened. Steps are kept as long as the job or its history.",
  flags: { json: { type: "boolean", help: "print a JSON array of the steps" } },
  async run(args) {
    expectPositionals(args, 1, 1, "the job id");
    const id = readId(args, 0);
    const json = readSwitch(args, "json");
    await using queue = await openAdminQueue(args);
    const list = await queue.steps(id);
    if (list.length === 0 && !await jobKnown(queue, id)) {
      console.error(`queue steps: ${noSuchJob(id)}`);
      return EXIT.failure;
    }
    if (json) {
      console.log(JSON.stringify(list, null, 2));
    } else if (list.length === 0) {
      console.log(`No steps recorded for job ${id}`);
    } else {
      const now = Date.now();
      console.log(formatTable(
        ["seq", "key", "kind", "state", "attempt", "duration", "output"],
        list.map((step) => [
          String(step.seq),
          shortName(step.key, 64),
          step.kind,
          stepState(step, now),
          String(step.attempt),
          duration(step),
          output(step),
        ]),
        ["right", "left", "left", "left", "right", "right", "left"],
      ));
    }
    return EXIT.ok;
  },
};

/** The signal's name (the second operand), checked as `ctx.waitFor` checks it. */
function readSignalName(args: ParsedArgs): string {
  const name = args.positionals[1]!;
  try {
    return assertStepName(name, args.command, "<name>");
  } catch (error) {
    throw new UsageError(args.command, withoutWhere((error as Error).message));
  }
}

/**
 * The payload (the third operand, JSON; null when absent), checked as
 * `queue.signal` checks it: JSON that does not parse, does not come back
 * the same (`1e400`) or is over the cap is a usage error.
 */
function readPayload(args: ParsedArgs): unknown {
  const text = args.positionals[2];
  if (text === undefined) return null;
  let payload: unknown;
  try {
    payload = JSON.parse(text);
  } catch (error) {
    throw new UsageError(
      args.command,
      `[json] is not JSON: ${(error as Error).message}: got ${
        JSON.stringify(text.length > 80 ? `${text.slice(0, 79)}…` : text)
      }`,
    );
  }
  try {
    signalPayloadJson(payload, args.command, "[json]");
  } catch (error) {
    throw new UsageError(args.command, withoutWhere((error as Error).message));
  }
  return payload;
}

/** `message` without the `where: ` it starts with. */
function withoutWhere(message: string): string {
  return message.replace(/^[^:]*: /, "");
}

/**
 * Sends the signal, with `APP_KEY` when it is set: `queue.signal` seals it
 * when job `id` is encrypted (and says so when there is no key), and sends
 * it as it is to any other job.
 */
async function send(
  args: ParsedArgs,
  id: number,
  name: string,
  payload: unknown,
): Promise<SignalOutcome> {
  await using queue = await openAdminQueue(args, { keys: true });
  return await queue.signal(id, name, payload);
}

const signal: Command = {
  name: "signal",
  operands: "<id> <name> [json]",
  summary: "send a signal to a job's ctx.waitFor",
  description:
    "Sends signal <name> to job <id> with [json] as its payload (null when absent), for the job's\nctx.waitFor(name). Prints the outcome: delivered (the job was waiting for it and is due now) or\nbuffered (kept in the job's mailbox for a wait to come: it has not reached it yet, or runs now).\nExits 1 when the job has finished or does not exist (nothing is stored). The payload of a\nsignal to an encrypted job is sealed with APP_KEY (required then; a value set in APP_KEY or\nAPP_PREVIOUS_KEYS that is not a key is refused). Write the JSON in single quotes: '{\"score\": 9}'.",
  flags: {},
  async run(args) {
    expectPositionals(args, 2, 3, "<id> and <name>");
    const id = readId(args, 0);
    const name = readSignalName(args);
    const payload = readPayload(args);
    const outcome = await send(args, id, name, payload);
    const shown = printable(JSON.stringify(name));
    switch (outcome) {
      case "delivered":
        console.log(`delivered: job ${id} was waiting for ${shown} and is due now`);
        return EXIT.ok;
      case "buffered":
        console.log(`buffered: kept in job ${id}'s mailbox for its ctx.waitFor(${shown})`);
        return EXIT.ok;
      case "finished":
        console.error(
          `queue signal: finished: job ${id} has already ended (completed, failed or cancelled); nothing stored`,
        );
        return EXIT.failure;
      case "not-found":
        console.error(`queue signal: not-found: no job ${id}; nothing stored`);
        return EXIT.failure;
    }
  },
};

/** The durable-step commands, in the order the help lists them. */
export const STEP_COMMANDS: readonly Command[] = [steps, signal];
