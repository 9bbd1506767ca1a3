/**
 * Inline mode (`Queue.open({ mode: "inline" })`): a dispatch target that
 * stores nothing and runs each job at once, in this isolate, like Laravel's
 * `sync` driver. One attempt with the job's timeout, no retries, middleware
 * skipped; every id is 0. A chain runs link by link and stops at a failure
 * (its `catch` runs, then the dispatch rejects with the failure); a batch
 * runs its jobs in order (stopping at a failure unless it allows failures),
 * then its `then`, `catch` and `finally` as a stored batch would fire them.
 *
 * @internal
 * @module
 */
import type { DispatchTarget } from "./dispatch.ts";
import type { Executor } from "../executors/executor.ts";
import type { JobRegistry } from "../registry.ts";
import { runNow } from "./run_now.ts";
import {
  type FlowParentsRow,
  FROM_PREVIOUS_OUTPUT,
  type InsertedBatch,
  type InsertedFlow,
  type KeyedInsert,
  type KeyedJobRow,
  type NewBatchRow,
  type NewChainRow,
  type NewFlowRow,
  type NewJobRow,
  type WaitingJobRow,
} from "../stores/store.ts";

/** Runs what is dispatched instead of storing it. */
export class InlineTarget implements DispatchTarget {
  readonly #registry: JobRegistry;
  readonly #executor: Pick<Executor, "run">;

  /** Runs jobs of `registry` on `executor` (the isolate executor). */
  constructor(registry: JobRegistry, executor: Pick<Executor, "run">) {
    this.#registry = registry;
    this.#executor = executor;
  }

  /** Runs each job in order; rejects with the first failure. */
  async insertJobs(rows: readonly NewJobRow[]): Promise<number[]> {
    for (const row of rows) await this.#run(row);
    return rows.map(() => 0);
  }

  /** Runs each job in order, as jobs of no batch (there is none to add them to). */
  addToBatch(_batchId: number, rows: readonly NewJobRow[]): Promise<number[]> {
    return this.insertJobs(rows);
  }

  /** Runs each job in order: an inline job is never a duplicate. */
  async insertKeyed(rows: readonly KeyedJobRow[]): Promise<KeyedInsert[]> {
    await this.insertJobs(rows);
    return rows.map(() => ({ id: 0, outcome: "stored" as const }));
  }

  /** Runs the links in order; at a failure runs the chain's `catch` and rejects. */
  async insertChain(chain: NewChainRow): Promise<number> {
    try {
      let output = await this.#run(chain.first);
      for (const link of chain.next) {
        const payload = link.payload === FROM_PREVIOUS_OUTPUT ? output ?? "null" : link.payload;
        output = await this.#run({ ...link, payload });
      }
    } catch (error) {
      for (const onFailure of chain.onFailure) await this.#run(onFailure);
      throw error;
    }
    return 0;
  }

  /** Runs the batch's jobs, then its callbacks; rejects with the first failure after them. */
  async insertBatch(batch: NewBatchRow): Promise<InsertedBatch> {
    let failure: unknown = undefined;
    let failed = false;
    for (const job of batch.jobs) {
      if (failed && !batch.allowFailures) break;
      try {
        await this.#run(job);
      } catch (error) {
        if (!failed) {
          failed = true;
          failure = error;
          for (const onCatch of batch.catch) await this.#run(onCatch);
        }
      }
    }
    if (!failed) { for (const then of batch.then) await this.#run(then); }
    for (const always of batch.finally) await this.#run(always);
    if (failed) throw failure;
    return { id: 0, jobIds: batch.jobs.map(() => 0) };
  }

  /**
   * Runs the flow's nodes parents first, each with its parents' outputs; a
   * node that fails skips its descendants (those without
   * `continueOnFailure`) and runs the catch once; rejects with the first
   * failure once no node can run.
   */
  async insertFlow(flow: NewFlowRow): Promise<InsertedFlow> {
    const ended: ({ output: string | null } | { error: string } | "skipped")[] = [];
    let failure: unknown = undefined;
    let failed = false;
    for (const node of flow.nodes) {
      const parents = node.parents.map((position) => ({
        node: flow.nodes[position]!,
        end: ended[position]!,
      }));
      const blocked = parents.some(({ end }) =>
        !node.continueOnFailure && !(typeof end === "object" && "output" in end)
      );
      if (blocked) {
        ended.push("skipped");
        continue;
      }
      const carried: FlowParentsRow = {
        outputs: Object.fromEntries(
          parents.flatMap(({ node, end }) =>
            typeof end === "object" && "output" in end
              ? [[node.key, { name: node.job.name, output: end.output }]]
              : []
          ),
        ),
        errors: Object.fromEntries(
          parents.flatMap(({ node, end }) =>
            typeof end === "object" && "output" in end
              ? []
              : [[node.key, typeof end === "object" ? end.error : end]]
          ),
        ),
      };
      try {
        ended.push({ output: await this.#run(node.job, JSON.stringify(carried)) });
      } catch (error) {
        ended.push({ error: error instanceof Error ? error.message : String(error) });
        if (!failed) {
          failed = true;
          failure = error;
          for (const onFailure of flow.onFailure) await this.#run(onFailure);
        }
      }
    }
    if (failed) throw failure;
    return { id: 0, jobIds: flow.nodes.flatMap((node) => node.parents.length === 0 ? [0] : []) };
  }

  /** Runs one job (a flow node with its parents' outputs); its stored output text, or null. */
  async #run(
    row: NewJobRow | WaitingJobRow,
    flowParents: string | null = null,
  ): Promise<string | null> {
    const job = this.#registry.get(row.name);
    if (job === undefined) throw new TypeError(`No job named "${row.name}" is registered`);
    return await runNow(this.#executor, job, row, null, flowParents);
  }
}
