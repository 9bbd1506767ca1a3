/**
 * The store contract against SQLite, on a file and on `:memory:`, one part
 * per test file (`AREA_PARTS`), each case on a fresh store.
 *
 * @module
 */
import { SqliteStore } from "../../../src/stores/sqlite/mod.ts";
import { storeContract } from "../contract/mod.ts";
import { tempDir } from "../../_helpers.ts";

/** Registers part `part` of the contract against a SQLite file and against `:memory:`. */
export function sqliteContract(part: number): void {
  storeContract("SqliteStore (file)", async () => {
    const dir = await tempDir();
    const store = await SqliteStore.open(dir.dbPath);
    return {
      store,
      another: () => SqliteStore.open(dir.dbPath),
      concurrentTransactions: false,
      async [Symbol.asyncDispose]() {
        await store.close();
        await dir[Symbol.asyncDispose]();
      },
    };
  }, part);
  storeContract("SqliteStore (:memory:)", async () => {
    const store = await SqliteStore.open(":memory:");
    return {
      store,
      concurrentTransactions: false,
      [Symbol.asyncDispose]: () => store.close(),
    };
  }, part);
}
