/**
 * The app's own SQL in `tx.query`, read the way its engine reads it, so
 * that what is checked is what runs: the one statement a text may hold, and
 * its first words. A statement that would end the transaction
 * `queue.transaction()` owns, or change the connection for what runs on it
 * after that transaction, is refused before it reaches the engine.
 *
 * The readings follow each engine's tokenizer where they differ:
 * PostgreSQL (`scan.l`) nests block comments, ends a `--` comment at `\n`
 * or `\r`, and quotes strings with `$tag$ … $tag$` and `E'…'` (backslash
 * escapes); SQLite (`tokenize.c`) ends a block comment at the first `*\/`,
 * a `--` comment at `\n` only, and also quotes identifiers with `[…]` and
 * `` `…` ``. Both take `'…'` strings and `"…"` identifiers, a doubled quote
 * standing for itself, and run to the end of the text from an unterminated
 * quote or comment. On both, a `;` inside parentheses or inside the body of
 * a trigger or a `BEGIN ATOMIC` routine does not end the statement.
 *
 * @internal
 * @module
 */
import { shown } from "../../shown.ts";
import type { EngineName } from "./statement.ts";

/** Where one engine's reading of SQL text differs from the other's. */
interface Reading {
  /** Whether a block comment holds nested ones, each closed by its own `*\/`. */
  readonly nestedComments: boolean;
  /** The characters that end a `--` comment. */
  readonly lineEnds: string;
  /** Whether `$tag$ … $tag$` quotes a string and `E'…'` escapes with backslashes. */
  readonly dollarAndEscapeStrings: boolean;
  /** The quotes that open an identifier besides `"`, each with its closing one. */
  readonly identifierQuotes: Readonly<Record<string, string>>;
}

const READINGS: Readonly<Record<EngineName, Reading>> = {
  postgres: {
    nestedComments: true,
    lineEnds: "\n\r",
    dollarAndEscapeStrings: true,
    identifierQuotes: {},
  },
  sqlite: {
    nestedComments: false,
    lineEnds: "\n",
    dollarAndEscapeStrings: false,
    identifierQuotes: { "[": "]", "`": "`" },
  },
};

/**
 * Blanks between tokens: every JavaScript white space and the BOM. The
 * engines take fewer (a no-break space is part of a word to both), so a
 * text this reads apart is one they refuse as a syntax error.
 */
const BLANK = /[\s\uFEFF]/;
/** A character of a word (a keyword, a name, a number): `$` and every non-ASCII one included, as both engines have it. */
const WORD = /[A-Za-z0-9_$\u0080-\uFFFF]/;
/** The tag of a PostgreSQL dollar quote, after its first `$`: empty, or a name that starts with no digit or `$`. */
const DOLLAR_TAG = /(?:[A-Za-z_\u0080-\uFFFF][A-Za-z0-9_\u0080-\uFFFF]*)?\$/y;

/**
 * The statements `text` holds as `engine` reads it, each as its leading
 * words (upper case) up to its first token that is no word: `SET LOCAL x`
 * gives `["SET", "LOCAL", "X"]`. Empty statements (`;;`) are left out.
 */
export function readStatements(engine: EngineName, text: string): string[][] {
  const reading = READINGS[engine];
  const statements: string[][] = [];
  let statement = new OpenStatement();
  let i = 0;
  /** Where the last word ended, and whether it was `E` (which makes a `'` right after it open an escape string). */
  let wordEnd = -1;
  let wordIsE = false;
  const other = (end: number) => {
    statement.other(text[i]!);
    i = end;
  };
  while (i < text.length) {
    const char = text[i]!;
    const next = text[i + 1];
    if (BLANK.test(char)) {
      i++;
    } else if (char === "-" && next === "-") {
      i = lineCommentEnd(text, i + 2, reading.lineEnds);
    } else if (char === "/" && next === "*") {
      i = blockCommentEnd(text, i + 2, reading.nestedComments);
    } else if (char === ";" && statement.endsAtSemicolon) {
      if (statement.started) statements.push(statement.head);
      statement = new OpenStatement();
      i++;
    } else if (char === "'") {
      const escaped = reading.dollarAndEscapeStrings && wordEnd === i && wordIsE;
      other(quotedEnd(text, i + 1, "'", escaped));
    } else if (char === '"') {
      other(quotedEnd(text, i + 1, '"', false));
    } else if (reading.identifierQuotes[char] !== undefined) {
      other(quotedEnd(text, i + 1, reading.identifierQuotes[char], false));
    } else if (
      char === "$" && reading.dollarAndEscapeStrings && dollarTagAt(text, i + 1) !== null
    ) {
      const tag = "$" + dollarTagAt(text, i + 1) + "$";
      const close = text.indexOf(tag, i + tag.length);
      other(close === -1 ? text.length : close + tag.length);
    } else if (WORD.test(char)) {
      let end = i + 1;
      while (end < text.length && WORD.test(text[end]!) && !BLANK.test(text[end]!)) end++;
      const word = text.slice(i, end).toUpperCase();
      statement.word(word);
      wordEnd = i = end;
      wordIsE = word === "E";
    } else {
      other(i + 1);
    }
  }
  if (statement.started) statements.push(statement.head);
  return statements;
}

/**
 * The first words of a statement whose body holds statements of its own in
 * `BEGIN … END`, each ending with a `;` that does not end it: a SQLite
 * trigger, a PostgreSQL function or procedure of `BEGIN ATOMIC` (the engines'
 * grammars; psql and `sqlite3_complete()` read them so too).
 */
const WITH_BODY = /^CREATE (OR REPLACE )?(TEMP |TEMPORARY )?(FUNCTION|PROCEDURE|TRIGGER) /;

/** The statement being read: its first words, and what keeps a `;` from ending it. */
class OpenStatement {
  /** Its leading words, up to its first token that is no word. */
  readonly head: string[] = [];
  #started = false;
  #headEnded = false;
  /** How deep in parentheses: a `;` there is a syntax error, not an end. */
  #parens = 0;
  /** How deep in a body's `BEGIN … END`, and in a `CASE … END` inside it. */
  #blocks = 0;

  /** Whether it has a token yet. */
  get started(): boolean {
    return this.#started;
  }

  /** Whether a `;` now ends it: outside parentheses and any body. */
  get endsAtSemicolon(): boolean {
    return this.#parens === 0 && this.#blocks === 0;
  }

  /** Reads a word (upper case). */
  word(word: string): void {
    this.#started = true;
    if (!this.#headEnded) this.head.push(word);
    if (this.#parens > 0 || !WITH_BODY.test(`${this.head.slice(0, 5).join(" ")} `)) return;
    if (word === "BEGIN" || (word === "CASE" && this.#blocks > 0)) this.#blocks++;
    else if (word === "END" && this.#blocks > 0) this.#blocks--;
  }

  /** Reads a token that is no word, starting with `char`. */
  other(char: string): void {
    this.#started = true;
    this.#headEnded = true;
    if (char === "(") this.#parens++;
    else if (char === ")" && this.#parens > 0) this.#parens--;
  }
}

/** Where a `--` comment whose text starts at `from` ends (past its line end). */
function lineCommentEnd(text: string, from: number, lineEnds: string): number {
  for (let i = from; i < text.length; i++) if (lineEnds.includes(text[i]!)) return i + 1;
  return text.length;
}

/** Where a block comment whose text starts at `from` ends (past its `*\/`). */
function blockCommentEnd(text: string, from: number, nested: boolean): number {
  let depth = 1;
  let i = from;
  while (i < text.length) {
    if (text.startsWith("*/", i)) {
      depth--;
      i += 2;
      if (depth === 0) return i;
    } else if (nested && text.startsWith("/*", i)) {
      depth++;
      i += 2;
    } else {
      i++;
    }
  }
  return text.length;
}

/** Where a quoted string or name whose text starts at `from` ends (past its closing quote). */
function quotedEnd(text: string, from: number, close: string, backslashEscapes: boolean): number {
  let i = from;
  while (i < text.length) {
    const char = text[i]!;
    if (backslashEscapes && char === "\\") {
      i += 2;
    } else if (char !== close) {
      i++;
    } else if (close !== "]" && text[i + 1] === close) {
      i += 2;
    } else {
      return i + 1;
    }
  }
  return text.length;
}

/** The tag of the dollar quote whose first `$` is just before `from`, or null when none opens there. */
function dollarTagAt(text: string, from: number): string | null {
  DOLLAR_TAG.lastIndex = from;
  const match = DOLLAR_TAG.exec(text);
  return match === null ? null : match[0].slice(0, -1);
}

/**
 * The first words of statements that would end, nest or reconfigure the
 * transaction `transaction()` owns (a `COMMIT` would commit the dispatches
 * of a callback that then throws).
 */
const TRANSACTION_CONTROL = new Set([
  "BEGIN",
  "START",
  "COMMIT",
  "END",
  "ROLLBACK",
  "ABORT",
  "SAVEPOINT",
  "RELEASE",
  "VACUUM",
]);

/**
 * The first words of statements that change the connection for what runs
 * on it after the transaction: the queue's own statements share it (a
 * `SET search_path` that commits sends them to another schema).
 * PostgreSQL's `SET LOCAL` and `SET CONSTRAINTS` end with the transaction.
 */
const CONNECTION_SETTINGS = new Set(["PRAGMA", "SET", "RESET", "DISCARD"]);

/** Why a statement of these first words is refused, or null when it may run. */
function refusal([first = "", second = ""]: readonly string[]): string | null {
  if (
    TRANSACTION_CONTROL.has(first) ||
    (first === "SET" && second === "TRANSACTION") ||
    (first === "PREPARE" && second === "TRANSACTION")
  ) {
    return "the transaction belongs to queue.transaction(), which commits when the callback returns and rolls back when it throws";
  }
  if (
    CONNECTION_SETTINGS.has(first) && !(first === "SET" && /^(LOCAL|CONSTRAINTS)$/.test(second))
  ) {
    return "it changes the connection beyond this transaction, and the queue's own statements run on it afterwards; for this transaction only, use SET LOCAL (PostgreSQL)";
  }
  return null;
}

/**
 * Throws a `TypeError` when the app's text for `tx.query` is no string or
 * its params no array, when the text, as `engine` reads it, holds no
 * statement (SQLite would fail with "not an error") or more than one
 * (SQLite would run the first only), or when its statement is transaction
 * control or changes the connection.
 */
export function assertAppStatement(engine: EngineName, text: unknown, params: unknown): void {
  if (typeof text !== "string") {
    throw new TypeError(`tx.query: the statement must be a string: got ${shown(text)}`);
  }
  if (!Array.isArray(params)) {
    throw new TypeError(`tx.query: params must be an array: got ${shown(params)}`);
  }
  const statements = readStatements(engine, text);
  if (statements.length === 0) {
    throw new TypeError(`tx.query: the text holds no statement: got ${shown(text)}`);
  }
  if (statements.length > 1) {
    throw new TypeError(
      `tx.query runs one statement: the text holds ${statements.length}; call tx.query once for each`,
    );
  }
  const words = statements[0] ?? [];
  const reason = refusal(words);
  if (reason !== null) throw new TypeError(`Cannot run ${words[0]} in tx.query: ${reason}`);
}
