/**
 * A flow node's `ctx.parents` and `ctx.parentErrors`, opened from what its
 * job carries: each parent's stored output decoded (decrypted with the
 * parent's job name when it is sealed).
 *
 * @internal
 * @module
 */
import type { PayloadCipher } from "../encryption.ts";
import type { JobContext } from "../job.ts";
import { decodeOutput } from "../output.ts";
import type { JobRegistry } from "../registry.ts";
import type { FlowParentsRow } from "../stores/store.ts";

/** What a handler outside flows sees: no parents, shared and frozen. */
export const NO_PARENTS: Pick<JobContext, "parents" | "parentErrors"> = Object.freeze({
  parents: Object.freeze({}),
  parentErrors: Object.freeze({}),
});

/** The parents' outputs and errors a flow node's job carries, for its handler's context. */
export async function openParents(
  stored: string,
  cipher: PayloadCipher | null,
  registry: Pick<JobRegistry, "get">,
): Promise<Pick<JobContext, "parents" | "parentErrors">> {
  const row = JSON.parse(stored) as FlowParentsRow;
  const parents: Record<string, unknown> = {};
  for (const [key, { name, output }] of Object.entries(row.outputs)) {
    // A parent this process does not define is judged by nothing (as result() judges it).
    const job = { name, encrypted: registry.get(name)?.encrypted ?? false };
    parents[key] = output === null ? null : await decodeOutput(job, output, cipher);
  }
  return { parents, parentErrors: { ...row.errors } };
}
