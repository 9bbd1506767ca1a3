import assert from "node:assert/strict";
import { readConfig } from "../mod.ts";

Deno.test("readConfig() fills in the defaults when nothing is set", () => {
  assert.deepEqual(readConfig({}), {
    db: "./.renox/queue.db",
    database: { path: "./.renox/queue.db" },
    workers: 2,
  });
});

Deno.test("readConfig() reads QUEUE_DB and QUEUE_WORKERS; 0 workers turns them off", () => {
  assert.deepEqual(readConfig({ QUEUE_DB: "/var/lib/app/jobs.db", QUEUE_WORKERS: "8" }), {
    db: "/var/lib/app/jobs.db",
    database: { path: "/var/lib/app/jobs.db" },
    workers: 8,
  });
  assert.equal(readConfig({ QUEUE_WORKERS: "0" }).workers, 0);
  assert.equal(readConfig({ QUEUE_WORKERS: " 3 " }).workers, 3);
});

Deno.test("readConfig() takes a postgres:// DATABASE_URL when QUEUE_DB is unset, as Queue.open does; QUEUE_DB wins, and a DATABASE_URL of another kind is not the queue's", () => {
  const url = "postgres://app@db.internal:5432/app";
  assert.deepEqual(readConfig({ DATABASE_URL: url }), {
    db: url,
    database: { url },
    workers: 2,
  });
  assert.deepEqual(readConfig({ DATABASE_URL: ` ${url} `, QUEUE_DB: " " }).database, { url });
  assert.deepEqual(readConfig({ DATABASE_URL: url, QUEUE_DB: "./jobs.db" }).database, {
    path: "./jobs.db",
  });
  for (const other of ["redis://cache:6379", "mysql://app@db/app", "./jobs.db"]) {
    assert.deepEqual(readConfig({ DATABASE_URL: other }).database, {
      path: "./.renox/queue.db",
    }, other);
  }
});

Deno.test("readConfig() takes an empty variable for an unset one", () => {
  assert.deepEqual(readConfig({ QUEUE_DB: "", QUEUE_WORKERS: "" }), {
    db: "./.renox/queue.db",
    database: { path: "./.renox/queue.db" },
    workers: 2,
  });
});

Deno.test("readConfig() reads QUEUE_DB without the spaces around it, and a URL's scheme in any case", () => {
  const cases: [string, object][] = [
    [" postgres://app@db.internal/app", { url: "postgres://app@db.internal/app" }],
    ["\tPostgreSQL://db/app ", { url: "PostgreSQL://db/app" }],
    [" redis://cache:6379?prefix=app", { url: "redis://cache:6379?prefix=app" }],
    ["REDISS://cache/1", { url: "REDISS://cache/1" }],
    ["  ./jobs.db ", { path: "./jobs.db" }],
    ["   ", { path: "./.renox/queue.db" }],
  ];
  for (const [QUEUE_DB, database] of cases) {
    assert.deepEqual(readConfig({ QUEUE_DB }).database, database, JSON.stringify(QUEUE_DB));
  }
  assert.equal(readConfig({ QUEUE_DB: " redis://cache " }).db, "redis://cache");
});

Deno.test("readConfig() refuses a QUEUE_DB URL that no store opens, naming the variable and the URL without its password", () => {
  for (
    const [value, shown] of [
      ["mysql://app:secret@db.internal/app", "mysql://app:***@db.internal/app"],
      [" HTTP://example.com/jobs.db", " HTTP://example.com/jobs.db"],
    ]
  ) {
    assert.throws(() => readConfig({ QUEUE_DB: value }), {
      name: "TypeError",
      message: `QUEUE_DB must be a path, a postgres:// URL or a redis:// URL: got ${
        JSON.stringify(shown)
      }`,
    });
  }
  // SQLite's own URI filenames are files.
  assert.deepEqual(readConfig({ QUEUE_DB: "file:///var/lib/app/jobs.db" }).database, {
    path: "file:///var/lib/app/jobs.db",
  });
});

Deno.test("readConfig() refuses a bad QUEUE_WORKERS with an error naming the variable and the value", () => {
  for (const value of ["two", "-1", "1.5", "2e3", "0x10"]) {
    assert.throws(() => readConfig({ QUEUE_WORKERS: value }), {
      name: "TypeError",
      message: `QUEUE_WORKERS must be a whole number >= 0: got ${JSON.stringify(value)}`,
    });
  }
  assert.throws(() => readConfig({ QUEUE_WORKERS: "10001" }), {
    message: 'QUEUE_WORKERS must be at most 10000: got "10001"',
  });
});

Deno.test("readConfig() reads the process environment by default, with nothing more than --allow-env for its variables", async () => {
  const code = `import { readConfig } from ${JSON.stringify(import.meta.resolve("../mod.ts"))};
    console.log(JSON.stringify(readConfig()));`;
  const run = async (env: Record<string, string>, more = "") => {
    const child = new Deno.Command(Deno.execPath(), {
      args: ["run", "--quiet", "--no-prompt", `--allow-env=${more}QUEUE_DB,QUEUE_WORKERS`, "-"],
      cwd: new URL("..", import.meta.url),
      env,
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const writer = child.stdin.getWriter();
    await writer.write(new TextEncoder().encode(code));
    await writer.close();
    return await child.output();
  };
  const [set, bad, fromUrl, refused] = await Promise.all([
    run({ QUEUE_DB: "/tmp/x.db", QUEUE_WORKERS: "5" }),
    run({ QUEUE_WORKERS: "lots" }),
    run({ DATABASE_URL: "postgres://app@db.internal/app" }, "DATABASE_URL,"),
    // Without leave to read DATABASE_URL it is taken as unset, as Queue.open takes it.
    run({ DATABASE_URL: "postgres://app@db.internal/app" }),
  ]);
  const decode = (bytes: Uint8Array) => new TextDecoder().decode(bytes);
  assert.equal(set.code, 0, decode(set.stderr));
  assert.deepEqual(JSON.parse(decode(set.stdout)), {
    db: "/tmp/x.db",
    database: { path: "/tmp/x.db" },
    workers: 5,
  });
  assert.equal(fromUrl.code, 0, decode(fromUrl.stderr));
  assert.deepEqual(JSON.parse(decode(fromUrl.stdout)).database, {
    url: "postgres://app@db.internal/app",
  });
  assert.equal(refused.code, 0, decode(refused.stderr));
  assert.deepEqual(JSON.parse(decode(refused.stdout)).database, { path: "./.renox/queue.db" });
  assert.notEqual(bad.code, 0);
  assert.match(decode(bad.stderr), /QUEUE_WORKERS must be a whole number >= 0: got "lots"/);
});

/** Whether `script` (util-linux) can run a command on a pseudo-terminal here. */
function hasScript(): boolean {
  try {
    return new Deno.Command("script", { args: ["--version"], stdout: "null", stderr: "null" })
      .outputSync().success;
  } catch {
    return false;
  }
}

Deno.test({
  name:
    "readConfig() in a terminal, with --allow-env for its own variables only, asks no permission for DATABASE_URL",
  ignore: !hasScript(),
  async fn() {
    const dir = await Deno.makeTempDir();
    try {
      const app = `${dir}/app.ts`;
      await Deno.writeTextFile(
        app,
        `import { readConfig } from ${JSON.stringify(import.meta.resolve("../mod.ts"))};
console.log(JSON.stringify(readConfig().database));`,
      );
      const deno = `'${Deno.execPath()}' run --quiet --allow-env=QUEUE_DB,QUEUE_WORKERS ` +
        `--allow-read '${app}'`;
      // A pseudo-terminal, so Deno would prompt; a prompt waits for an answer until killed.
      const child = new Deno.Command("script", {
        args: ["-qec", deno, "/dev/null"],
        cwd: dir,
        env: { DATABASE_URL: "postgres://app@db.internal/app" },
        stdin: "null",
        stdout: "piped",
        stderr: "piped",
      }).spawn();
      const killer = setTimeout(() => child.kill("SIGKILL"), 60_000);
      const { stdout } = await child.output();
      clearTimeout(killer);
      const text = new TextDecoder().decode(stdout);
      assert.doesNotMatch(text, /requests env access/);
      assert.match(text, /\{"path":"\.\/\.renox\/queue\.db"\}/);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
