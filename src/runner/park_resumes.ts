/**
 * Which claimed jobs past their retry deadline, or with a cancel asked,
 * resume a run that parked in a sleep or a wait. A retry deadline
 * (`retryUntil`, `deadlineMs`) stops new attempts: a job claimed past it
 * fails without running. A job waking from a durable sleep or wait is not a
 * new attempt (its attempt was given back at the park), so it runs whatever
 * its retry deadline; a failure of that run is final, as any failure past
 * the deadline is. A job claimed with a cancel asked (while the run ran,
 * which then parked) is cancelled without starting its handler: when the
 * claim resumes a parked run, that run started, and the attempt the claim
 * counted again for it stands (see `src/stores/sql/started_attempts.ts`).
 *
 * The store keeps no mark of a park on the job itself: its memos tell. A
 * run that parked left a sleep or a wait as its last memo, recorded by the
 * attempt the job is claimed for again (the park gave it back). After a
 * failure, a crash or a timeout, the claim counts one attempt more than the
 * last memo's. The memos are read only for jobs whose deadline has passed,
 * or passes within the lease (a job claimed ahead starts a little later),
 * and for jobs claimed with a cancel asked.
 *
 * @internal
 * @module
 */
import type { ClaimedJob, StepStore } from "../stores/store.ts";

/**
 * The ids among `claimed` that resume a parked run and whose retry
 * deadline passes before `now + withinMs`, or that were claimed with a
 * cancel asked. A job whose memos cannot be read counts as resuming:
 * running it costs at most one attempt, whose failure is final past the
 * deadline, where refusing it would fail a job that never failed (and a
 * cancelled one then keeps the attempt its claim counted).
 */
export async function parkResumes(
  store: Pick<StepStore, "jobSteps">,
  claimed: readonly ClaimedJob[],
  now: number,
  withinMs: number,
): Promise<Set<number>> {
  const resumes = new Set<number>();
  const due = claimed.filter((job) =>
    (job.retryUntil !== null && job.retryUntil <= now + withinMs) ||
    (job.cancelRequested !== undefined && job.cancelRequested !== null)
  );
  await Promise.all(due.map(async (job) => {
    try {
      const { steps } = await store.jobSteps(job.id);
      const last = steps.reduce<typeof steps[number] | undefined>(
        (latest, step) => latest === undefined || step.seq > latest.seq ? step : latest,
        undefined,
      );
      if (last !== undefined && last.kind !== "step" && last.attempt === job.attempts) {
        resumes.add(job.id);
      }
    } catch {
      resumes.add(job.id);
    }
  }));
  return resumes;
}
