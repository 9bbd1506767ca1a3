/**
 * Part 2 of the store contract against SQLite (`AREA_PARTS[1]`;
 * store_test.ts has the first): a file of its own so that
 * `deno test --parallel` runs it beside the others.
 *
 * @module
 */
import { sqliteContract } from "./_contract.ts";

sqliteContract(1);
