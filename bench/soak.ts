/**
 * The soak (`deno task bench --only soak`): continuous mixed dispatch
 * (jobs that succeed, fail for good, run delayed, hold a unique key) for ten
 * minutes while two worker processes drain, then a full drain. It reports
 * each worker's resident memory at 1, 5 and 10 minutes, the part of it V8
 * holds for the main isolate's young generation, its open file descriptors,
 * jobs per second, and whether the counters and rows agree at the end; it
 * exits 1 when the memory outside the young generation moved more than
 * ±10 % after the first minute, descriptors grew, or anything disagrees.
 *
 * Why outside the young generation: V8 sizes it to the allocation rate, up
 * to a cap it never passes (two semi-spaces of `--max-semi-space-size`), so a
 * busy worker's young generation grows from about 13 to about 52 MiB in its
 * first minutes and then holds. That is memory V8 reserves, not a leak; a
 * leak, of JS objects (the old generation) or of native memory, grows the
 * rest, which is what the check watches. The whole RSS is printed beside it.
 *
 * The worker processes run with `--expose-gc`, and every isolate in them
 * (the main one and each Web Worker) collects in full every 10 s
 * (`soak_collect.ts`): V8 collects an old generation lazily, and a Web
 * Worker's gathers minutes of garbage between its own full collections,
 * which the RSS would show as slow growth although nothing leaks.
 *
 * @module
 */
import { DatabaseSync } from "node:sqlite";
import { join } from "node:path";
import { Queue } from "../mod.ts";
import { readLines } from "./lines.ts";
import { SOAK_JOBS_URL, soakFailing, soakOk, soakUnique } from "./soak_jobs.ts";

const CONFIG = new URL("../deno.json", import.meta.url).pathname;
const WORKER = new URL("./soak_worker.ts", import.meta.url).pathname;
const TICK_MS = 100;

/** One line a worker process printed. */
interface Sample {
  readonly t: number;
  readonly rss: number;
  /** Bytes V8 holds for the main isolate's young generation. */
  readonly young: number;
  readonly heap: number;
  readonly files: number;
  readonly completed: number;
  readonly failed: number;
  readonly retried: number;
}

/** Runs the soak for `minutes`; returns the process exit code. */
export async function runSoak(minutes: number): Promise<number> {
  const dir = await Deno.makeTempDir({ prefix: "renox-queue-soak-" });
  const path = join(dir, "soak.db");
  try {
    return await soak(path, minutes * 60_000);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

async function soak(path: string, durationMs: number): Promise<number> {
  const queue = await Queue.open({ path, jobs: SOAK_JOBS_URL });
  const workers = [0, 1].map(() => {
    const child = new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", "--quiet", "--v8-flags=--expose-gc", "--config", CONFIG, WORKER, path],
      stdin: "piped",
      stdout: "piped",
      stderr: "inherit",
    }).spawn();
    const samples: Sample[] = [];
    const reading = (async () => {
      for await (const line of readLines(child.stdout)) {
        try {
          samples.push(JSON.parse(line) as Sample);
        } catch {
          // not a sample
        }
      }
    })();
    return { child, samples, reading };
  });
  const startedAt = Date.now();
  const stored = { ok: new Set<number>(), failing: new Set<number>(), unique: new Set<number>() };
  let n = 0;
  let tick = 0;
  const progressEvery = 60_000;
  let nextProgress = startedAt + progressEvery;
  while (Date.now() - startedAt < durationMs) {
    tick++;
    const ok = Array.from({ length: 15 }, () => ({ n: n++ }));
    for (const id of await queue.dispatchMany(soakOk, ok)) stored.ok.add(id);
    for (let i = 0; i < 2; i++) {
      const delayMs = 1_000 + Math.floor(Math.random() * 4_000);
      stored.ok.add(await queue.dispatch(soakOk, { n: n++ }, { delayMs }));
    }
    if (tick % 5 === 0) stored.failing.add(await queue.dispatch(soakFailing, { n: n++ }));
    stored.unique.add(await queue.dispatch(soakUnique, { key: `key-${tick % 50}` }));
    if (Date.now() >= nextProgress) {
      console.error(`soak: ${Math.round((Date.now() - startedAt) / 60_000)} min`);
      nextProgress += progressEvery;
    }
    await new Promise((resolve) => setTimeout(resolve, TICK_MS));
  }
  const dispatchedFor = Date.now() - startedAt;
  // The backlog, delayed jobs and retries drain; failing jobs end in failed_jobs.
  const drainDeadline = Date.now() + 120_000;
  let left = Infinity;
  while (Date.now() < drainDeadline) {
    const counts = Object.values(await queue.counts());
    left = counts.reduce((sum, c) => sum + c.pending + c.delayed + c.reserved, 0);
    if (left === 0) break;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  const drainedAt = Date.now();
  for (const { child } of workers) await child.stdin.close();
  for (const { child, reading } of workers) {
    await child.status;
    await reading;
  }
  const failedRows = await queue.counts();
  const failedCount = Object.values(failedRows).reduce((sum, c) => sum + c.failed, 0);
  await queue.close();
  const db = new DatabaseSync(path);
  const integrity = String(db.prepare("PRAGMA integrity_check").get()!.integrity_check);
  const jobsLeft = Number(db.prepare("SELECT COUNT(*) AS n FROM jobs").get()!.n);
  const keysLeft = Number(db.prepare("SELECT COUNT(*) AS n FROM job_keys").get()!.n);
  db.close();

  const lines: string[] = [];
  let ok = true;
  const check = (what: string, holds: boolean) => {
    lines.push(`- ${holds ? "ok" : "FAILED"}: ${what}`);
    ok &&= holds;
  };
  const minute = Math.min(60_000, durationMs / 10);
  const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
  const at = (samples: Sample[], ms: number) =>
    samples.find((sample) => sample.t >= startedAt + ms) ?? samples.at(-1)!;
  const marks = [minute, durationMs / 2, durationMs];
  const label = (ms: number) => `${(ms / 60_000).toFixed(ms < 60_000 ? 1 : 0)} min`;
  let completed = 0;
  let failed = 0;
  lines.push(
    "memory: checked outside V8's young generation, which V8 sizes to the allocation rate up to " +
      "a cap (reserved space, not a leak), with every isolate collecting in full every 10 s; " +
      "a leak of JS objects or of native memory grows the rest",
  );
  workers.forEach(({ samples }, index) => {
    const last = samples.at(-1)!;
    completed += last.completed;
    failed += last.failed;
    const base = at(samples, minute);
    const during = samples.filter((s) => s.t >= base.t && s.t <= startedAt + dispatchedFor);
    const range = (pick: (sample: Sample) => number) => {
      const high = Math.max(...during.map(pick));
      const low = Math.min(...during.map(pick));
      const drift = Math.max(high / pick(base) - 1, 1 - low / pick(base));
      return { drift, text: `${mib(low)}–${mib(high)} (±${(drift * 100).toFixed(1)} %)` };
    };
    const series = (pick: (sample: Sample) => number) =>
      marks.map((ms) => `${label(ms)} ${mib(pick(at(samples, ms)))}`).join(", ");
    const outside = (sample: Sample) => sample.rss - sample.young;
    const whole = range((sample) => sample.rss);
    const rest = range(outside);
    lines.push(
      `worker ${index + 1}: RSS ${series((sample) => sample.rss)}, after the first minute ` +
        `${whole.text}; of it V8's young generation ${series((sample) => sample.young)}; ` +
        `RSS outside it ${series(outside)}, after the first minute ${rest.text}` +
        `; JS heap used ${series((sample) => sample.heap)}` +
        `; open files ${base.files} at ${label(minute)}, ${
          at(samples, durationMs).files
        } at the end`,
    );
    check(
      `worker ${index + 1} RSS outside V8's young generation within ±10 % after the first minute`,
      rest.drift <= 0.1,
    );
    check(
      `worker ${index + 1} open files did not grow`,
      at(samples, durationMs).files <= base.files,
    );
  });
  const succeeding = stored.ok.size + stored.unique.size;
  const seconds = (drainedAt - startedAt) / 1000;
  lines.unshift(
    `soak: ${label(dispatchedFor)} of dispatch (${stored.ok.size} ok and delayed, ` +
      `${stored.failing.size} failing, ${stored.unique.size} unique), drained ` +
      `${((drainedAt - startedAt - dispatchedFor) / 1000).toFixed(1)} s later: ` +
      `${Math.round((succeeding + stored.failing.size) / seconds)} jobs/s`,
  );
  check(`every job settled (${left} left, ${jobsLeft} rows)`, left === 0 && jobsLeft === 0);
  check(`completed ${completed} = stored ${succeeding}`, completed === succeeding);
  check(
    `failed ${failed} = failed_jobs ${failedCount} = failing stored ${stored.failing.size}`,
    failed === stored.failing.size && failedCount === stored.failing.size,
  );
  check(`no unique key left (${keysLeft})`, keysLeft === 0);
  check(`integrity_check ${integrity}`, integrity === "ok");
  console.log(lines.join("\n"));
  return ok ? 0 : 1;
}
