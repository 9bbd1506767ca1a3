/**
 * The settles' prunes on Redis beyond the contract: each store's process
 * decides when the kept finished jobs, the metrics rollup and the log lines
 * are pruned, as SQL's does (src/stores/sql/upkeep.ts), so a settle between
 * two prunes sends nothing for them, and the stamps older code kept on the
 * server (`P:done:pruned`, `P:m:pruned`) are neither read nor written (the
 * log prune's place, `P:log:pruned`, only when it prunes). Runs when
 * `QUEUE_TEST_REDIS_URL` is set.
 *
 * @module
 */
import assert from "node:assert/strict";
import { evalScript, openTestRedisStore, redisTestUrl } from "../../_redis.ts";
import { claim, newJob, T0 } from "../contract/fixtures.ts";
import { watchCommands } from "./_monitor.ts";

const url = redisTestUrl();

Deno.test({
  name:
    "RedisStore: a settle between two prunes of the kept jobs, the metrics and the logs sends no command for them; a minute later it prunes again",
  ignore: url === null,
  async fn() {
    await using opened = await openTestRedisStore(url!, { clock: "caller" });
    const { store, prefix } = opened;
    await using watch = await watchCommands(url!, prefix);
    const p = `{${prefix}}`;
    /** What a settle completing a job at `at`, kept until `keepUntil`, sent for the prunes. */
    const pruneCommands = async (at: number, keepUntil: number) => {
      const [id] = await store.insertJobs([newJob({ createdAt: at, availableAt: at })]);
      await claim(store, { token: at, now: at });
      const lines = await watch.during(() =>
        store.settle([{ kind: "complete", id: id!, token: at, at, durationMs: 5, keepUntil }])
      );
      return {
        id: id!,
        stamps: lines.filter((line) =>
          line.includes(`"${p}:done:pruned"`) || line.includes(`"${p}:m:pruned"`)
        ),
        kept: lines.some((line) => line.includes(`"ZRANGEBYSCORE" "${p}:done:keep"`)),
        metrics: lines.some((line) => line.includes(`"ZRANGEBYSCORE" "${p}:m"`)),
        logs: lines.some((line) => line.includes(`"${p}:log:pruned"`)),
      };
    };
    const first = await pruneCommands(T0, T0 + 10);
    assert.deepEqual(first.stamps, [], "no stamp on the server is read or written");
    assert.ok(first.kept && first.metrics && first.logs, "the first settle prunes all three");
    const between = await pruneCommands(T0 + 30_000, T0 + 3_600_000);
    assert.deepEqual(between.stamps, [], "a settle between prunes reads no stamp");
    assert.ok(!between.kept && !between.metrics && !between.logs, "nor prunes");
    assert.notEqual(await store.finishedJob(first.id), null, "pruned less than a minute ago");
    const late = await pruneCommands(T0 + 59_999, T0 + 3_600_000);
    assert.ok(!late.kept && !late.metrics && !late.logs, "nor one just before the minute is up");
    const again = await pruneCommands(T0 + 60_000, T0 + 3_600_000);
    assert.deepEqual(again.stamps, []);
    assert.ok(
      again.kept && again.metrics && again.logs,
      "a minute after the last prune, all again",
    );
    assert.equal(await store.finishedJob(first.id), null, "its time having run out, it went");
  },
});

Deno.test({
  name:
    "RedisStore: a prune of the kept jobs that leaves some past their time (a full chunk) goes on at the next settle",
  ignore: url === null,
  async fn() {
    await using opened = await openTestRedisStore(url!, { clock: "caller" });
    const { store } = opened;
    const many = 1_001; // one more than a prune's chunk
    const ids = await store.insertJobs(Array.from({ length: many }, () => newJob()));
    assert.equal((await claim(store, { limit: many, token: 1 })).length, many);
    await store.settle(
      ids.map((id) => ({ kind: "complete", id, token: 1, at: T0, keepUntil: T0 + 10 })),
    );
    const kept = async () => (await store.finished({}, { limit: 2 * many, offset: 0 })).length;
    assert.equal(await kept(), many, "the first settle's prune found none past its time");
    const completeOne = async (at: number) => {
      const [id] = await store.insertJobs([newJob({ createdAt: at, availableAt: at })]);
      await claim(store, { token: at, now: at });
      await store.settle([{ kind: "complete", id: id!, token: at, at, keepUntil: T0 + 3_600_000 }]);
      return id!;
    };
    const first = await completeOne(T0 + 60_000);
    assert.equal(await kept(), 2, "a minute later one chunk went, one job past its time stays");
    const second = await completeOne(T0 + 60_001);
    assert.deepEqual(
      (await store.finished({}, { limit: 10, offset: 0 })).map((job) => job.id),
      [second, first],
      "the next settle went on with the rest",
    );
  },
});

Deno.test({
  name:
    "RedisStore: a prune of the logs that looks at a whole chunk of jobs goes on at the next settle",
  ignore: url === null,
  async fn() {
    await using opened = await openTestRedisStore(url!, { clock: "caller" });
    const { store, prefix } = opened;
    const many = 1_001; // one more than a prune's chunk of jobs holding lines
    const ids = await store.insertJobs(Array.from({ length: many }, () => newJob()));
    assert.equal((await claim(store, { limit: many, token: 1 })).length, many);
    const line = (jobId: number, at: number) => ({
      jobId,
      attempt: 1,
      at,
      level: "info",
      message: "hello",
      fields: null,
      encrypted: false,
      bytes: 5,
    });
    // Every job completes, kept by none, with a line of its own: each line's job is then gone.
    await store.settle(
      ids.map((id) => ({ kind: "complete", id, token: 1, at: T0 })),
      undefined,
      { logs: { lines: ids.map((id) => line(id, T0)), maxBytesPerJob: 65_536 } },
    );
    const holding = async () =>
      Number(await evalScript(url!, "return redis.call('ZCARD', ARGV[1])", [`{${prefix}}:logs`]));
    assert.equal(await holding(), 1, "the first settle's prune went through one chunk of 1,000");
    const [other] = await store.insertJobs([newJob({ createdAt: T0 + 1, availableAt: T0 + 1 })]);
    await claim(store, { token: 2, now: T0 + 1 });
    await store.settle([{ kind: "complete", id: other!, token: 2, at: T0 + 1 }]);
    assert.equal(await holding(), 0, "the next settle went on with the rest, within the minute");
  },
});

Deno.test({
  name:
    "RedisStore: a settle carrying 200,000 log lines (a backlog after an outage) writes them under the job's cap",
  ignore: url === null,
  async fn() {
    await using opened = await openTestRedisStore(url!, { clock: "caller" });
    const { store } = opened;
    const [id] = await store.insertJobs([newJob()]);
    await claim(store, { token: 1 });
    const lines = Array.from({ length: 200_000 }, (_, n) => ({
      jobId: id!,
      attempt: 1,
      at: T0 + n,
      level: "info",
      message: "",
      fields: null,
      encrypted: false,
      bytes: 0,
    }));
    const settled = await store.settle(
      [{ kind: "complete", id: id!, token: 1, at: T0 + 200_000, keepUntil: T0 + 3_600_000 }],
      undefined,
      { logs: { lines, maxBytesPerJob: 65_536 } },
    );
    assert.deepEqual(settled.applied, [true]);
    assert.equal((await store.logs(id!)).length, 200_000, "0-byte lines all fit under the cap");
  },
});
