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
import type { FlowParentsRow } from "../stores/store.ts";

/** The parents' outputs and errors for a handler's context; empty outside flows. */
export async function openParents(
  stored: string | null,
  cipher: PayloadCipher | null,
): Promise<Pick<JobContext, "parents" | "parentErrors">> {
  if (stored === null) return { parents: {}, parentErrors: {} };
  const row = JSON.parse(stored) as FlowParentsRow;
  const parents: Record<string, unknown> = {};
  for (const [key, { name, output }] of Object.entries(row.outputs)) {
    parents[key] = output === null ? null : await decodeOutput(name, output, cipher);
  }
  return { parents, parentErrors: { ...row.errors } };
}
