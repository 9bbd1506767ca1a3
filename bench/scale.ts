/**
 * The scale bench (`deno task bench --only scale`): a million queued jobs.
 * A child process stores them with `dispatchMany` in chunks of
 * {@linkcode DEFAULT_SCALE_CHUNK}, and a worker child process drains them all at
 * concurrency {@linkcode SCALE_CONCURRENCY} (isolate executor); the same is
 * done to a queue of `--jobs` jobs (20,000) before and after, the baseline
 * of the same run. Each child's peak resident memory is read from outside
 * (VmHWM in `/proc/<pid>/status`), with the split of the largest RSS
 * sampled into anonymous and file-backed memory. It reports the drain
 * rate over the first `--jobs` jobs of the million against the whole small
 * queue's (target 90 %), the rate of each tenth of the million, the peak RSS
 * of the dispatching process (target under 200 MB) and of the worker (under
 * 100 MB), how much of that V8 holds for the JS heap, and the largest WAL
 * seen; it exits 1 when a target is missed or a child did not do all its
 * work.
 *
 * @module
 */
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { readLines } from "./lines.ts";
import { median } from "./median.ts";
import { parseScaleChildLine, scaleChildCommand, type ScaleChildTask } from "./scale_child.ts";

/** Jobs of the scale run, without `--scale-jobs`. */
export const DEFAULT_SCALE_JOBS = 1_000_000;

/** Jobs per `dispatchMany` call, without `--scale-chunk`. */
export const DEFAULT_SCALE_CHUNK = 10_000;

/** How the scale bench runs (`--scale-jobs`, `--scale-chunk`, `--scale-v8-flags`). */
export interface ScaleOptions {
  /** Jobs in the big queue. */
  readonly jobs: number;
  /** Jobs per `dispatchMany` call. */
  readonly chunk: number;
  /** V8 flags the child processes run with, or null for none. */
  readonly v8Flags: string | null;
}

/** The worker's concurrency. */
export const SCALE_CONCURRENCY = 32;

/** Head-of-queue drain rate against the small queue's, at least. */
const DRAIN_TARGET = 0.9;
/** Peak RSS of the process that dispatched the million, at most. */
const DISPATCH_RSS_TARGET = 200 * 1000 * 1000;
/** Peak RSS of the worker that drained the million, at most. */
const WORKER_RSS_TARGET = 100 * 1000 * 1000;
/** How often a child's memory and the WAL's size are looked at, in ms. */
const SAMPLE_MS = 50;
/** Tenths of the million whose rates are shown. */
const SLICES = 10;

/** What one child process did, as seen from outside. */
interface ChildRun {
  /** Its `at` lines: ms since `go` and jobs completed by then (drain only). */
  readonly progress: readonly { readonly ms: number; readonly completed: number }[];
  /** Its `done` line. */
  readonly done: { readonly ms: number; readonly completed: number; readonly heapTotal: number };
  /** Peak resident memory (VmHWM), in bytes. */
  readonly peakRss: number;
  /**
   * The largest resident memory sampled (VmRSS), split into anonymous memory
   * (V8's heap, the C heap, stacks) and file-backed pages (the mapped `deno`
   * binary and libraries), in bytes.
   */
  readonly sampledPeak: Residence;
  /** Largest WAL file seen while it ran, in bytes. */
  readonly maxWal: number;
}

/** A process's resident memory, from `/proc/<pid>/status`, in bytes. */
interface Residence {
  /** VmHWM: the peak, as the kernel kept it. */
  readonly peak: number;
  /** VmRSS: resident now. */
  readonly resident: number;
  /** RssAnon. */
  readonly anonymous: number;
  /** RssFile. */
  readonly fileBacked: number;
}

/** One queue's dispatch and drain. */
interface QueueRun {
  readonly jobs: number;
  readonly dispatch: ChildRun;
  readonly drain: ChildRun;
  /** Size of the database file after the dispatch, in bytes. */
  readonly fileBytes: number;
}

/** Runs the scale bench as `options` say, with `baselineJobs` in the small queue. */
export async function runScale(options: ScaleOptions, baselineJobs: number): Promise<number> {
  const { jobs } = options;
  const load = () => Deno.loadavg().map((n) => n.toFixed(2)).join(", ");
  const loadBefore = load();
  const say = (what: string) => console.error(`bench: scale: ${what}`);
  say(`baseline, ${baselineJobs.toLocaleString("en-US")} jobs`);
  const before = await queueRun(baselineJobs, options);
  say(`${jobs.toLocaleString("en-US")} jobs`);
  const big = await queueRun(jobs, options);
  say(`baseline again, ${baselineJobs.toLocaleString("en-US")} jobs`);
  const after = await queueRun(baselineJobs, options);
  const loadAfter = load();

  const lines: string[] = [];
  let ok = true;
  const check = (what: string, holds: boolean) => {
    lines.push(`- ${holds ? "ok" : "FAILED"}: ${what}`);
    ok &&= holds;
  };
  const rate = (count: number, ms: number) => count / (ms / 1000);
  const perSecond = (n: number) => `${Math.round(n).toLocaleString("en-US")} jobs/s`;
  const mb = (bytes: number) => `${(bytes / 1000 / 1000).toFixed(1)} MB`;
  const count = (n: number) => n.toLocaleString("en-US");
  const split = ({ sampledPeak }: ChildRun) =>
    `${mb(sampledPeak.anonymous)} + ${mb(sampledPeak.fileBacked)}`;

  const baselineDispatch = median(
    [before, after].map((run) => rate(run.jobs, run.dispatch.done.ms)),
  );
  const baselineDrain = median([before, after].map((run) => rate(run.jobs, run.drain.done.ms)));
  const bigDispatch = rate(jobs, big.dispatch.done.ms);
  const headMs = msToComplete(big.drain, baselineJobs);
  const head = rate(baselineJobs, headMs);
  const whole = rate(jobs, big.drain.done.ms);

  lines.push(
    `scale: ${count(jobs)} no-op jobs against ${count(baselineJobs)} (before and after), ` +
      `dispatchMany ${count(options.chunk)} per call, drained by one worker process at ` +
      `concurrency ${SCALE_CONCURRENCY} (isolate executor)${
        options.v8Flags === null ? "" : `, children run with --v8-flags=${options.v8Flags}`
      }; load average ${loadBefore} ` +
      `before, ${loadAfter} after`,
    "",
    "| | " + count(baselineJobs) + " (before / after) | " + count(jobs) + " | ratio |",
    "| --- | ---: | ---: | ---: |",
    `| dispatchMany | ${perSecond(rate(before.jobs, before.dispatch.done.ms))} / ${
      perSecond(rate(after.jobs, after.dispatch.done.ms))
    } | ${perSecond(bigDispatch)} | ${(bigDispatch / baselineDispatch).toFixed(2)} |`,
    `| drain c${SCALE_CONCURRENCY}, first ${count(baselineJobs)} jobs | ${
      perSecond(rate(before.jobs, before.drain.done.ms))
    } / ${perSecond(rate(after.jobs, after.drain.done.ms))} | ${perSecond(head)} | ${
      (head / baselineDrain).toFixed(2)
    } |`,
    `| drain c${SCALE_CONCURRENCY}, all | | ${perSecond(whole)} | ${
      (whole / baselineDrain).toFixed(2)
    } |`,
    `| dispatching process, peak RSS | ${mb(before.dispatch.peakRss)} / ${
      mb(after.dispatch.peakRss)
    } | ${mb(big.dispatch.peakRss)} | |`,
    `| worker process, peak RSS | ${mb(before.drain.peakRss)} / ${mb(after.drain.peakRss)} | ${
      mb(big.drain.peakRss)
    } | |`,
    `| largest RSS sampled, anonymous + file-backed, dispatching | ${split(before.dispatch)} / ${
      split(after.dispatch)
    } | ${split(big.dispatch)} | |`,
    `| largest RSS sampled, anonymous + file-backed, worker | ${split(before.drain)} / ${
      split(after.drain)
    } | ${split(big.drain)} | |`,
    `| V8 heap held at the end (heapTotal), dispatching / worker | ${
      mb(before.dispatch.done.heapTotal)
    } / ${mb(before.drain.done.heapTotal)} | ${mb(big.dispatch.done.heapTotal)} / ${
      mb(big.drain.done.heapTotal)
    } | |`,
    `| largest WAL, dispatch / drain | ${mb(before.dispatch.maxWal)} / ${
      mb(before.drain.maxWal)
    } | ${mb(big.dispatch.maxWal)} / ${mb(big.drain.maxWal)} | |`,
    `| database file after the dispatch | ${mb(before.fileBytes)} | ${mb(big.fileBytes)} | |`,
    "",
    `drain rate by tenth of the ${count(jobs)}: ${
      sliceRates(big.drain, jobs).map((each) => perSecond(each)).join(", ")
    }`,
    "",
  );
  for (const [name, run] of [["before", before], ["big", big], ["after", after]] as const) {
    check(
      `${name}: the drain completed ${count(run.drain.done.completed)} of ${count(run.jobs)}`,
      run.drain.done.completed === run.jobs,
    );
  }
  check(
    `head-of-queue drain ${(head / baselineDrain * 100).toFixed(0)} % of the small queue's ` +
      `(target ${DRAIN_TARGET * 100} %)`,
    head / baselineDrain >= DRAIN_TARGET,
  );
  check(
    `dispatching process peak RSS ${mb(big.dispatch.peakRss)} (target under ${
      mb(DISPATCH_RSS_TARGET)
    })`,
    big.dispatch.peakRss < DISPATCH_RSS_TARGET,
  );
  check(
    `worker peak RSS ${mb(big.drain.peakRss)} (target under ${mb(WORKER_RSS_TARGET)})`,
    big.drain.peakRss < WORKER_RSS_TARGET,
  );
  console.log(lines.join("\n"));
  return ok ? 0 : 1;
}

/** A fresh database: `jobs` dispatched by one child, drained by another; the rows checked. */
async function queueRun(jobs: number, options: ScaleOptions): Promise<QueueRun> {
  const dir = await Deno.makeTempDir({ prefix: "renox-queue-scale-" });
  const path = join(dir, "scale.db");
  try {
    const { chunk, v8Flags } = options;
    const dispatch = await runChild({ kind: "dispatch", path, jobs, chunk }, path, v8Flags);
    const fileBytes = (await Deno.stat(path)).size;
    const drain = await runChild(
      { kind: "drain", path, concurrency: SCALE_CONCURRENCY },
      path,
      v8Flags,
    );
    const db = new DatabaseSync(path, { readOnly: true });
    const left = Number(db.prepare("SELECT COUNT(*) AS n FROM jobs").get()!.n);
    db.close();
    if (left !== 0) throw new Error(`scale: ${left} jobs left after the drain of ${jobs}`);
    return { jobs, dispatch, drain, fileBytes };
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/**
 * Runs one child (with `v8Flags`, unless null) to its end, sampling its
 * memory and the WAL's size; a drain child is told `go` once it is ready.
 */
async function runChild(
  task: ScaleChildTask,
  path: string,
  v8Flags: string | null,
): Promise<ChildRun> {
  const child = scaleChildCommand(task, v8Flags).spawn();
  const stdin = child.stdin.getWriter();
  let peakRss = 0;
  let sampledPeak: Residence = { peak: 0, resident: 0, anonymous: 0, fileBacked: 0 };
  let maxWal = 0;
  const sample = () => {
    const residence = residenceOf(child.pid);
    peakRss = Math.max(peakRss, residence.peak);
    if (residence.resident > sampledPeak.resident) sampledPeak = residence;
    maxWal = Math.max(maxWal, sizeOf(`${path}-wal`));
  };
  const timer = setInterval(sample, SAMPLE_MS);
  const progress: { ms: number; completed: number }[] = [];
  let done: { ms: number; completed: number; heapTotal: number } | null = null;
  try {
    for await (const text of readLines(child.stdout)) {
      const line = parseScaleChildLine(text);
      if (line?.kind === "ready") await stdin.write(new TextEncoder().encode("go\n"));
      else if (line?.kind === "at") progress.push(line);
      else if (line?.kind === "done") {
        sample(); // before the child closes its queue and exits
        done = line;
        await stdin.close();
      }
    }
  } finally {
    clearInterval(timer);
  }
  const status = await child.status;
  if (!status.success || done === null) {
    throw new Error(`scale: the ${task.kind} child ended with code ${status.code} before done`);
  }
  return { progress, done, peakRss, sampledPeak, maxWal };
}

/** The resident memory of process `pid` (all 0 once it is gone). */
function residenceOf(pid: number): Residence {
  let status = "";
  try {
    status = Deno.readTextFileSync(`/proc/${pid}/status`);
  } catch {
    // gone: every field reads 0
  }
  const bytes = (field: string) => {
    const kib = new RegExp(`^${field}:\\s+(\\d+) kB$`, "m").exec(status)?.[1];
    return kib === undefined ? 0 : Number(kib) * 1024;
  };
  return {
    peak: bytes("VmHWM"),
    resident: bytes("VmRSS"),
    anonymous: bytes("RssAnon"),
    fileBacked: bytes("RssFile"),
  };
}

/** The size of the file at `path`, 0 when there is none. */
function sizeOf(path: string): number {
  try {
    return Deno.statSync(path).size;
  } catch {
    return 0;
  }
}

/** The ms since `go` at which `drain` had completed `count` jobs, interpolated between its lines. */
function msToComplete(drain: ChildRun, count: number): number {
  let last = { ms: 0, completed: 0 };
  for (const point of [...drain.progress, drain.done]) {
    if (point.completed >= count) {
      const share = (count - last.completed) / Math.max(1, point.completed - last.completed);
      return last.ms + share * (point.ms - last.ms);
    }
    last = point;
  }
  return drain.done.ms;
}

/** The drain rate of each {@linkcode SLICES}th of `jobs`. */
function sliceRates(drain: ChildRun, jobs: number): number[] {
  const size = jobs / SLICES;
  return Array.from({ length: SLICES }, (_, index) => {
    const ms = msToComplete(drain, size * (index + 1)) - msToComplete(drain, size * index);
    return size / (ms / 1000);
  });
}
