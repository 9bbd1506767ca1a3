/**
 * The child's side of a test that hands its database to another process:
 * opens a queue on the arguments `StoreContext.childArgs()` gave
 * (tests/_stores.ts), so the child runs on SQLite, PostgreSQL or Redis
 * alike.
 *
 * @module
 */
import { databaseOptions } from "../src/config.ts";
import { Queue, type QueueOptions } from "../src/queue.ts";
import { PostgresStore } from "../src/stores/postgres/mod.ts";

/** What a child passes besides where the database is. */
export type ChildQueueOptions = Omit<QueueOptions, "path" | "url" | "store">;

/**
 * Opens a queue on `args`: `[db]`, the database as `QUEUE_DB` takes it (a
 * SQLite file, a Redis URL naming its prefix), or `[url, schema]` for a
 * PostgreSQL schema.
 */
export async function openChildQueue(
  args: readonly string[],
  options: ChildQueueOptions,
): Promise<Queue> {
  const [db, schema] = args;
  if (db === undefined) throw new TypeError("openChildQueue: no database given");
  if (schema === undefined) return await Queue.open({ ...options, ...databaseOptions(db) });
  return await Queue.open({ ...options, store: await PostgresStore.open(db, { schema }) });
}
