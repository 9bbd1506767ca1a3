/**
 * One worker tick on PostgreSQL: the claim (due jobs of each queue in claim
 * order, `FOR UPDATE SKIP LOCKED`), and the settle that records how the
 * tick's attempts ended, all in the store's transaction. Rows are locked in
 * one order everywhere (jobs by id, then batches by id), so two processes
 * settling at once never deadlock.
 *
 * @internal
 * @module
 */
import { PostgresComposition } from "./_postgres_composition.ts";
import { PostgresGuards } from "./_postgres_guards.ts";
import type { Run } from "./_postgres_run.ts";
import { PostgresStats } from "./_postgres_stats.ts";
import { type ClaimRow, type JobLinks, toClaimedJobs } from "./_rows.ts";
import type { MetricsPruning, SettledJobRow } from "./_stats_rows.ts";
import type { ClaimedJob, ClaimRequest, Lease, Settlement, SettleResult } from "./store.ts";

/** The database's clock in ms since the epoch, as SQL. */
export const DB_NOW = "(floor(extract(epoch from clock_timestamp()) * 1000))::bigint";
const LINKS = "batch_id, batch_member, chain_id";
/** The marker a claim writes when it takes over an expired lease. */
const DIED = "worker died during attempt ";
/** What a settle statement returns of its job: its links, and what the metrics rollup needs. */
const SETTLED = `${LINKS}, queue, name, waited_ms`;
/**
 * A tick's successes in one statement: each job deleted if its token still
 * matches, with the unique keys it held and the overlap locks its attempt
 * took. Returns the deleted jobs with their links.
 */
const COMPLETE_MANY = `WITH locked AS (
    SELECT j.id, j.token FROM jobs j JOIN unnest($1::bigint[], $2::bigint[]) AS s(id, token)
      ON j.id = s.id AND j.token = s.token
    ORDER BY j.id FOR UPDATE OF j),
  done AS (DELETE FROM jobs j USING locked WHERE j.id = locked.id
    RETURNING j.id, j.token, j.batch_id, j.batch_member, j.chain_id, j.queue, j.name,
      j.waited_ms),
  keys AS (DELETE FROM job_keys WHERE job_id IN (SELECT id FROM done)),
  locks AS (DELETE FROM job_locks l USING done WHERE l.job_id = done.id AND l.token = done.token)
  SELECT id, batch_id, batch_member, chain_id, queue, name, waited_ms FROM done`;
const PROGRESS = "UPDATE jobs SET progress = $1 WHERE id = $2 AND token = $3";
const RELEASE = `UPDATE jobs SET token = NULL, available_at = $1, last_error = $2,
    attempts = attempts - $3, crashes = crashes + $4
  WHERE id = $5 AND token = $6 RETURNING ${SETTLED}`;
/** Moves a job to the failed jobs in one statement, fenced by its token; returns what it settled. */
const FAIL = `WITH gone AS (DELETE FROM jobs WHERE id = $6 AND token = $7
    RETURNING id, queue, name, payload, priority, crashes, created_at, waited_ms, ${LINKS}),
  failed AS (INSERT INTO failed_jobs
    (id, queue, name, payload, priority, error, stack, attempts, crashes, created_at, failed_at,
      ${LINKS})
    SELECT id, queue, name, payload, priority, $1, $2, $3, crashes + $4, created_at, $5, ${LINKS}
    FROM gone
    ON CONFLICT (id) DO UPDATE SET queue = excluded.queue, name = excluded.name,
    payload = excluded.payload, priority = excluded.priority, error = excluded.error,
    stack = excluded.stack, attempts = excluded.attempts, crashes = excluded.crashes,
    created_at = excluded.created_at, failed_at = excluded.failed_at,
    batch_id = excluded.batch_id, batch_member = excluded.batch_member,
    chain_id = excluded.chain_id)
  SELECT ${SETTLED} FROM gone`;

const claimStatements = new Map<number, string>();

/**
 * The claim for `queueCount` queues: each queue's due jobs in claim order,
 * locked with `SKIP LOCKED` so concurrent claims never wait for each other
 * or take the same job, then the first `limit` of them in queue order.
 * `$3` null means now on the database's clock.
 */
function claimSql(queueCount: number): string {
  let sql = claimStatements.get(queueCount);
  if (sql === undefined) claimStatements.set(queueCount, sql = buildClaimSql(queueCount));
  return sql;
}

function buildClaimSql(queueCount: number): string {
  const perQueue = Array.from(
    { length: queueCount },
    (_, index) =>
      `q${index} AS (SELECT id, ${index} AS rank, priority, available_at FROM jobs
      WHERE queue = $${index + 5} AND available_at <= (SELECT t FROM now_ms)
      ORDER BY priority DESC, available_at LIMIT $4 FOR UPDATE SKIP LOCKED)`,
  );
  const union = Array.from({ length: queueCount }, (_, index) => `SELECT * FROM q${index}`)
    .join(" UNION ALL ");
  return `WITH now_ms AS (SELECT COALESCE($3::bigint, ${DB_NOW}) AS t), ${perQueue.join(", ")},
    picked AS (SELECT id FROM (${union}) candidates
      ORDER BY rank, priority DESC, available_at, id LIMIT $4),
    claimed AS (UPDATE jobs j SET token = $1, available_at = (SELECT t FROM now_ms) + $2,
      waited_ms = (SELECT t FROM now_ms) - j.available_at, attempts = j.attempts + 1, progress = NULL,
      crashes = j.crashes + CASE WHEN j.token IS NULL THEN 0 ELSE 1 END,
      last_error = CASE WHEN j.token IS NULL THEN j.last_error ELSE '${DIED}' || j.attempts END
    FROM picked WHERE j.id = picked.id
    RETURNING j.id, j.queue, j.name, j.payload, j.priority, j.attempts, j.crashes, j.retry_until,
      j.last_error, j.created_at, j.batch_id,
      (j.last_error IS NOT NULL AND j.last_error = '${DIED}' || (j.attempts - 1)) AS recovered),
    started AS (DELETE FROM job_keys WHERE release_on_start = 1
      AND job_id IN (SELECT id FROM claimed))
    SELECT * FROM claimed`;
}

/** A settled job as the settle statements return it: its links, queue, name and wait. */
type SettledJob = JobLinks & Omit<SettledJobRow, "id">;

/** What a tick needs from its store. */
export interface TickSetup {
  /** Whether claims go by the database's clock instead of the request's `now`. */
  readonly dbClock: boolean;
  /** The store's metrics pruning schedule. */
  readonly pruning: MetricsPruning;
  /** Notifies the other processes' watchers when the transaction commits. */
  readonly notify: () => Promise<void>;
}

/** Claims and settles through one transaction. */
export class PostgresTick {
  readonly #run: Run;
  readonly #setup: TickSetup;

  /** `run` sends one statement in the store's current transaction. */
  constructor(run: Run, setup: TickSetup) {
    this.#run = run;
    this.#setup = setup;
  }

  /** Applies settlements, each fenced by its token, then claims. */
  async settle(settlements: readonly Settlement[], then?: ClaimRequest): Promise<SettleResult> {
    const run = this.#run;
    {
      const composition = new PostgresComposition(run);
      const guards = new PostgresGuards(run);
      const outcomes = await this.#applyToJobs(settlements);
      await new PostgresStats(run, this.#setup.pruning).record(
        settlements,
        outcomes.map((outcome) => outcome.applied),
        outcomes.flatMap((outcome, index) =>
          outcome.links === null ? [] : [{ ...outcome.links, id: settlements[index]!.id }]
        ),
      );
      // Chains and batches second, in batch order: the batch rows are what processes share.
      const moves = settlements.flatMap((settlement, index) => {
        const outcome = outcomes[index]!;
        return outcome.links === null ? [] : [{ settlement, links: outcome.links, index }];
      }).sort((a, b) => (a.links.batch_id ?? 0) - (b.links.batch_id ?? 0) || a.index - b.index);
      const skipped = new Set<number>();
      for (const { settlement, links } of moves) {
        if (settlement.kind === "release") {
          if (await composition.putBack(settlement.id, links, settlement.at)) {
            skipped.add(settlement.id); // put back into a batch cancelled meanwhile
          }
        } else if (settlement.kind !== "progress") {
          await composition.settled(links, settlement.kind, settlement.at);
        }
      }
      const ended: number[] = [];
      const attempts: Lease[] = [];
      let released = 0;
      settlements.forEach((settlement, index) => {
        const { applied } = outcomes[index]!;
        if (!applied || settlement.kind === "progress" || settlement.kind === "complete") return;
        attempts.push({ id: settlement.id, token: settlement.token });
        if (settlement.kind === "fail") ended.push(settlement.id);
        else if (!skipped.has(settlement.id)) released++;
      });
      await guards.released(ended, attempts); // a success's keys and locks went with it
      await guards.removed([...skipped]);
      // Wake other processes only when this made a job claimable: a retry, or a follow-up queued.
      if (released > 0 || composition.queued > 0) await this.#setup.notify();
      return {
        applied: outcomes.map((outcome) => outcome.applied),
        claimed: then === undefined ? [] : await this.claim(then),
      };
    }
  }

  /** Leases due jobs in one statement; on the database's clock when the store uses it. */
  async claim(request: ClaimRequest): Promise<ClaimedJob[]> {
    const { queues, limit, now, leaseMs, token } = request;
    const rows = await this.#run<ClaimRow>(claimSql(queues.length), [
      token,
      leaseMs,
      this.#setup.dbClock ? null : now,
      limit,
      ...queues,
    ]);
    return toClaimedJobs(rows, queues, token);
  }

  /**
   * The job-row half of a settle: successes in one statement, then each other
   * settlement in id order. Says for each whether it applied, and the links
   * of a job whose chain or batch must move.
   */
  async #applyToJobs(
    settlements: readonly Settlement[],
  ): Promise<{ applied: boolean; links: SettledJob | null }[]> {
    const successes = settlements.filter((settlement) => settlement.kind === "complete");
    const completed = new Map<number, SettledJob>();
    if (successes.length > 0) {
      const done = await this.#run<SettledJob & { id: number }>(COMPLETE_MANY, [
        successes.map((settlement) => settlement.id),
        successes.map((settlement) => settlement.token),
      ]);
      for (const row of done) completed.set(row.id, row);
    }
    const outcomes = settlements.map((settlement) => {
      const links = completed.get(settlement.id) ?? null;
      return { applied: settlement.kind === "complete" && links !== null, links };
    });
    const others = [...settlements.keys()].filter((index) =>
      settlements[index]!.kind !== "complete"
    )
      .sort((a, b) => settlements[a]!.id - settlements[b]!.id);
    for (const index of others) {
      const links = await this.#applyToJob(settlements[index]!);
      outcomes[index] = { applied: links !== "lost", links: links === "lost" ? null : links };
    }
    return outcomes;
  }

  /** One release, failure or progress on its job row: `"lost"` when its lease was lost. */
  async #applyToJob(settlement: Settlement): Promise<SettledJob | null | "lost"> {
    const { id, token } = settlement;
    switch (settlement.kind) {
      case "complete":
        throw new Error("complete settlements are applied together, in COMPLETE_MANY");
      case "progress":
        return (await this.#run(PROGRESS, [settlement.percent, id, token])).count === 1
          ? null
          : "lost";
      case "release": {
        const [links] = await this.#run<SettledJob>(RELEASE, [
          settlement.availableAt,
          settlement.error,
          settlement.refundAttempt ? 1 : 0,
          settlement.crashed ? 1 : 0,
          id,
          token,
        ]);
        return links ?? "lost";
      }
      case "fail": {
        const { error } = settlement;
        const [failed] = await this.#run<SettledJob>(FAIL, [
          error.message,
          error.stack,
          settlement.attempts,
          settlement.crashed ? 1 : 0,
          settlement.at,
          id,
          token,
        ]);
        return failed ?? "lost";
      }
    }
  }
}
