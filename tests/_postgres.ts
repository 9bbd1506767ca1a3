/**
 * PostgreSQL for tests: the URL from `QUEUE_TEST_POSTGRES_URL`, and stores
 * opened in a schema of their own: a migrated one another test handed back
 * emptied, or a fresh one (see {@linkcode openTestPostgresStore}).
 *
 * @module
 */
import postgres from "postgres";
import type { PoolKind, Sql } from "../src/stores/postgres/engine.ts";
import { openPool } from "../src/stores/postgres/pools.ts";
import { PostgresStore, type PostgresStoreOptions } from "../src/stores/postgres/mod.ts";
import { QueueClosedError } from "../src/errors.ts";
import { freshSchemaOf, giveBack, type PooledSchema, putBack, takeSchema } from "./_schema_pool.ts";

/** The test database's URL, or null when tests that need PostgreSQL should skip. */
export function postgresTestUrl(): string | null {
  return Deno.env.get("QUEUE_TEST_POSTGRES_URL") || null;
}

/**
 * A client of 2 connections to `url` whose unqualified names resolve in
 * `schema` (a test's own connection beside a store's, or an engine's).
 */
export function schemaClient(url: string, schema: string): postgres.Sql {
  return postgres(url, { max: 2, onnotice: () => {}, connection: { search_path: schema } });
}

/**
 * The pools of an engine on `schema`, opened as `PostgresStore.open` opens
 * them (see `PoolKind`), with 2 shared connections.
 */
export function enginePools(url: string, schema: string): (kind: PoolKind) => Sql {
  const settings = { server: url, schema, maxConnections: 2, connectTimeoutMs: 10_000 };
  return (kind) => openPool(settings, kind);
}

/** A fresh schema name, unique to this process and call. */
export function freshSchema(): string {
  return `t_${crypto.randomUUID().replaceAll("-", "").slice(0, 20)}`;
}

/**
 * A store in a schema of its own, and what disposing it does with the schema.
 * With neither `schema` nor `migrate` given, the schema is a migrated one
 * another test of this file handed back emptied (tests/_schema_pool.ts), or
 * a fresh one; disposing the store hands it back, emptied again (or drops
 * it when the test changed what a fresh migration makes). Otherwise the
 * schema is `options.schema` or a fresh one, dropped when the store is
 * disposed.
 */
export async function openTestPostgresStore(
  url: string,
  options: PostgresStoreOptions = {},
): Promise<TestPostgresStore> {
  const pooled = options.schema === undefined && options.migrate === undefined;
  const taken = pooled ? takeSchema(url) : undefined;
  const schema = options.schema ?? taken?.name ?? freshSchema();
  let store: PostgresStore;
  let fresh: PooledSchema | undefined;
  try {
    store = await PostgresStore.open(url, { ...options, schema });
  } catch (error) {
    if (taken !== undefined) putBack(url, taken); // dropped with the pool, whatever its state
    throw error;
  }
  if (pooled && taken === undefined) {
    try {
      fresh = await freshSchemaOf(store, schema);
    } catch (error) {
      await store.transaction((tx) => tx.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`));
      await store.close();
      throw error;
    }
  }
  const pooledSchema = taken ?? fresh;
  let handBack = pooledSchema !== undefined;
  return {
    store,
    schema,
    sharedOutside() {
      handBack = false;
    },
    async [Symbol.asyncDispose]() {
      if (handBack) {
        try {
          await giveBackThrough(url, store, pooledSchema!);
          return;
        } catch {
          // dropped below, as a schema of its own
        }
      }
      try {
        await store.transaction((tx) => tx.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`));
      } catch {
        // already closed by the test: drop it through a store of its own
        const dropper = await PostgresStore.open(url, { schema, migrate: false });
        await dropper.transaction((tx) => tx.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`));
        await dropper.close();
      }
      await store.close();
    },
  };
}

/** A store of {@linkcode openTestPostgresStore}: disposing it hands back or drops its schema. */
export interface TestPostgresStore extends AsyncDisposable {
  /** The store, closed when disposed. */
  readonly store: PostgresStore;
  /** Its schema. */
  readonly schema: string;
  /**
   * Says that connections out of this test's sight (another process, a
   * child on `childArgs`) may still reach the schema: it is dropped when
   * disposed, never handed to another test.
   */
  sharedOutside(): void;
}

/**
 * Hands `schema` back to the pool through `store`, or, when the test closed
 * it, through a store of its own; closes the stores.
 */
async function giveBackThrough(
  url: string,
  store: PostgresStore,
  schema: PooledSchema,
): Promise<void> {
  try {
    await giveBack(url, store, schema);
  } catch (error) {
    if (!(error instanceof QueueClosedError)) throw error;
    const own = await PostgresStore.open(url, { schema: schema.name, migrate: false });
    try {
      await giveBack(url, own, schema);
    } finally {
      await own.close();
    }
  } finally {
    await store.close();
  }
}

/** One node of a plan PostgreSQL gives for `EXPLAIN (FORMAT JSON)`, with the nodes below it. */
export type PlanNode = Record<string, unknown> & { Plans?: PlanNode[] };

/** Every node of the plan in `row`, the one row of an `EXPLAIN (FORMAT JSON)`, top first. */
export function planNodes(row: Record<string, unknown>): PlanNode[] {
  const nodes: PlanNode[] = [];
  const walk = (node: PlanNode) => {
    nodes.push(node);
    for (const child of node.Plans ?? []) walk(child);
  };
  walk((Object.values(row)[0] as { Plan: PlanNode }[])[0]!.Plan);
  return nodes;
}
