/**
 * A full disk: every write either stores what it says or rejects with
 * SQLite's "database or disk is full", on a real 2 MB tmpfs filled by a
 * filler file. `node:sqlite`'s `get()` on an autocommit write swallows the
 * commit's error; a dispatch read that way returned an id and stored nothing.
 *
 * Needs root (it mounts a tmpfs); elsewhere it says why it skips.
 *
 * @module
 */
import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { join } from "node:path";
import { z } from "zod";
import { defineJob, Queue } from "../../mod.ts";

const big = defineJob({ name: "big", schema: z.object({ text: z.string() }), handle() {} });
const PAYLOAD = { text: "x".repeat(100_000) };

/** Why a tmpfs cannot be mounted here, or null when it can. */
function mountRefusal(): string | null {
  if (Deno.build.os !== "linux") return "tmpfs mounts need Linux";
  const dir = Deno.makeTempDirSync({ prefix: "renox-queue-probe-" });
  try {
    const mount = new Deno.Command("mount", {
      args: ["-t", "tmpfs", "-o", "size=64k", "tmpfs", dir],
    })
      .outputSync();
    if (!mount.success) {
      return `mount -t tmpfs failed: ${new TextDecoder().decode(mount.stderr).trim()}`;
    }
    new Deno.Command("umount", { args: [dir] }).outputSync();
    return null;
  } catch (error) {
    return `cannot run mount: ${(error as Error).message}`;
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
}

const refusal = mountRefusal();
if (refusal !== null) console.log(`full_disk_test skipped: ${refusal}`);

/** A 2 MB tmpfs with a queue database in it, unmounted on dispose. */
async function fullDisk(): Promise<
  { dbPath: string; fill(): Promise<void>; free(): Promise<void> } & AsyncDisposable
> {
  const dir = await Deno.makeTempDir({ prefix: "renox-queue-full-" });
  const mounted = await new Deno.Command("mount", {
    args: ["-t", "tmpfs", "-o", "size=2m", "tmpfs", dir],
  }).output();
  assert.ok(mounted.success, "mount the tmpfs");
  const filler = join(dir, "filler");
  return {
    dbPath: join(dir, "queue.db"),
    /** Writes the filler file until the file system has no room left. */
    async fill() {
      using file = await Deno.open(filler, { create: true, append: true });
      const chunk = new Uint8Array(16 * 1024);
      for (;;) {
        try {
          await file.write(chunk);
        } catch {
          break;
        }
      }
    },
    async free() {
      await Deno.remove(filler).catch(() => {});
    },
    async [Symbol.asyncDispose]() {
      await new Deno.Command("umount", { args: ["-l", dir] }).output();
      await Deno.remove(dir, { recursive: true });
    },
  };
}

/** Job ids stored in the database file, read with a connection of its own. */
function storedIds(dbPath: string): Set<number> {
  const db = new DatabaseSync(dbPath);
  try {
    return new Set(db.prepare("SELECT id FROM jobs").all().map((row) => Number(row.id)));
  } finally {
    db.close();
  }
}

Deno.test({
  name:
    "On a full disk, dispatch(), dispatchMany(), transaction(), chains, batches and the admin writes do what they return or reject saying the disk is full",
  ignore: refusal !== null,
  async fn() {
    await using disk = await fullDisk();
    const queue = await Queue.open({ path: disk.dbPath, jobs: [big] });
    const returned: number[] = [];
    const errors: string[] = [];
    const attempt = async (write: () => Promise<number | number[]>) => {
      try {
        const ids = await write();
        returned.push(...(Array.isArray(ids) ? ids : [ids]));
      } catch (error) {
        errors.push((error as Error).message);
      }
    };
    try {
      await disk.fill();
      for (let n = 0; n < 60; n++) await attempt(() => queue.dispatch(big, PAYLOAD));
      for (let n = 0; n < 5; n++) {
        await attempt(() => queue.dispatchMany(big, [PAYLOAD, PAYLOAD, PAYLOAD]));
        await attempt(() => queue.transaction((tx) => tx.dispatch(big, PAYLOAD)));
        await attempt(() => queue.chain().then(big, PAYLOAD).then(big, PAYLOAD).dispatch());
        await attempt(async () => {
          await queue.batch("full").push(big, PAYLOAD).push(big, PAYLOAD).dispatch();
          return [];
        });
      }
      // The admin writes: each does what it says or rejects saying the disk is full.
      const admin: [string, () => Promise<unknown>][] = [
        ["retryAll", () => queue.retryAll()],
        ["retry", () => queue.retry(1)],
        ["forget", () => queue.forget(1)],
        ["flushFailed", () => queue.flushFailed()],
        ["pruneFailed", () => queue.pruneFailed({ olderThanMs: 0 })],
        ["pruneBatches", () => queue.pruneBatches({ olderThanMs: 0 })],
        ["cancelBatch", () => queue.cancelBatch(1)],
        ["clear", () => queue.clear()],
      ];
      for (const [name, write] of admin) {
        await write().catch((error: Error) => errors.push(`${name}: ${error.message}`));
      }
    } finally {
      await queue.close();
    }
    await disk.free();
    const stored = storedIds(disk.dbPath);
    const lost = returned.filter((id) => !stored.has(id));
    console.log(
      `full disk: ${returned.length} ids returned, ${errors.length} writes rejected, ${lost.length} returned ids not stored`,
    );
    assert.deepEqual(lost, [], "every id a write returned is stored");
    assert.equal(new Set(returned).size, returned.length, "no id is returned twice");
    assert.ok(errors.length > 0, "the full disk refused some writes");
    for (const message of errors) assert.match(message, /full/i, message);
  },
});
