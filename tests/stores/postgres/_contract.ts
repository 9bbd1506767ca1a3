/**
 * The store contract against PostgreSQL, one part per test file
 * (`AREA_PARTS`), each case in a schema of its own that it drops afterwards.
 *
 * @module
 */
import { PostgresStore } from "../../../src/stores/postgres/mod.ts";
import { storeContract } from "../contract/mod.ts";
import { openTestPostgresStore, postgresTestUrl } from "../../_postgres.ts";

/**
 * Registers part `part` of the contract against PostgreSQL when
 * `QUEUE_TEST_POSTGRES_URL` is set; otherwise one ignored case that says why.
 */
export function postgresContract(part: number): void {
  const url = postgresTestUrl();
  if (url === null) {
    console.log("PostgreSQL store tests skipped: QUEUE_TEST_POSTGRES_URL is not set");
    Deno.test({
      name: "PostgresStore: skipped, QUEUE_TEST_POSTGRES_URL is not set",
      ignore: true,
      fn() {},
    });
    return;
  }
  storeContract("PostgresStore", async () => {
    const opened = await openTestPostgresStore(url, { clock: "caller" });
    const { schema } = opened;
    return {
      store: opened.store,
      another: () => PostgresStore.open(url, { schema, clock: "caller" }),
      [Symbol.asyncDispose]: () => opened[Symbol.asyncDispose](),
    };
  }, part);
}
