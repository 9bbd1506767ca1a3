/**
 * The job definitions a process knows, by name.
 *
 * @internal
 * @module
 */
import { isJobDefinition, type JobDefinition } from "./job.ts";

/** Where job definitions come from: a jobs module's URL, or the definitions themselves. */
export type JobsSource = string | URL | readonly JobDefinition[];

/** The job definitions of one process, looked up by name. */
export class JobRegistry {
  readonly #byName = new Map<string, JobDefinition>();
  #names: readonly string[] | undefined;
  /** The jobs module's URL, when the definitions came from one (Web Workers import it too). */
  readonly moduleUrl: string | undefined;

  private constructor(definitions: Iterable<JobDefinition>, moduleUrl: string | undefined) {
    this.moduleUrl = moduleUrl;
    for (const definition of definitions) {
      const known = this.#byName.get(definition.name);
      if (known !== undefined && known !== definition) {
        throw new Error(`Two different jobs are named "${definition.name}": names must be unique`);
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
        if (!isJobDefinition(item)) {
          throw new TypeError(`jobs[${index}] is not a job: make it with defineJob()`);
        }
      }
      return new JobRegistry(source, undefined);
    }
    const url = String(source);
    let exports: Record<string, unknown>;
    try {
      exports = await import(url);
    } catch (error) {
      throw new Error(`Cannot import the jobs module ${url}: ${(error as Error).message}`, {
        cause: error,
      });
    }
    const definitions = Object.values(exports).filter(isJobDefinition);
    if (definitions.length === 0) {
      throw new Error(`The jobs module ${url} exports no job: export the results of defineJob()`);
    }
    return new JobRegistry(definitions, url);
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
