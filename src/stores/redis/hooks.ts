/**
 * The places where one area's script hands over to the rules of another
 * (keys and locks, chains and batches, flows, job control, stats, logs, durable
 * steps): one Lua
 * table `H` of functions, each area's part defined in its own module and
 * joined here, so a script calls one name per rule whatever area holds it.
 *
 * Transactions: a write inside `transaction()` records what it wrote
 * (`staged(kind .. ':' .. id)`); when the transaction ends, the commit
 * script calls `H.commit_<kind>(id)` and the rollback script
 * `H.undo_<kind>(id)` for each record (jobs, kind `job`, are handled by
 * the store itself).
 *
 * Each hook runs inside the claim or settle script, after the prelude;
 * times in `s` (a settlement of the input) are on the caller's clock
 * (`at()` moves them onto the store's), `job` is the job row as it was
 * before the settle changed it (fields as the SQL columns, strings).
 *
 * @internal
 * @module
 */
import { CHAIN_BATCH_HOOKS } from "./chain_batch_hooks.ts";
import { FLOW_HOOKS } from "./flow_hooks.ts";
import { JOB_CONTROL_HOOKS } from "./job_control_hooks.ts";
import { KEY_HOOKS } from "./key_hooks.ts";
import { LOG_HOOKS } from "./log_hooks.ts";
import { METRICS_HOOK } from "./metrics_rollup.ts";
import { STEP_HOOKS } from "./step_hooks.ts";

/** The hooks' table (`local H`), each hook defined by the area that owns its rule. */
export const AREA_HOOKS: string = [
  "local H = {}",
  JOB_CONTROL_HOOKS,
  KEY_HOOKS,
  CHAIN_BATCH_HOOKS,
  FLOW_HOOKS,
  METRICS_HOOK,
  LOG_HOOKS,
  STEP_HOOKS,
].join("\n");
