/**
 * The contract of `backup()`: a store either writes a copy of its database,
 * as of one commit, to a new file, or rejects saying where to look
 * (docs/backups.md) and writes nothing; none overwrites a file that exists.
 * Which stores copy (SQLite on a file) and which refuse (SQLite in memory,
 * PostgreSQL, Redis) is held by tests/admin/backup_test.ts.
 *
 * @module
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { SqliteStore } from "../../../src/stores/sqlite/mod.ts";
import type { BackupResult } from "../../../src/stores/store.ts";
import { tempDir } from "../../_helpers.ts";
import { type ContractArea, type ContractTest, newJob, T0 } from "./fixtures.ts";

/** Copying a store's database. */
export const backup: ContractArea = {
  covers: ["backup"],
  register,
};

function register(test: ContractTest): void {
  test("backup() writes a copy as of one commit to a new file, or rejects naming docs/backups.md and writes nothing", async (store) => {
    await using dir = await tempDir();
    const target = join(dir.dir, "copy.db");
    await store.insertJobs([newJob(), newJob()]);
    let result: BackupResult;
    try {
      result = await store.backup(target);
    } catch (error) {
      assert.match((error as Error).message, /docs\/backups\.md/);
      assert.deepEqual([...Deno.readDirSync(dir.dir)], [], "a refused backup wrote a file");
      return;
    }
    await store.insertJobs([newJob()]); // after the copy: not in it
    assert.equal(result.path, target);
    assert.equal(result.bytes, (await Deno.stat(target)).size);
    assert.deepEqual([...Deno.readDirSync(dir.dir)].map((entry) => entry.name), ["copy.db"]);
    await using copy = await SqliteStore.open(target);
    assert.deepEqual(
      (await copy.counts(T0)).map(({ queue, pending }) => ({ queue, pending })),
      [{ queue: "default", pending: 2 }],
    );
  });

  test("backup() never overwrites a file that exists", async (store) => {
    await using dir = await tempDir();
    const target = join(dir.dir, "taken.db");
    await Deno.writeTextFile(target, "not the queue's");
    await store.insertJobs([newJob()]);
    await assert.rejects(store.backup(target));
    assert.equal(await Deno.readTextFile(target), "not the queue's");
    assert.deepEqual([...Deno.readDirSync(dir.dir)].map((entry) => entry.name), ["taken.db"]);
  });
}
