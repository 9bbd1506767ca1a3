/**
 * Reading a command's arguments: `node:util`'s `parseArgs` in strict mode,
 * with one-line errors that name the flag and the value, and readers that
 * check each value.
 *
 * @module
 * @internal
 */
import { parseArgs } from "node:util";
import { DATABASE_PROBLEM, readConfig } from "../config.ts";
import {
  isOtherUrl,
  isPostgresUrl,
  isRedisUrl,
  postgresUrlParts,
  readDatabaseUrlVariable,
  redactPassword,
  redisUrlParts,
} from "../stores/database_url.ts";
import { assertName, assertQueueName } from "../names.ts";
import { shown } from "../shown.ts";

/** A flag a command takes. */
export interface Flag {
  /** `"string"` for a flag with a value, `"boolean"` for a switch. */
  readonly type: "string" | "boolean";
  /** A one-letter alias (`-h`). */
  readonly short?: string;
  /** The value's placeholder in the help (`PATH`, `N`). */
  readonly value?: string;
  /** One line for the help. */
  readonly help: string;
}

/** A command's arguments once parsed: flag values by name, then the positional arguments. */
export interface ParsedArgs {
  /** The command, for error messages. */
  readonly command: string;
  /** Flag values: a string for a flag with a value, true for a switch, undefined when absent. */
  readonly values: Readonly<Record<string, string | boolean | undefined>>;
  /** The arguments that are not flags. */
  readonly positionals: readonly string[];
  /** The arguments as given, after the command's name. */
  readonly raw: readonly string[];
}

/** Bad command-line input: the CLI prints the message and exits with code 2. */
export class UsageError extends Error {
  /** Builds `queue <command>: <detail> (see <command> --help)`; `command` null when unknown. */
  constructor(command: string | null, detail: string) {
    super(
      command === null ? `queue: ${detail}` : `queue ${command}: ${detail} (see ${command} --help)`,
    );
    this.name = "UsageError";
  }
}

/**
 * Parses `args` against `flags`; unknown flags, missing values and values
 * given to switches throw. A negative number (`-1`) is a flag's value after
 * a flag that takes one, else a positional argument, never a flag.
 */
export function parseFlags(
  command: string,
  args: readonly string[],
  flags: Readonly<Record<string, Flag>>,
): ParsedArgs {
  const options = Object.fromEntries(
    Object.entries(flags).map((
      [name, { type, short }],
    ) => [name, { type, ...(short && { short }) }]),
  );
  const { joined, from, negatives } = readNegativeNumbers(args, flags);
  const parse = () =>
    parseArgs({ args: joined, options, strict: true, allowPositionals: true, tokens: true });
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse();
  } catch (error) {
    throw new UsageError(command, describeParseError(joined, flags, options, error));
  }
  const { values, tokens } = parsed;
  // parseArgs keeps the last of a flag given twice: which one was meant is not known.
  const given = new Set<string>();
  for (const token of tokens) {
    if (token.kind !== "option" || flags[token.name]?.type !== "string") continue;
    if (given.has(token.name)) {
      throw new UsageError(command, `--${token.name} is given twice: give it once`);
    }
    given.add(token.name);
  }
  const positionals = [
    ...negatives,
    ...tokens.flatMap((token) =>
      token.kind === "positional" ? [{ at: from[token.index]!, value: token.value }] : []
    ),
  ].sort((a, b) => a.at - b.at).map((positional) => positional.value);
  return { command, values, positionals, raw: args };
}

/**
 * Takes the negative numbers out of `args` before `parseArgs`, which would
 * read `-1` as a flag: `--flag -1` is joined into `--flag=-1` for a flag that
 * takes a value, so that the flag's reader can say what is wrong with it;
 * any other (`retry -1`) is a positional argument, kept with its place in
 * `args` so the reader of operands can say what is wrong with it. `from`
 * gives the place in `args` of each argument of `joined`.
 */
function readNegativeNumbers(
  args: readonly string[],
  flags: Readonly<Record<string, Flag>>,
): { joined: string[]; from: number[]; negatives: { at: number; value: string }[] } {
  const joined: string[] = [];
  const from: number[] = [];
  const negatives: { at: number; value: string }[] = [];
  const end = args.indexOf("--");
  for (let index = 0; index < args.length; index++) {
    const arg = args[index]!;
    const next = args[index + 1];
    const beforeEnd = end === -1 || index < end;
    if (
      beforeEnd && next !== undefined && /^-\d/.test(next) && arg.startsWith("--") &&
      flags[arg.slice(2)]?.type === "string"
    ) {
      joined.push(`${arg}=${next}`);
      from.push(index);
      index++;
    } else if (beforeEnd && /^-\d/.test(arg)) {
      negatives.push({ at: index, value: arg });
    } else {
      joined.push(arg);
      from.push(index);
    }
  }
  return { joined, from, negatives };
}

/** Says which argument `parseArgs` refused, from its tokens, in one line. */
function describeParseError(
  args: readonly string[],
  flags: Readonly<Record<string, Flag>>,
  options: Record<string, { type: "string" | "boolean"; short?: string }>,
  error: unknown,
): string {
  const { tokens } = parseArgs({
    args: [...args],
    options,
    strict: false,
    allowPositionals: true,
    tokens: true,
  });
  for (const token of tokens) {
    if (token.kind !== "option") continue;
    // `name` is the long name, also for a known short alias (`-h` → `help`).
    const flag = Object.hasOwn(flags, token.name) ? flags[token.name] : undefined;
    if (flag === undefined) return `unknown flag ${token.rawName}`;
    if (flag.type === "boolean" && token.value !== undefined) {
      return `${token.rawName} takes no value: got ${shown(token.value)}`;
    }
    if (flag.type === "string" && token.value === undefined) {
      return `${token.rawName} needs a value`;
    }
    if (flag.type === "string" && !token.inlineValue && token.value?.startsWith("-")) {
      return `${token.rawName} needs a value: got the flag ${token.value} (write ${token.rawName}=${token.value} if that is the value)`;
    }
  }
  return (error as Error).message.split("\n")[0]!;
}

/** A string flag's value, or undefined when absent; an empty value throws. */
export function readString(args: ParsedArgs, name: string): string | undefined {
  const value = args.values[name];
  if (value === undefined) return undefined;
  if (typeof value !== "string" || value.trim() === "") {
    throw new UsageError(args.command, `--${name} needs a value`);
  }
  return value;
}

/** A switch: true when given. */
export function readSwitch(args: ParsedArgs, name: string): boolean {
  return args.values[name] === true;
}

/** A whole-number flag from `min` to `max`, or undefined when absent. */
export function readInteger(
  args: ParsedArgs,
  name: string,
  min: number,
  max = Number.MAX_SAFE_INTEGER,
): number | undefined {
  const text = readString(args, name);
  if (text === undefined) return undefined;
  const value = /^\d+$/.test(text) ? Number(text) : NaN;
  if (!(value >= min && value <= max)) {
    const range = max === Number.MAX_SAFE_INTEGER ? `>= ${min}` : `from ${min} to ${max}`;
    throw new UsageError(
      args.command,
      `--${name} must be a whole number ${range}: got ${shown(text)}`,
    );
  }
  return value;
}

/** A decimal-number flag, > 0 when `positive`, else >= 0; undefined when absent. */
export function readNumber(args: ParsedArgs, name: string, positive: boolean): number | undefined {
  const text = readString(args, name);
  if (text === undefined) return undefined;
  const value = /^\d+(\.\d+)?$/.test(text) ? Number(text) : NaN;
  if (!(positive ? value > 0 : value >= 0) || !Number.isFinite(value)) {
    throw new UsageError(
      args.command,
      `--${name} must be a number ${positive ? "> 0" : ">= 0"}: got ${shown(text)}`,
    );
  }
  return value;
}

/**
 * An ISO 8601 date and time such as `2026-12-05T10:00:00Z` (offset `Z`,
 * `+02:00` or none for local time; seconds and fraction optional), or
 * undefined when absent. A day the month does not have (`2027-02-30`) is
 * refused, where `Date` would roll it over into the next month.
 */
export function readTime(args: ParsedArgs, name: string): Date | undefined {
  const text = readString(args, name);
  if (text === undefined) return undefined;
  const fields = ISO_TIME.exec(text.trim());
  const time = fields === null ? new Date(NaN) : new Date(text.trim());
  const [year, month, day] = (fields ?? []).slice(1, 4).map(Number);
  const calendar = new Date(Date.UTC(2000, month! - 1, day));
  calendar.setUTCFullYear(year!);
  const realDay = calendar.getUTCMonth() === month! - 1 && calendar.getUTCDate() === day;
  if (!Number.isFinite(time.getTime()) || !realDay) {
    throw new UsageError(
      args.command,
      `--${name} must be an ISO 8601 time such as 2026-12-05T10:00:00Z: got ${shown(text)}${
        fields !== null && !realDay
          ? ` (there is no day ${fields[1]}-${fields[2]}-${fields[3]})`
          : ""
      }`,
    );
  }
  return time;
}

/** `YYYY-MM-DDTHH:MM[:SS[.fraction]][Z|±HH:MM]`, capturing the year, month and day. */
const ISO_TIME =
  /^(\d{4})-(\d{2})-(\d{2})T(?:[01]\d|2[0-3]):[0-5]\d(?::[0-5]\d(?:\.\d{1,9})?)?(?:Z|[+-](?:[01]\d|2[0-3]):[0-5]\d)?$/;

/** A comma-separated list of queue names, each checked, or undefined when absent. */
export function readQueueNames(args: ParsedArgs, name: string): string[] | undefined {
  const text = readString(args, name);
  if (text === undefined) return undefined;
  const queues = text.split(",").map((queue) => queue.trim());
  for (const queue of queues) {
    try {
      assertQueueName(queue, `--${name}`);
    } catch (error) {
      throw new UsageError(args.command, (error as Error).message);
    }
  }
  if (new Set(queues).size !== queues.length) {
    throw new UsageError(args.command, `--${name} lists a queue twice: got ${shown(text)}`);
  }
  return queues;
}

/** The queue named by the positional argument at `index`, checked; a bad name is a usage error. */
export function readQueueOperand(args: ParsedArgs, index: number): string {
  const name = args.positionals[index]!;
  try {
    assertQueueName(name, args.command);
  } catch {
    throw new UsageError(
      args.command,
      `queue name ${
        JSON.stringify(name.slice(0, 80))
      } is invalid: use 1 to 64 of A-Z a-z 0-9 _ . : -`,
    );
  }
  return name;
}

/** A free-text flag (`--reason`) of 1 to 255 characters, or undefined when absent. */
export function readText(args: ParsedArgs, name: string): string | undefined {
  const text = readString(args, name);
  if (text === undefined) return undefined;
  try {
    return assertName(text, args.command, `--${name}`);
  } catch {
    throw new UsageError(
      args.command,
      text.length > 255
        ? `--${name} must be at most 255 characters: got ${text.length}`
        : `--${name} must be text without NUL or lone surrogates`,
    );
  }
}

/**
 * A flag naming a database (`--db`, `move --from/--to`) without surrounding
 * whitespace, or undefined when absent; a URL no store opens (`http://…`) is
 * a usage error naming the flag.
 */
export function readDatabase(args: ParsedArgs, name: string): string | undefined {
  const given = readString(args, name);
  if (given === undefined) return undefined;
  if (isOtherUrl(given)) {
    throw new UsageError(
      args.command,
      `--${name} ${DATABASE_PROBLEM}: got ${shown(redactPassword(given))}`,
    );
  }
  const db = given.trim();
  try {
    // What the store would refuse when it opens (a schema or prefix that is no name, a parameter
    // twice): a mistyped flag, said before anything is opened.
    if (isPostgresUrl(db)) postgresUrlParts(db);
    if (isRedisUrl(db)) redisUrlParts(db);
  } catch (error) {
    throw new UsageError(args.command, `--${name}: ${(error as Error).message}`);
  }
  return db;
}

/**
 * The database: `--db`, else `QUEUE_DB`, else `DATABASE_URL` when it is a
 * `postgres://` URL, else `./.renox/queue.db`; without surrounding
 * whitespace, and never a URL no store opens (the rule of `readConfig()`,
 * which the app's `Queue.open` follows too).
 */
export function readDb(args: ParsedArgs): string {
  const given = readDatabase(args, "db");
  if (given !== undefined) return given;
  try {
    // Only the variable the CLI uses: a bad QUEUE_WORKERS is the serving app's concern.
    return readConfig({
      QUEUE_DB: Deno.env.get("QUEUE_DB"),
      DATABASE_URL: readDatabaseUrlVariable(),
    }).db;
  } catch (error) {
    throw new UsageError(args.command, (error as Error).message);
  }
}

/** Throws unless there are between `min` and `max` positional arguments. */
export function expectPositionals(args: ParsedArgs, min: number, max: number, what: string): void {
  const count = args.positionals.length;
  if (count < min) throw new UsageError(args.command, `missing ${what}`);
  if (count > max) {
    throw new UsageError(
      args.command,
      `unexpected argument ${JSON.stringify(args.positionals[max])}`,
    );
  }
}
