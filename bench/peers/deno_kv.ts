/**
 * Deno KV queues (built into Deno) as a peer: `enqueue()` one at a time,
 * atomic enqueues of {@linkcode DENO_KV_BULK_SIZE} per commit, and a drain of
 * pre-queued jobs by `listenQueue()` (which has no concurrency setting), each
 * on a fresh local database file, in a child process with `--unstable-kv`,
 * verified: every job handled, each once at least.
 *
 * @module
 */
import { withTempDatabase } from "../temp_database.ts";

/**
 * Enqueues per atomic commit in the bulk row: the most one commit takes
 * (Deno KV allows 1,000 mutations, enqueues included, and 800 KiB of them
 * per atomic operation), so that the peer's bulk row is its best.
 */
export const DENO_KV_BULK_SIZE = 1_000;

const CHILD = new URL("./deno_kv_child.ts", import.meta.url);

/** One workload of `jobs` jobs in a child process; its rate in jobs per second. */
export function denoKv(workload: "dispatch" | "bulk" | "drain", jobs: number): Promise<number> {
  return withTempDatabase(async (path) => {
    const output = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", "--unstable-kv", "--quiet", CHILD.href, workload, String(jobs), path],
      stdout: "piped",
      stderr: "piped",
    }).output();
    const stderr = new TextDecoder().decode(output.stderr);
    if (!output.success) throw new Error(`Deno KV ${workload} failed: ${stderr}`);
    const { rate } = JSON.parse(new TextDecoder().decode(output.stdout)) as { rate: number };
    return rate;
  });
}
