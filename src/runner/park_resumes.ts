/**
 * Which claimed jobs past their retry deadline resume a run that parked in
 * a sleep or a wait. A retry deadline (`retryUntil`, `deadlineMs`) stops
 * new attempts: a job claimed past it fails without running. A job waking
 * from a durable sleep or wait is not a new attempt (its attempt was given
 * back at the park), so it runs whatever its retry deadline; a failure of
 * that run is final, as any failure past the deadline is.
 *
 * The store keeps no mark of a park on the job itself: its memos tell. A
 * run that parked left a sleep or a wait as its last memo, recorded by the
 * attempt the job is claimed for again (the park gave it back). After a
 * failure, a crash or a timeout, the claim counts one attempt more than the
 * last memo's. The memos are read only for jobs whose deadline has passed,
 * or passes within the lease (a job claimed ahead starts a little later).
 *
 * @internal
 * @module
 */
import type { ClaimedJob, StepStore } from "../stores/store.ts";

/**
 * The ids among `claimed` that resume a parked run and whose retry
 * deadline passes before `now + withinMs`. A job whose memos cannot be read
 * counts as resuming: running it costs at most one attempt, whose failure
 * is final past the deadline, where refusing it would fail a job that never
 * failed.
 */
export async function parkResumes(
  store: Pick<StepStore, "jobSteps">,
  claimed: readonly ClaimedJob[],
  now: number,
  withinMs: number,
): Promise<Set<number>> {
  const resumes = new Set<number>();
  const due = claimed.filter((job) => job.retryUntil !== null && job.retryUntil <= now + withinMs);
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
