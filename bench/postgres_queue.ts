/**
 * A queue on a PostgreSQL schema with the bench's jobs module: the
 * counterpart of `queue_fixture.ts` for `--store postgres`, shared by this
 * process and the worker processes it starts.
 *
 * @module
 */
import type { Queue } from "../mod.ts";
import { PostgresStore } from "../src/stores/postgres/mod.ts";
import { withTempSchema } from "./postgres_schema.ts";
import { openBenchQueue } from "./unwatched_store.ts";

/**
 * Opens a queue on `schema` (created and migrated if missing) with the
 * store's defaults; with `watch: false` its workers are never woken by
 * `LISTEN/NOTIFY` and only poll.
 */
export async function openPostgresQueue(
  url: string,
  schema: string,
  options: { readonly watch?: boolean } = {},
): Promise<Queue> {
  return openBenchQueue(await PostgresStore.open(url, { schema }), options);
}

/**
 * Opens a queue on a fresh schema, calls `fn` with it and the schema's
 * name, closes the queue and drops the schema.
 */
export function withPostgresQueue<T>(
  url: string,
  fn: (queue: Queue, schema: string) => Promise<T>,
): Promise<T> {
  return withTempSchema(url, async (schema) => {
    await using queue = await openPostgresQueue(url, schema);
    return await fn(queue, schema);
  });
}
