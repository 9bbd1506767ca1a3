/**
 * Which Web Worker threads of this process are alive, read from
 * `/proc/self/task` (Linux names each Web Worker's thread `worker-N`). It is
 * how a terminated Web Worker that is still stuck in a synchronous loop is
 * told apart from one that stopped.
 *
 * @internal
 * @module
 */

/** Names of this process's live Web Worker threads, or null where they cannot be read. */
export function workerThreads(): Set<string> | null {
  const names = new Set<string>();
  try {
    for (const task of Deno.readDirSync("/proc/self/task")) {
      try {
        const name = Deno.readTextFileSync(`/proc/self/task/${task.name}/comm`).trim();
        if (name.startsWith("worker-")) names.add(name);
      } catch {
        // the thread ended between listing and reading: it is not alive
      }
    }
  } catch {
    return null;
  }
  return names;
}
