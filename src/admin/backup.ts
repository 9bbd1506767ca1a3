/**
 * `Queue.backup()`: the file checked, then the store asked. The SQLite store
 * copies its file; a store on a server rejects, naming the server's own
 * tools; a store that does not answer backups at all is refused here.
 *
 * @internal
 * @module
 */
import { shown } from "../shown.ts";
import type { BackupResult, BackupStore, Store } from "../stores/store.ts";

/** Asks `store` for a copy of its database in the new file `file`. */
export async function backUp(store: Store, file: unknown): Promise<BackupResult> {
  if (typeof file !== "string" || file.trim() === "") {
    throw new TypeError(`Queue.backup: file must name a new file: got ${shown(file)}`);
  }
  if (!answersBackups(store)) {
    throw new Error(
      "Cannot back up this queue: its store does not make backups; use its database's own tools " +
        "(see docs/backups.md)",
    );
  }
  return await store.backup(file);
}

function answersBackups(store: Store): store is Store & BackupStore {
  return typeof (store as Partial<BackupStore>).backup === "function";
}
