/**
 * Part 3 of the store contract against PostgreSQL (`AREA_PARTS[2]`;
 * store_test.ts has the first): a file of its own so that
 * `deno test --parallel` runs it beside the others.
 *
 * @module
 */
import { postgresContract } from "./_contract.ts";

postgresContract(2);
