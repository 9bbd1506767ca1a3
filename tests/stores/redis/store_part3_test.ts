/**
 * Part 3 of the store contract against Redis (`AREA_PARTS[2]`;
 * store_test.ts has the first): a file of its own so that
 * `deno test --parallel` runs it beside the others.
 *
 * @module
 */
import { redisContract } from "./_contract.ts";

redisContract(2);
