/**
 * The memos of durable steps waiting for the tick that writes them: each is
 * a `step` settlement, fenced by its claim's token, written with the next
 * tick's settles (one transaction for every step that ended meanwhile),
 * and its step resolves only once that tick applied it.
 *
 * @internal
 * @module
 */
import type { Settlement, StepWrite } from "../stores/store.ts";
import type { ClaimedJob } from "../stores/store.ts";

/** One memo waiting, and its step's promise. */
interface PendingStep {
  readonly settlement: Extract<Settlement, { kind: "step" }>;
  readonly resolve: () => void;
  readonly reject: (error: Error) => void;
}

/** What {@linkcode StepWrites.take} hands to a tick: its settlements, and how to answer them. */
export interface TakenSteps {
  /** The settlements to write, in the order the steps ended. */
  readonly settlements: readonly Settlement[];
  /** The tick wrote them: `applied[i]` false means the job's lease was lost. */
  written(applied: readonly boolean[]): void;
  /** The tick failed: each step rejects with `error`. */
  failed(error: Error): void;
}

/** Memos waiting for the next tick. */
export class StepWrites {
  #pending: PendingStep[] = [];

  /** Whether a memo waits (a tick is then due: a step waits on it). */
  get due(): boolean {
    return this.#pending.length > 0;
  }

  /** Keeps `step` of `job`'s running attempt for the next tick; resolves once it is written. */
  add(job: ClaimedJob, step: StepWrite, at: number): Promise<void> {
    return new Promise((resolve, reject) => {
      this.#pending.push({
        settlement: { kind: "step", id: job.id, token: job.token, at, step },
        resolve,
        reject,
      });
    });
  }

  /** Every memo waiting, leaving none. */
  take(): TakenSteps {
    const taken = this.#pending;
    this.#pending = [];
    return {
      settlements: taken.map(({ settlement }) => settlement),
      written(applied) {
        taken.forEach(({ settlement, resolve, reject }, index) => {
          if (applied[index] === true) resolve();
          else {
            reject(
              new Error(
                `Step ${
                  JSON.stringify(settlement.step.key)
                } of job ${settlement.id} was not recorded: the job's lease was lost to another claim`,
              ),
            );
          }
        });
      },
      failed(error) {
        for (const { reject } of taken) reject(error);
      },
    };
  }
}
