/**
 * PostgreSQL for tests: the URL from `QUEUE_TEST_POSTGRES_URL`, and stores
 * opened in a fresh schema that is dropped when the store is disposed.
 *
 * @module
 */
import postgres from "postgres";
import type { PoolKind, Sql } from "../src/stores/postgres/engine.ts";
import { openPool } from "../src/stores/postgres/pools.ts";
import { PostgresStore, type PostgresStoreOptions } from "../src/stores/postgres/mod.ts";

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

/** A store in a new schema of its own; disposing it drops the schema and closes the store. */
export async function openTestPostgresStore(
  url: string,
  options: PostgresStoreOptions = {},
): Promise<{ store: PostgresStore; schema: string } & AsyncDisposable> {
  const schema = options.schema ?? freshSchema();
  const store = await PostgresStore.open(url, { ...options, schema });
  return {
    store,
    schema,
    async [Symbol.asyncDispose]() {
      try {
        await store.transaction((tx) => tx.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`));
      } catch {
        // already closed by the test: drop it through a store of its own
        const dropper = await PostgresStore.open(url, { schema });
        await dropper.transaction((tx) => tx.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`));
        await dropper.close();
      }
      await store.close();
    },
  };
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
