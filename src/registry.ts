/**
 * The job definitions a process knows, by name.
 *
 * @internal
 * @module
 */
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { type GroupRate, isJobDefinition, type JobDefinition } from "./job.ts";
import { isScheduleDefinition, type ScheduleDefinition } from "./schedule.ts";

/**
 * Where job definitions come from: a jobs module's URL or path (a relative
 * path is resolved against the current folder), or the definitions
 * themselves (jobs, and the schedules that dispatch them).
 */
export type JobsSource = string | URL | readonly (JobDefinition | ScheduleDefinition)[];

/**
 * A jobs module's URL: a URL (`file:`, `https:`, `jsr:`) as given, a path
 * resolved against the current folder (not against this library's folder,
 * where a bare `import()` would look).
 */
export function moduleUrl(source: string | URL): string {
  const text = String(source);
  if (text.trim() === "") throw new TypeError("jobs must name a jobs module: got an empty string");
  // Two letters at least before the colon: `C:\\jobs.ts` is a Windows path, not a URL.
  return /^[a-z][a-z0-9+.-]+:/i.test(text) ? text : pathToFileURL(resolve(text)).href;
}

/**
 * Why a local jobs module may not load without `--allow-read`, and the two
 * ways out: a module the app imports itself is in its module graph, and
 * loads by URL without the permission.
 */
function readHint(url: string): string {
  if (!url.startsWith("file:")) return "";
  let granted = false;
  try {
    granted = Deno.permissions.querySync({ name: "read", path: new URL(url) }).state === "granted";
  } catch {
    // no permissions API here: say nothing more
    return "";
  }
  return granted
    ? ""
    : " (a module loaded by URL at run time needs --allow-read, unless the app imports it too: " +
      'add import "./jobs.ts" (the jobs module) to the app, or grant --allow-read)';
}

/** The job definitions of one process, looked up by name. */
export class JobRegistry {
  readonly #byName = new Map<string, JobDefinition>();
  readonly #schedules: readonly ScheduleDefinition[];
  #names: readonly string[] | undefined;
  #groupRates: Readonly<Record<string, GroupRate>> | undefined | null = null;
  #keptUntilChecked: readonly string[] | undefined | null = null;
  /** The jobs module's URL, when the definitions came from one (Web Workers import it too). */
  readonly moduleUrl: string | undefined;

  private constructor(
    definitions: Iterable<JobDefinition>,
    schedules: readonly ScheduleDefinition[],
    moduleUrl: string | undefined,
  ) {
    this.moduleUrl = moduleUrl;
    this.#schedules = Object.freeze([...schedules]);
    for (const definition of definitions) {
      const known = this.#byName.get(definition.name);
      if (known !== undefined && known !== definition) {
        throw new TypeError(
          `Two different jobs are named "${definition.name}": names must be unique`,
        );
      }
      this.#byName.set(definition.name, definition);
    }
  }

  /** Collects the definitions of `source`, importing it when it is a module URL. */
  static async load(source: JobsSource): Promise<JobRegistry> {
    if (typeof source !== "string" && !(source instanceof URL)) {
      if (!Array.isArray(source)) {
        throw new TypeError("jobs must be a jobs module URL or an array of defineJob() results");
      }
      for (const [index, item] of source.entries()) {
        if (!isJobDefinition(item) && !isScheduleDefinition(item)) {
          throw new TypeError(
            `jobs[${index}] is not a job or a schedule: make it with defineJob() or defineSchedule()`,
          );
        }
      }
      return new JobRegistry(
        source.filter(isJobDefinition),
        source.filter(isScheduleDefinition),
        undefined,
      );
    }
    const url = moduleUrl(source);
    let exports: Record<string, unknown>;
    try {
      exports = await import(url);
    } catch (error) {
      throw new Error(
        `Cannot import the jobs module ${url}: ${(error as Error).message}${readHint(url)}`,
        { cause: error },
      );
    }
    const definitions = Object.values(exports).filter(isJobDefinition);
    if (definitions.length === 0) {
      throw new Error(`The jobs module ${url} exports no job: export the results of defineJob()`);
    }
    return new JobRegistry(definitions, Object.values(exports).filter(isScheduleDefinition), url);
  }

  /** The definition named `name`, if this process knows it. */
  get(name: string): JobDefinition | undefined {
    return this.#byName.get(name);
  }

  /** Whether `job` is the very definition this process knows by its name. */
  has(job: JobDefinition): boolean {
    return this.#byName.get(job.name) === job;
  }

  /** The names of the known jobs, in the order they were defined: what a worker here can run. */
  names(): readonly string[] {
    return this.#names ??= Object.freeze([...this.#byName.keys()]);
  }

  /** The schedules defined beside the jobs, in the order they were exported. */
  schedules(): readonly ScheduleDefinition[] {
    return this.#schedules;
  }

  /**
   * The names of the jobs unique until processing that have middleware: a
   * claim keeps their key until the middleware check lets them start
   * (`ClaimRequest.checkedNames`); undefined when there is none.
   */
  keptUntilChecked(): readonly string[] | undefined {
    if (this.#keptUntilChecked === null) {
      const names = [...this.#byName].filter(([, job]) => keptUntilChecked(job))
        .map(([name]) => name);
      this.#keptUntilChecked = names.length === 0 ? undefined : Object.freeze(names);
    }
    return this.#keptUntilChecked;
  }

  /**
   * Each job name's group rate limit (`defineJob({ groupRate })`), for the
   * claim and the next-due read; undefined when no job has one.
   */
  groupRates(): Readonly<Record<string, GroupRate>> | undefined {
    if (this.#groupRates === null) {
      const rates = [...this.#byName].flatMap(([name, definition]) =>
        definition.groupRate === undefined ? [] : [[name, definition.groupRate] as const]
      );
      this.#groupRates = rates.length === 0 ? undefined : Object.freeze(Object.fromEntries(rates));
    }
    return this.#groupRates;
  }

  /** The names of the known jobs whose payloads are encrypted. */
  encryptedJobs(): string[] {
    return [...this.#byName.values()].filter((job) => job.encrypted).map((job) => job.name);
  }

  /** The queues the known jobs go to by default: `"default"` first, then by name. */
  defaultQueues(): string[] {
    const queues = new Set([...this.#byName.values()].map((job) => job.queue));
    return [...queues].sort((a, b) =>
      a === "default" ? -1 : b === "default" ? 1 : a < b ? -1 : a > b ? 1 : 0
    );
  }
}

/**
 * Whether a claim keeps `job`'s unique key until the middleware check lets
 * it start: a job unique until processing, with middleware.
 */
export function keptUntilChecked(job: JobDefinition): boolean {
  return job.middleware !== undefined && job.uniqueForMs !== undefined &&
    job.uniqueUntil === "processing";
}
