/**
 * The store contracts against PostgreSQL, each case in a schema of its own
 * that it drops afterwards. Runs when `QUEUE_TEST_POSTGRES_URL` is set
 * (`.ci/run` sets it); otherwise says why it skips.
 *
 * @module
 */
import { PostgresStore } from "../src/stores/postgres.ts";
import { storeContract } from "./store_contract.ts";
import { chainsBatchesContract } from "./store_contract_chains_batches.ts";
import { statsContract } from "./store_contract_stats.ts";
import { openTestPostgresStore, postgresTestUrl } from "./_postgres.ts";

const url = postgresTestUrl();
if (url === null) {
  console.log("PostgreSQL store tests skipped: QUEUE_TEST_POSTGRES_URL is not set");
  Deno.test({
    name: "PostgresStore: skipped, QUEUE_TEST_POSTGRES_URL is not set",
    ignore: true,
    fn() {},
  });
} else {
  const open = () => openTestPostgresStore(url, { clock: "caller" });
  storeContract("PostgresStore", open);
  chainsBatchesContract("PostgresStore", open);
  statsContract("PostgresStore", open);
}

Deno.test("PostgresStore.open() refuses a bad schema name, clock or URL before connecting", async () => {
  const { rejects } = await import("node:assert/strict");
  await rejects(
    PostgresStore.open("postgres://x@127.0.0.1:1/db", { schema: "a-b" }),
    /schema must be/,
  );
  // Lower case only (search_path folds it), and short enough for its NOTIFY channel.
  for (const schema of ["Upper", "a".repeat(52)]) {
    await rejects(
      PostgresStore.open("postgres://x@127.0.0.1:1/db", { schema }),
      (error: Error) =>
        error instanceof TypeError &&
        /schema must be 1 to 51 lower-case letters, digits and underscores/.test(error.message),
      schema,
    );
  }
  await rejects(
    PostgresStore.open("postgres://x@127.0.0.1:1/db", { clock: "wall" as never }),
    /clock must be "database" or "caller"/,
  );
  await rejects(
    PostgresStore.open("mysql://u:secret@h/db"),
    (error: Error) =>
      /url must start with postgres:\/\//.test(error.message) && !error.message.includes("secret"),
  );
});
