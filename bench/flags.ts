/**
 * The command-line flags of `deno task bench`, parsed and checked.
 *
 * @module
 */

/** What the flags ask for, defaults filled in. */
export interface BenchFlags {
  /** Runs per measurement; every figure is the median of them. */
  readonly runs: number;
  /** Jobs per run of each measurement. */
  readonly jobs: number;
  /** Also print the results as JSON. */
  readonly json: boolean;
  /** Print the usage and do nothing else. */
  readonly help: boolean;
}

/** A flag the bench does not know, or a bad value: the caller prints it and exits 2. */
export class UsageError extends Error {
  /** `message` says which flag and why. */
  constructor(message: string) {
    super(message);
    this.name = "UsageError";
  }
}

/** The usage text. */
export const USAGE = `Usage: deno task bench [--runs N] [--jobs N] [--json]

  --runs N   runs of each measurement; every figure is their median (default 5)
  --jobs N   jobs per run of each measurement (default 20000)
  --json     also print the results as JSON, after the table
  --help     print this and exit`;

const DEFAULT_RUNS = 5;
const DEFAULT_JOBS = 20_000;
const MAX_RUNS = 101;
const MAX_JOBS = 10_000_000;

/**
 * Parses `args` (`Deno.args`). Accepts `--runs N` and `--runs=N` alike;
 * throws a {@linkcode UsageError} for an unknown flag, a positional argument,
 * or a value that is not a whole number in range.
 */
export function parseBenchFlags(args: readonly string[]): BenchFlags {
  let runs = DEFAULT_RUNS;
  let jobs = DEFAULT_JOBS;
  let json = false;
  let help = false;
  for (let index = 0; index < args.length; index++) {
    const arg = args[index]!;
    const equals = arg.indexOf("=");
    const name = arg.startsWith("--") && equals > 0 ? arg.slice(0, equals) : arg;
    const inline = name === arg ? undefined : arg.slice(equals + 1);
    switch (name) {
      case "--json":
      case "--help":
      case "-h":
        if (inline !== undefined) throw new UsageError(`${name} takes no value: got ${arg}`);
        if (name === "--json") json = true;
        else help = true;
        break;
      case "--runs":
      case "--jobs": {
        const value = inline ?? args[++index];
        if (value === undefined) throw new UsageError(`${name} needs a number: got nothing`);
        if (name === "--runs") runs = wholeNumber(name, value, MAX_RUNS);
        else jobs = wholeNumber(name, value, MAX_JOBS);
        break;
      }
      default:
        throw new UsageError(
          arg.startsWith("-") ? `unknown flag: ${arg}` : `unexpected argument: ${arg}`,
        );
    }
  }
  return { runs, jobs, json, help };
}

function wholeNumber(name: string, value: string, max: number): number {
  const number = /^[0-9]+$/.test(value) ? Number(value) : NaN;
  if (!(number >= 1 && number <= max)) {
    throw new UsageError(`${name} must be a whole number from 1 to ${max}: got ${value}`);
  }
  return number;
}
