/**
 * A store that never calls its watchers: the poll-only baseline of the
 * server stores' pick-up latency. The PostgreSQL store always `LISTEN`s (the
 * Redis store subscribes) once a worker watches it; a worker on this view of
 * it learns of new jobs only by polling, as a SQLite worker on a `file:` URI
 * does. And the bench's queue on such a store.
 *
 * @module
 */
import { Queue } from "../mod.ts";
import type { Store } from "../src/stores/store.ts";
import { BENCH_JOBS_URL } from "./jobs.ts";

/**
 * A queue of the bench's jobs on `store`, opened with the store's defaults
 * (the queue closes the store; the store is closed here when opening
 * fails); with `watch: false` its workers are never woken and only poll.
 */
export async function openBenchQueue(
  store: Store,
  options: { readonly watch?: boolean } = {},
): Promise<Queue> {
  try {
    return await Queue.open({
      store: options.watch === false ? withoutWatch(store) : store,
      jobs: BENCH_JOBS_URL,
    });
  } catch (error) {
    await store.close();
    throw error;
  }
}

/**
 * `store` with `watch()` made a no-op; every other member is the store's
 * own, bound to it (its `#private` fields need the real `this`).
 */
export function withoutWatch(store: Store): Store {
  return new Proxy(store, {
    get(target, property) {
      if (property === "watch") return () => ({ [Symbol.dispose]() {} });
      const value = Reflect.get(target, property, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}
