/**
 * The store contracts against Redis: the first part of the contract here,
 * the others in store_part2_test.ts and store_part3_test.ts (one file per
 * part, so that `deno test --parallel` runs them side by side). Runs when
 * `QUEUE_TEST_REDIS_URL` is set (`.ci/run` sets it); otherwise says why it
 * skips.
 *
 * @module
 */
import { redisContract } from "./_contract.ts";

redisContract(0);
