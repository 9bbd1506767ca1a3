/**
 * How a SQL store runs its ticks on its engine: a settle that only confirms
 * starts runs as unflushed statements, each its own commit, and leaves the
 * rows whole when its later statements are lost; every other settle is one
 * flushed transaction. On a real PostgreSQL server, through an engine that
 * records each run's mode, or loses a script's statements after its first.
 *
 * @module
 */
import assert from "node:assert/strict";
import postgres from "postgres";
import { migrations } from "../../../migrations/postgres/mod.ts";
import { postgresDialect } from "../../../src/stores/postgres/dialect.ts";
import { PostgresEngine } from "../../../src/stores/postgres/engine.ts";
import type { Engine, RunMode } from "../../../src/stores/sql/engine.ts";
import type { Script } from "../../../src/stores/sql/script.ts";
import { SqlStore } from "../../../src/stores/sql/sql_store.ts";
import { claim, LEASE_MS, newJob, T0 } from "../contract/fixtures.ts";
import { enginePools, freshSchema, postgresTestUrl } from "../../_postgres.ts";

const url = postgresTestUrl();

/** `engine`, its `run` replaced by the one given. */
function withRun(engine: Engine, run: Engine["run"]): Engine {
  return {
    run,
    transaction: (fn) => engine.transaction(fn),
    migrate: (steps, options, apply) => engine.migrate(steps, options, apply),
    watch: (listener) => engine.watch(listener),
    backup: (file) => engine.backup(file),
    close: () => engine.close(),
  };
}

/** `engine`, noting the mode of every script it runs. */
function recording(engine: Engine, modes: RunMode[]): Engine {
  return withRun(engine, (start, mode) => {
    modes.push(mode);
    return engine.run(start, mode);
  });
}

/**
 * `script` cut short as a lost connection would cut it: its first statement
 * runs (and, run as unflushed statements, commits), then the call fails.
 */
function* lostAfterFirstStatement<T>(script: Script<T>): Script<T> {
  const first = script.next();
  if (first.done) return first.value;
  yield first.value;
  throw new Error("connection lost after the first statement");
}

/**
 * `engine`, whose unflushed-statements scripts lose every statement after
 * their first while `lose.now` is set.
 */
function losing(engine: Engine, lose: { now: boolean }): Engine {
  return withRun(engine, (start, mode) =>
    engine.run(
      lose.now && mode === "unflushed statements" ? () => lostAfterFirstStatement(start()) : start,
      mode,
    ));
}

/** A store on a fresh, migrated schema through `wrap(engine)`; disposing it drops the schema. */
async function storeThrough(wrap: (engine: Engine) => Engine) {
  const schema = freshSchema();
  const engine = new PostgresEngine(enginePools(url!, schema), {
    schema,
    channel: `renox_queue_${schema}`,
    server: "the test server",
  });
  const store = new SqlStore(wrap(engine), postgresDialect({ dbClock: false }), migrations);
  const opened = {
    store,
    async [Symbol.asyncDispose]() {
      await store.close();
      const sql = postgres(url!, { max: 1, onnotice: () => {} });
      await sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await sql.end();
    },
  };
  await disposedOnFailure(opened, () => store.migrate());
  return opened;
}

/** Runs `fn`; when it throws, disposes `opened` first. */
async function disposedOnFailure<T>(opened: AsyncDisposable, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (error) {
    await opened[Symbol.asyncDispose]();
    throw error;
  }
}

Deno.test({
  name:
    "SqlStore.settle() writes a tick that only confirms starts as unflushed statements, and one that settles a job as a flushed write",
  ignore: url === null,
  async fn() {
    const modes: RunMode[] = [];
    await using opened = await storeThrough((engine) => recording(engine, modes));
    const { store } = opened;
    const [a, b, c] = await store.insertJobs([newJob(), newJob(), newJob()]);
    await claim(store, { limit: 3, aheadFrom: 1, token: 1 });
    const confirm = (id: number) => ({ leases: [{ id, token: 1 }], leaseMs: LEASE_MS, now: T0 });
    /** The modes `settle` ran its script in. */
    const runs = async (settle: () => Promise<unknown>) => {
      modes.length = 0;
      return { result: await settle(), modes: [...modes] };
    };

    const confirmed = await runs(() =>
      store.settle([], undefined, { spans: [], starts: confirm(b!) })
    );
    assert.deepEqual(confirmed, {
      result: { applied: [], claimed: [], started: [b] },
      modes: ["unflushed statements"],
    });
    assert.equal(await store.result(b!, T0).then((row) => row?.state), "running");
    const complete = { kind: "complete", id: a!, token: 1, at: T0 } as const;
    const settled = await runs(() => store.settle([complete], undefined, { starts: confirm(c!) }));
    assert.deepEqual(settled, {
      result: { applied: [true], claimed: [], started: [c] },
      modes: ["write"],
    });
  },
});

const KEY = { kind: "unique", key: "k", expiresAt: T0 + 600_000, releaseOnStart: true } as const;

/**
 * A store whose worker held a keyed job ahead and confirmed its start, and
 * lost the confirmation's statements after the first: the start committed,
 * the release of the job's key (which ends at its start) did not.
 */
async function lostConfirmation() {
  const lose = { now: false };
  const opened = await storeThrough((engine) => losing(engine, lose));
  const { store } = opened;
  return await disposedOnFailure(opened, async () => {
    const [plain] = await store.insertJobs([newJob()]);
    const [keyed] = await store.insertKeyed([{ ...newJob(), key: KEY }]);
    const jobs = await claim(store, { limit: 2, aheadFrom: 1, token: 1 });
    assert.deepEqual(jobs.map((job) => [job.id, job.ahead ?? false]), [
      [plain, false],
      [keyed?.id, true],
    ]);
    const duplicate = async (createdAt = T0) =>
      (await store.insertKeyed([{ ...newJob({ createdAt }), key: KEY }]))[0]?.outcome;
    assert.equal(await duplicate(), "duplicate", "held while the job waits ahead");
    lose.now = true;
    const starts = { leases: [{ id: keyed!.id, token: 1 }], leaseMs: LEASE_MS, now: T0 };
    await assert.rejects(store.settle([], undefined, { starts }), /connection lost/);
    lose.now = false;
    assert.equal(await store.result(keyed!.id, T0).then((row) => row?.state), "running");
    assert.equal(await duplicate(), "duplicate", "still held: its release was lost");
    return { opened, store, id: keyed!.id, starts, duplicate };
  });
}

Deno.test({
  name:
    "SqlStore.settle(): a start confirmation that loses its statements after the first leaves the job started; its worker asking again confirms it again and releases its key",
  ignore: url === null,
  async fn() {
    const { opened, store, id, starts, duplicate } = await lostConfirmation();
    await using _ = opened;
    assert.deepEqual((await store.settle([], undefined, { starts })).started, [id]);
    assert.equal(await store.result(id, T0).then((row) => row?.state), "running");
    assert.equal(await duplicate(), "stored");
  },
});

Deno.test({
  name:
    "SqlStore.settle(): a start confirmation that loses its statements after the first, its worker gone, leaves the job's key held until a claim takes the job over, charged nothing",
  ignore: url === null,
  async fn() {
    const { opened, store, id, duplicate } = await lostConfirmation();
    await using _ = opened;
    const later = T0 + LEASE_MS + 1;
    const taken = await claim(store, { now: later, token: 2 });
    const again = taken.find((job) => job.id === id);
    assert.deepEqual(
      { crashes: again?.crashes, recovered: again?.recovered, ahead: again?.ahead },
      { crashes: 0, recovered: false, ahead: undefined },
      "taken over charged nothing: its handler never began",
    );
    assert.equal(
      await duplicate(later),
      "stored",
      "the start of the job taken over released its key",
    );
  },
});
