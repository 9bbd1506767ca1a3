/**
 * How many params a prepared statement takes by position, read from
 * SQLite itself: `node:sqlite` has no `sqlite3_bind_parameter_count()`,
 * and leaves a placeholder it got no value for NULL, without a word. Its
 * `iterate()` binds the values it is given and steps nothing until read,
 * and SQLite refuses a value past the last placeholder (`SQLITE_RANGE`), so
 * the count is the most values a statement binds.
 *
 * @internal
 * @module
 */
import type { StatementSync } from "node:sqlite";
import { shown } from "../../shown.ts";

/** SQLite's result code for a value bound past the statement's last placeholder. */
const SQLITE_RANGE = 25;

/** How many texts' counts a {@linkcode ParamCounts} keeps before it starts again. */
const KEPT_COUNTS = 512;

/**
 * The param counts of the app's statement texts, each read from SQLite
 * once (a few probes of a statement) and then known by its text.
 */
export class ParamCounts {
  readonly #known = new Map<string, number>();

  /**
   * Throws a `TypeError` naming both counts when `statement`, a text of the
   * app's `tx.query`, takes another number of params than `given`.
   */
  assert(statement: StatementSync, given: number): void {
    const text = statement.sourceSQL;
    let takes = this.#known.get(text);
    if (takes === undefined) {
      takes = positionalParams(statement);
      if (this.#known.size >= KEPT_COUNTS) this.#known.clear();
      this.#known.set(text, takes);
    }
    if (takes === given) return;
    throw new TypeError(
      `tx.query: the statement takes ${takes} ${takes === 1 ? "param" : "params"} ` +
        `(one for each ?, or up to the highest ?NNN): got ${given} in ${shown(text)}`,
    );
  }
}

/** How many values `statement` takes by position. */
function positionalParams(statement: StatementSync): number {
  let taken = 0; // every statement binds none
  let refused = 1;
  while (binds(statement, refused)) {
    taken = refused;
    refused *= 2;
  }
  while (refused - taken > 1) {
    const middle = Math.floor((taken + refused) / 2);
    if (binds(statement, middle)) taken = middle;
    else refused = middle;
  }
  return taken;
}

/** Whether `statement` takes `count` values by position: binds that many NULLs, running nothing. */
function binds(statement: StatementSync, count: number): boolean {
  try {
    statement.iterate(...new Array<null>(count).fill(null));
    return true;
  } catch (error) {
    if ((error as { errcode?: unknown } | null)?.errcode === SQLITE_RANGE) return false;
    throw error;
  }
}
