/**
 * A store that never calls its watchers: the poll-only baseline of the
 * PostgreSQL pick-up latency. The PostgreSQL store always `LISTEN`s once a
 * worker watches it; a worker on this view of it learns of new jobs only by
 * polling, as a SQLite worker on a `file:` URI does.
 *
 * @module
 */
import type { Store } from "../src/stores/store.ts";

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
