/**
 * A fresh database file for each run of a measurement, so that no run
 * inherits another's pages, WAL or free list.
 *
 * @module
 */
import { join } from "node:path";

/**
 * Makes a temp folder, calls `fn` with a database path inside it (the file
 * does not exist yet), and removes the folder once `fn` has settled. `fn`
 * must close its connections before it returns.
 */
export async function withTempDatabase<T>(fn: (path: string) => Promise<T>): Promise<T> {
  const dir = await Deno.makeTempDir({ prefix: "renox-queue-bench-" });
  try {
    return await fn(join(dir, "bench.db"));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}
