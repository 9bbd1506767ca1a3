/**
 * The postgres.js pools of a PostgreSQL store: the shared pool every script
 * and transaction runs on but unflushed statements, and the one connection of unflushed statements
 * (see {@linkcode PoolKind}). Each connection searches the queue's schema
 * and reads bigint columns as JavaScript numbers.
 *
 * @internal
 * @module
 */
import { LONGEST_TIMER_MS } from "../../clock.ts";
// A full specifier: an app importing this module from another folder resolves bare names with
// its own import map, which need not list this dependency.
// deno-lint-ignore no-import-prefix
import postgres from "npm:postgres@^3.4.9";
import { teachArrayTypes, type TypeOptions } from "./array_types.ts";
import { redactPassword } from "../database_url.ts";
import type { PoolKind, Sql } from "./engine.ts";

/** Where and how the pools connect. */
export interface PoolSettings {
  /** The server's URL, without the `schema` parameter. */
  readonly server: string;
  /** The schema the queue's tables live in (first on each connection's search path). */
  readonly schema: string;
  /** Connections of the shared pool. */
  readonly maxConnections: number;
  /** How long a new connection may take, in ms (the driver counts whole seconds). */
  readonly connectTimeoutMs: number;
}

/**
 * Opens the store's pool of `kind`: the shared pool of `maxConnections`, or
 * one connection whose session has `synchronous_commit` off.
 */
export function openPool(settings: PoolSettings, kind: PoolKind): Sql {
  let sql;
  try {
    sql = newPool(settings, kind);
  } catch (error) {
    if (error instanceof Deno.errors.NotCapable) throw envPermissionError(settings.server, error);
    throw error;
  }
  teachArrayTypes(sql.options as unknown as TypeOptions);
  return sql as unknown as Sql;
}

function newPool(settings: PoolSettings, kind: PoolKind) {
  return postgres(settings.server, {
    max: kind === "shared" ? settings.maxConnections : 1,
    // Whole seconds, which the driver times in ms again: rounded up, no longer than a timer takes.
    connect_timeout: Math.min(
      Math.ceil(settings.connectTimeoutMs / 1000),
      Math.floor(LONGEST_TIMER_MS / 1000),
    ),
    // No wait before a new connection: the driver's default backoff (up to 20 s, growing
    // with each failed connection of the outage) would hold a call past connectTimeoutMs
    // and the first calls after the server is back. Callers pace their own tries (workers
    // every 250 ms), and the driver connects only for a call that waits.
    backoff: () => 0,
    // No pg_type query of the driver's own on each new connection: it awaits it nowhere, so a
    // connection lost during it would end the process (see ./array_types.ts).
    fetch_types: false,
    onnotice: () => {},
    connection: {
      search_path: settings.schema,
      application_name: "@renox/queue",
      ...(kind === "unflushed" && { synchronous_commit: "off" }),
    },
    // Ids, tokens and times are bigint columns that fit a JavaScript number exactly.
    types: {
      bigint: { to: 20, from: [20], serialize: String, parse: safeInteger },
    },
  });
}

/**
 * The error for a process that may not read the environment variables the
 * driver reads. postgres.js reads libpq's `PG*` variables (`PGPASSWORD`,
 * `PGSSL`, `PGAPPNAME`, …) for every setting the URL and the options leave
 * out, some always, and the OS user's name when the URL names no user;
 * passing them all as options would drop the variables that deployments
 * set (`PGPASSWORD` beside a URL without one), so the grant is named instead.
 */
function envPermissionError(server: string, cause: Error): Error {
  const user = URL.parse(server)?.username ?? "";
  const variables = user === "" ? "PG*,USER,USERNAME,LOGNAME" : "PG*";
  return new Deno.errors.NotCapable(
    `Cannot open the PostgreSQL store at ${
      redactPassword(server)
    }: its driver (postgres.js) reads PostgreSQL's PG* environment variables (PGPASSWORD, PGSSL, PGAPPNAME, …) for what the URL leaves out${
      user === "" ? ", and the user's name when the URL names no user" : ""
    }; run with --allow-env=${variables} beside the app's own variables (e.g. --allow-env=QUEUE_DB,QUEUE_WORKERS,DATABASE_URL,${variables}), or with --allow-env: ${cause.message}`,
    { cause },
  );
}

/** An int8 column's text as a number, refusing one a JavaScript number cannot hold exactly. */
function safeInteger(text: string): number {
  const value = Number(text);
  if (!Number.isSafeInteger(value)) {
    throw new RangeError(
      `A bigint value ${text} is beyond JavaScript's safe integers: cast it to text in the query`,
    );
  }
  return value;
}
