/**
 * Migrated schemas that the PostgreSQL tests of one test file hand on to
 * each other, so that a test asking for a fresh default store does not pay
 * for a migration (the 25 schema steps' DDL, 1 to 1.6 s each on the suite's
 * busy machine) and a `DROP SCHEMA` after it.
 *
 * Right after a schema's migration, before any test used it, its
 * {@linkcode fingerprint} is taken ({@linkcode freshSchemaOf}): its
 * relations, columns, indexes, constraints, triggers, routines, types and
 * sequences, the steps recorded, and the planner's statistics. A test hands
 * the schema back when it ends ({@linkcode giveBack}): in one transaction
 * its tables are emptied (`TRUNCATE … RESTART IDENTITY` of every table a
 * row was written to, every used sequence set back to its start, the
 * planner's sizes set back to the migration's, the steps' `applied_at` set
 * to the hand-back's time, as a migration right then would), and its
 * fingerprint taken again. A schema whose fingerprint differs from its
 * fresh one (a test that dropped an index, replaced a function, left a
 * move's fence triggers, created a table or ran `ANALYZE`), or whose
 * relations another connection still holds a lock on, is dropped instead:
 * the next test gets a schema no test could tell from a fresh one. Each
 * schema is compared with its own fresh fingerprint, not another's: what
 * the server stamps on a new column (this server keeps the WAL position of
 * its creation in each column's options, `pg_attver`) differs between two
 * migrations of the same steps.
 *
 * The schemas left at the end of a test file are dropped by a
 * `Deno.test.afterAll` hook. Each test file runs in a runtime of its own, so
 * a pool is one file's: tests of one file run one at a time.
 *
 * @module
 */
import postgres from "postgres";
import type { PostgresStore } from "../src/stores/postgres/mod.ts";

/** The transaction handle of `PostgresStore.transaction`. */
type Transaction = Parameters<Parameters<PostgresStore["transaction"]>[0]>[0];

/** A migrated schema of the pool, and what it was right after its migration. */
export interface PooledSchema {
  /** The schema's name. */
  readonly name: string;
  /** Its {@linkcode fingerprint} right after its migration. */
  readonly print: string;
  /** The planner's size of each of its relations then: JSON rows for {@linkcode RESTORE_SIZES}. */
  readonly sizes: string;
}

/** Emptied schemas of this test file, by URL, ready for the next test. */
const idle = new Map<string, PooledSchema[]>();

/** How many schemas of one URL wait in the pool at most; more are dropped. */
const MOST_IDLE = 4;

Deno.test.afterAll(async () => {
  for (const [url, schemas] of idle) {
    idle.delete(url);
    if (schemas.length === 0) continue;
    const sql = postgres(url, { max: 1, onnotice: () => {} });
    try {
      for (const { name } of schemas) await sql.unsafe(`DROP SCHEMA IF EXISTS "${name}" CASCADE`);
    } finally {
      await sql.end();
    }
  }
});

/** An emptied schema of the pool of `url`, taken out of it; undefined when there is none. */
export function takeSchema(url: string): PooledSchema | undefined {
  return idle.get(url)?.pop();
}

/** Puts `schema`, migrated and holding no rows, into the pool of `url` (dropped at the end). */
export function putBack(url: string, schema: PooledSchema): void {
  const schemas = idle.get(url) ?? [];
  idle.set(url, schemas);
  schemas.push(schema);
}

/**
 * `schema`, just migrated by `store` and not yet used, as the pool keeps it:
 * with its fingerprint and sizes as they are now.
 */
export async function freshSchemaOf(store: PostgresStore, schema: string): Promise<PooledSchema> {
  return await store.transaction(async (tx) => {
    const print = await fingerprint(tx, schema);
    const [row] = await tx.query<{ sizes: string }>(READ_SIZES, [schema]);
    return { name: schema, print, sizes: row!.sizes };
  });
}

/**
 * Empties `schema` through `store` and puts it back into the pool of `url`
 * when it is then as its migration left it; drops it otherwise. Rejects
 * when neither could be done (the caller drops it another way).
 */
export async function giveBack(
  url: string,
  store: PostgresStore,
  schema: PooledSchema,
): Promise<void> {
  const { name } = schema;
  const kept = await store.transaction(async (tx) => {
    // Sent together, run in order: on the suite's busy machine each round trip costs tens of ms.
    const [, , , , print] = await Promise.all([
      // A test database: a crash may lose the hand-back, which then only costs a fresh schema.
      tx.query("SET LOCAL synchronous_commit = off", []),
      tx.query(emptySchema(name), []),
      tx.query(RESTORE_SIZES, [name, schema.sizes]),
      tx.query("UPDATE queue_migrations SET applied_at = $1", [Date.now()]),
      fingerprint(tx, name),
    ]);
    if (print === schema.print && (idle.get(url)?.length ?? 0) < MOST_IDLE) return true;
    await tx.query(`DROP SCHEMA "${name}" CASCADE`, []);
    return false;
  });
  if (kept) putBack(url, schema);
}

/**
 * A `DO` block that truncates every table of `schema` with pages (every one
 * a row was ever written to, committed or not) but the record of steps,
 * restarting the sequences they own, then sets every other sequence used
 * since back to its start. A table no row reached is as its migration left it.
 */
function emptySchema(schema: string): string {
  return `DO $empty$
DECLARE
  written text;
  used record;
BEGIN
  WITH ns AS (SELECT '${schema}'::regnamespace AS oid), ${SCHEMA_OBJECTS}
  SELECT string_agg(format('%I.%I', '${schema}', relname), ', ') INTO written FROM tab
   WHERE relkind = 'r' AND relname <> 'queue_migrations' AND pg_relation_size(oid) > 0;
  IF written IS NOT NULL THEN
    EXECUTE 'TRUNCATE ' || written || ' RESTART IDENTITY';
  END IF;
  FOR used IN WITH ns AS (SELECT '${schema}'::regnamespace AS oid), ${SCHEMA_OBJECTS}
              SELECT tab.oid, s.seqstart FROM tab JOIN pg_sequence s ON s.seqrelid = tab.oid
               WHERE CASE WHEN tab.relkind = 'S'
                     THEN pg_sequence_last_value(tab.oid) IS NOT NULL END LOOP
    PERFORM setval(used.oid, used.seqstart, false);
  END LOOP;
END
$empty$`;
}

/**
 * CTEs of the objects in the schema of CTE `ns`, found through their
 * dependencies (by index: a scan of `pg_class` by namespace reads the whole
 * catalog, which the suite's `CREATE`s and `DROP`s keep large): `top`, every
 * object that depends on the schema itself (tables, sequences, views,
 * routines, types of their own; not indexes, constraints, triggers or row
 * types, which depend on their table); `tab`, the relations among them;
 * `idx`, their indexes; `rel`, the relations and the indexes.
 */
const SCHEMA_OBJECTS = `top AS (
  SELECT d.classid, d.objid FROM pg_depend d
   WHERE d.refclassid = 'pg_namespace'::regclass AND d.refobjid = (SELECT oid FROM ns)
),
tab AS (
  SELECT c.* FROM pg_class c
   WHERE c.oid IN (SELECT objid FROM top WHERE classid = 'pg_class'::regclass)
),
idx AS (SELECT i.* FROM pg_index i WHERE i.indrelid IN (SELECT oid FROM tab)),
rel AS (
  SELECT * FROM tab UNION ALL SELECT c.* FROM pg_class c WHERE c.oid IN (SELECT indexrelid FROM idx)
)`;

/** Each relation's size as the planner reads it from `pg_class`, by name. */
const READ_SIZES = `WITH ns AS (SELECT $1::regnamespace AS oid), ${SCHEMA_OBJECTS}
SELECT json_agg(json_build_object('name', relname, 'pages', relpages, 'tuples', reltuples,
    'visible', relallvisible))::text AS sizes
  FROM rel`;

/**
 * Sets the planner's sizes (`relpages`, `reltuples`, `relallvisible`) of the
 * schema's relations back to a fresh migration's, where they differ: a
 * truncated table's indexes say "never counted" (0 pages, -1 rows) where
 * the migration's say "empty" (1 page, 0 rows), which the planner weighs
 * differently for a partial index; and an `ANALYZE` of an empty table says
 * "counted: empty" where the migration's says "never counted".
 */
const RESTORE_SIZES = `WITH ns AS (SELECT $1::regnamespace AS oid), ${SCHEMA_OBJECTS}
UPDATE pg_class c
   SET relpages = f.pages, reltuples = f.tuples, relallvisible = f.visible
  FROM rel, json_to_recordset($2::text::json)
    AS f(name name, pages integer, tuples real, visible integer)
 WHERE c.oid = rel.oid AND rel.relname = f.name
   AND (c.relpages, c.reltuples, c.relallvisible) IS DISTINCT FROM (f.pages, f.tuples, f.visible)`;

/**
 * What a test could tell apart in `schema`, one line per item, its name
 * replaced by `<schema>`: the schema's owner and grants; each relation's
 * kind, options, grants, size on disk (none but a sequence's, an index's
 * empty pages, and the record of steps), the planner's page and row counts
 * and statistics; each column, index, constraint, trigger, routine (with its
 * body and settings), type, rule, policy and extended statistics; each
 * sequence's settings and whether it was used; how many objects of each
 * catalog depend on the schema (whatever else a test created there); the
 * steps recorded; and whether another connection holds a lock on a
 * relation of the schema.
 */
async function fingerprint(tx: Transaction, schema: string): Promise<string> {
  const [row] = await tx.query<{ print: string }>(FINGERPRINT, [schema]);
  return row!.print;
}

const FINGERPRINT = `
WITH ns AS (SELECT oid FROM pg_namespace WHERE nspname = $1),
${SCHEMA_OBJECTS},
lines AS (
  SELECT format('schema owner=%s acl=%s', pg_get_userbyid(nspowner), nspacl) AS line
    FROM pg_namespace WHERE oid = (SELECT oid FROM ns)
  UNION ALL
  SELECT format('relation %s kind=%s persistence=%s owner=%s options=%s acl=%s rls=%s/%s '
      'replica=%s pages=%s tuples=%s visible=%s bytes=%s statistics=%s', c.relname, c.relkind,
      c.relpersistence, pg_get_userbyid(c.relowner), c.reloptions, c.relacl, c.relrowsecurity,
      c.relforcerowsecurity, c.relreplident, c.relpages, c.reltuples, c.relallvisible,
      CASE WHEN c.relname IN ('queue_migrations', 'queue_migrations_pkey') THEN NULL
        ELSE pg_relation_size(c.oid) END,
      (SELECT count(*) FROM pg_statistic s WHERE s.starelid = c.oid))
    FROM rel c
  UNION ALL
  SELECT format('column %s.%s %s type=%s notnull=%s dropped=%s identity=%s generated=%s '
      'default=%s stattarget=%s storage=%s collation=%s acl=%s options=%s', c.relname, a.attnum,
      a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull, a.attisdropped,
      a.attidentity, a.attgenerated, pg_get_expr(d.adbin, d.adrelid), a.attstattarget,
      a.attstorage, a.attcollation, a.attacl, a.attoptions)
    FROM rel c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0
    LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
  UNION ALL
  SELECT format('index %s valid=%s ready=%s live=%s clustered=%s replica=%s',
      pg_get_indexdef(i.indexrelid), i.indisvalid, i.indisready, i.indislive, i.indisclustered,
      i.indisreplident)
    FROM idx i
  UNION ALL
  SELECT format('constraint %s on %s: %s validated=%s deferrable=%s/%s', co.conname,
      c.relname, pg_get_constraintdef(co.oid), co.convalidated, co.condeferrable, co.condeferred)
    FROM tab c JOIN pg_constraint co ON co.conrelid = c.oid
  UNION ALL
  SELECT format('trigger %s enabled=%s', pg_get_triggerdef(t.oid), t.tgenabled)
    FROM tab c JOIN pg_trigger t ON t.tgrelid = c.oid WHERE NOT t.tgisinternal
  UNION ALL
  SELECT format('routine %s(%s) returns %s kind=%s language=%s volatility=%s strict=%s '
      'security=%s config=%s acl=%s owner=%s body=%s', p.proname,
      pg_get_function_identity_arguments(p.oid), pg_get_function_result(p.oid), p.prokind,
      l.lanname, p.provolatile, p.proisstrict, p.prosecdef, p.proconfig, p.proacl,
      pg_get_userbyid(p.proowner), p.prosrc)
    FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
   WHERE p.oid IN (SELECT objid FROM top WHERE classid = 'pg_proc'::regclass)
  UNION ALL
  SELECT format('type %s kind=%s', t.typname, t.typtype)
    FROM pg_type t WHERE t.oid IN (SELECT objid FROM top WHERE classid = 'pg_type'::regclass)
  UNION ALL
  SELECT format('rule %s', pg_get_ruledef(r.oid)) FROM tab c JOIN pg_rewrite r ON r.ev_class = c.oid
  UNION ALL
  SELECT format('policy %s on %s: %s %s using %s check %s', p.polname, c.relname, p.polcmd,
      p.polpermissive, pg_get_expr(p.polqual, p.polrelid), pg_get_expr(p.polwithcheck, p.polrelid))
    FROM tab c JOIN pg_policy p ON p.polrelid = c.oid
  UNION ALL
  SELECT format('sequence %s type=%s start=%s increment=%s min=%s max=%s cache=%s cycle=%s '
      'used=%s', c.relname, format_type(s.seqtypid, NULL), s.seqstart, s.seqincrement, s.seqmin,
      s.seqmax, s.seqcache, s.seqcycle,
      CASE WHEN c.relkind = 'S' THEN pg_sequence_last_value(c.oid) IS NOT NULL END)
    FROM tab c JOIN pg_sequence s ON s.seqrelid = c.oid
  UNION ALL
  SELECT format('depending on the schema: %s of %s', count(*), classid::regclass)
    FROM top GROUP BY classid
  UNION ALL
  SELECT format('step %s kind=%s', version, kind) FROM queue_migrations
  UNION ALL
  SELECT format('locks held by other connections: %s', count(*))
    FROM pg_locks l JOIN rel c ON c.oid = l.relation
   WHERE l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
     AND l.pid IS DISTINCT FROM pg_backend_pid()
)
SELECT string_agg(replace(line, $1, '<schema>'), E'\\n' ORDER BY line) AS print FROM lines`;
