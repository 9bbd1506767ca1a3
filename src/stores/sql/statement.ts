/**
 * One statement text for every engine. Statements are written once with
 * PostgreSQL's `$n` placeholders; SQLite's text binds `?n` instead, and the
 * few spots where the engines' SQL really differs are written as a macro in
 * double braces, expanded for each engine when the module loads:
 *
 * - `{{ids $n}}`: the ids in parameter `n`, an array of numbers (bound as
 *   JSON), as a subquery of one column (`job_id IN {{ids $1}}`).
 * - `{{texts $n}}`: the strings in parameter `n`, an array (bound as JSON),
 *   as a subquery of one column (`name IN {{texts $1}}`).
 * - `{{pairs $n}}`: the `[id, token]` pairs in parameter `n`, an array
 *   (bound as JSON), as a table of columns `id` and `token`.
 * - `{{rows $n name type, …}}`: the rows in parameter `n`, an array of
 *   arrays (bound as JSON), as a table of the named columns, one per
 *   position; `type` is `int` (a whole number) or `text`.
 * - `{{records $n table col, …}}`: the objects in parameter `n`, an array
 *   of rows by column name (bound as JSON), as a table of the named columns
 *   of `table`, each typed as the table has it (PostgreSQL reads them with
 *   the table's row type; SQLite keeps each JSON value's type).
 * - `{{now $n}}`: the time in ms since the epoch: parameter `n`, or on
 *   PostgreSQL the database's clock when it is null (see `clockParam`).
 *   Compare an indexed column with `(SELECT {{now $n}})`: PostgreSQL then
 *   reads the clock once and seeks the index, where a bare comparison with
 *   the (volatile) clock scans the table.
 * - `{{forUpdate}}` / `{{forUpdate t}}`: a row lock on the rows read
 *   (`FOR UPDATE [OF t]`) on PostgreSQL; nothing on SQLite, whose one
 *   writer already serializes every write transaction.
 * - `{{skipLocked}}`: the same lock, skipping the rows another transaction
 *   holds (`FOR UPDATE SKIP LOCKED`); nothing on SQLite.
 * - `{{newJobId}}`: the id of a job inserted without one of its own, as the
 *   value of `jobs.id`: on SQLite one more than the highest of the table's
 *   ids and its floor (schema step 24), on PostgreSQL the next value of the
 *   column's identity sequence. In an `INSERT … SELECT` of several rows,
 *   `{{newJobId ORDER BY …}}` numbers them in that order.
 * - `{{newGroupId}}`: the id of a group listed in `job_groups` (schema step
 *   25), in an `INSERT … SELECT`: on SQLite one more than the highest of the
 *   table's ids and its floor (schema step 27: the id of a group dropped is
 *   never handed out again), each row of the select one more than the one
 *   before; on PostgreSQL the next value of the column's identity sequence.
 *
 * On PostgreSQL, `ids`, `texts`, `pairs` and `rows` unnest an array built
 * from the JSON ({@linkcode fewRows}): the planner then expects a few rows
 * and seeks each in the table's index, where the JSON function's 100
 * expected rows made it scan the whole table (`jobs` below some 15,000
 * rows) on every settle and confirmation.
 *
 * @internal
 * @module
 */

/** The engines a statement is translated for. */
export type EngineName = "sqlite" | "postgres";

/** A statement, translated once for each engine. */
export interface Statement {
  /** The text PostgreSQL runs (`$n` placeholders). */
  readonly postgres: string;
  /** The text SQLite runs (`?n` placeholders). */
  readonly sqlite: string;
  /** Whether it returns rows (a read, or a write with `RETURNING`), so engines read them. */
  readonly returnsRows: boolean;
  /** Whether it only reads (a `SELECT`, or a `WITH` … `SELECT` that writes nothing). */
  readonly readsOnly: boolean;
  /** Whether it returns one row at most (an engine may then read it the cheaper way). */
  readonly oneRow: boolean;
}

/** What the text alone does not say about a statement. */
export interface StatementOptions {
  /**
   * It returns one row at most (it matches by a unique key, or has `LIMIT 1`).
   * @default {false}
   */
  readonly oneRow?: boolean;
}

/** PostgreSQL's clock in ms since the epoch, as SQL: the time `{{now $n}}` reads when given null. */
export const POSTGRES_NOW = "(floor(extract(epoch from clock_timestamp()) * 1000))::bigint";

const MACROS: Record<string, Record<EngineName, (argument: string) => string>> = {
  ids: {
    sqlite: (n) => `(SELECT value FROM json_each(?${n}))`,
    postgres: (n) =>
      `(SELECT value::bigint FROM ${fewRows(`jsonb_array_elements_text($${n}::jsonb)`)})`,
  },
  texts: {
    sqlite: (n) => `(SELECT value FROM json_each(?${n}))`,
    postgres: (n) => `(SELECT value FROM ${fewRows(`jsonb_array_elements_text($${n}::jsonb)`)})`,
  },
  pairs: {
    // Arrays of arrays are read as JSONB: each element's fields are then read without parsing
    // its text again, once per field (about 40 % of the settle's copy of 50 successes).
    sqlite: (n) => `(SELECT value->>0 AS id, value->>1 AS token FROM jsonb_each(jsonb(?${n})))`,
    postgres: (n) =>
      `(SELECT (value->>0)::bigint AS id, (value->>1)::bigint AS token
        FROM ${fewRows(`jsonb_array_elements($${n}::jsonb)`)})`,
  },
  rows: {
    sqlite: (argument) => jsonTable(argument, "jsonb_each", (index) => `value->>${index}`),
    postgres: (argument) =>
      jsonTable(
        argument,
        "jsonb_array_elements",
        (index, type) => type === "int" ? `(value->>${index})::bigint` : `(value->>${index})`,
      ),
  },
  records: {
    sqlite: (argument) => {
      const { n, columns } = recordsArgument(argument);
      return `(SELECT ${
        columns.map((column) => `value->>'${column}' AS ${column}`).join(", ")
      } FROM jsonb_each(jsonb(?${n})))`;
    },
    postgres: (argument) => {
      const { n, table, columns } = recordsArgument(argument);
      return `(SELECT ${
        columns.join(", ")
      } FROM json_populate_recordset(NULL::${table}, $${n}::json))`;
    },
  },
  now: {
    sqlite: (n) => `?${n}`,
    postgres: (n) => `COALESCE($${n}::bigint, ${POSTGRES_NOW})`,
  },
  skipLocked: {
    sqlite: () => "",
    postgres: () => "FOR UPDATE SKIP LOCKED",
  },
  forUpdate: {
    sqlite: () => "",
    postgres: (table) => table === "" ? "FOR UPDATE" : `FOR UPDATE OF ${table}`,
  },
  newJobId: {
    sqlite: (order) =>
      `((SELECT max(ifnull(max(id), 0), (SELECT floor FROM job_id_floor)) FROM jobs) + ${
        order === "" ? "1" : `row_number() OVER (${order})`
      })`,
    postgres: () => "nextval(pg_get_serial_sequence('jobs', 'id'))",
  },
  newGroupId: {
    sqlite: () =>
      `((SELECT max(ifnull(max(id), 0), (SELECT floor FROM group_id_floor)) FROM job_groups)
        + row_number() OVER ())`,
    postgres: () => "nextval(pg_get_serial_sequence('job_groups', 'id'))",
  },
};

/**
 * The elements a PostgreSQL set-returning function `call` makes, as a table
 * of one column `value` that the planner expects to be small: the elements
 * are gathered into an array once (an init plan), and `unnest` of an array
 * it cannot see is expected to give 10 rows, where a JSON function is
 * expected to give 100 whatever its argument.
 */
function fewRows(call: string): string {
  return `unnest(ARRAY(SELECT ${call})) AS value`;
}

/**
 * The `{{rows}}` macro's table: `argument` is the parameter's number, then
 * the columns as `name type` separated by commas; `column` reads position
 * `index` of a row (`value`) as `type`.
 */
function jsonTable(
  argument: string,
  elements: "jsonb_each" | "jsonb_array_elements",
  column: (index: number, type: "int" | "text") => string,
): string {
  const match = /^(\d+)\s+(.+)$/s.exec(argument);
  if (match === null) throw new Error(`{{rows}} needs a parameter and columns: got ${argument}`);
  const columns = match[2]!.split(",").map((spec, index) => {
    const [name, type, ...rest] = spec.trim().split(/\s+/);
    if (name === undefined || (type !== "int" && type !== "text") || rest.length > 0) {
      throw new Error(`{{rows}} column must be "name int" or "name text": got ${spec.trim()}`);
    }
    return `${column(index, type)} AS ${name}`;
  });
  const source = elements === "jsonb_each"
    ? `jsonb_each(jsonb(?${match[1]}))`
    : fewRows(`jsonb_array_elements($${match[1]}::jsonb)`);
  return `(SELECT ${columns.join(", ")} FROM ${source})`;
}

/** The `{{records}}` macro's argument: the parameter's number, the table, then its columns. */
function recordsArgument(argument: string): { n: string; table: string; columns: string[] } {
  const match = /^(\d+)\s+(\w+)\s+(.+)$/s.exec(argument);
  const columns = match?.[3]?.split(",").map((column) => column.trim()) ?? [];
  if (match === null || columns.some((column) => !/^\w+$/.test(column))) {
    throw new Error(`{{records}} needs a parameter, a table and its columns: got ${argument}`);
  }
  return { n: match[1]!, table: match[2]!, columns };
}

/**
 * Translates `text` for every engine. Placeholders inside quoted literals
 * (a JSON path such as `'$[0]'`) are left as they are.
 */
export function statement(text: string, options: StatementOptions = {}): Statement {
  return {
    postgres: expand(text, "postgres"),
    sqlite: sqliteText(text),
    returnsRows: /^\s*(SELECT|WITH)\b/i.test(text) || /\bRETURNING\b/i.test(text),
    readsOnly: /^\s*SELECT\b/i.test(text) ||
      (/^\s*WITH\b/i.test(text) && !/\b(INSERT|UPDATE|DELETE)\b/i.test(text)),
    oneRow: options.oneRow ?? false,
  };
}

/**
 * SQLite's text of `text`: its `$n` placeholders as `?n`, its macros
 * expanded; then, when the `?n` of that text (outside quoted literals) are
 * `?1` to `?N` once each in that order and it holds no comment (which might
 * hide one), each as a bare `?`: the same bindings. `node:sqlite` binds a
 * statement of many numbered parameters far slower than one of as many
 * bare ones: a 32-row insert of 256 parameters took 5.4 µs of CPU per row
 * with `?n`, 1.9 µs with `?`.
 */
function sqliteText(text: string): string {
  const numbered = expand(placeholders(text, "$", (digits) => `?${digits}`), "sqlite");
  let count = 0;
  let inOrder = !/--|\/\*/.test(numbered);
  const bare = placeholders(numbered, "?", (digits) => {
    inOrder &&= Number(digits) === ++count;
    return "?";
  });
  return inOrder ? bare : numbered;
}

/** `text` with each `<mark>n` outside quoted literals replaced by `to(n)`. */
function placeholders(text: string, mark: string, to: (digits: string) => string): string {
  let out = "";
  let quote: string | null = null;
  for (let index = 0; index < text.length; index++) {
    const char = text[index]!;
    if (quote === null && char === mark && /[0-9]/.test(text[index + 1] ?? "")) {
      const digits = /^[0-9]+/.exec(text.slice(index + 1))![0];
      out += to(digits);
      index += digits.length;
      continue;
    }
    if (quote !== null) {
      if (char === quote) quote = null;
    } else if (char === "'" || char === '"') quote = char;
    out += char;
  }
  return out;
}

/** Expands the `{{macro argument}}` spots for `engine`. */
function expand(text: string, engine: EngineName): string {
  return text.replace(/\{\{(\w+)\s*([^}]*)\}\}/g, (_, name: string, argument: string) => {
    const macro = MACROS[name];
    if (macro === undefined) throw new Error(`Unknown statement macro {{${name}}}`);
    return macro[engine](argument.trim().replace(/^[$?]/, ""));
  });
}
