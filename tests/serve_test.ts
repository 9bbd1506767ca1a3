import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { tempDir, waitUntil } from "./_helpers.ts";
import { runCli } from "./fixtures/cli/cli_process.ts";

/** What `counts()` shows for a queue of the jobs with nothing in it. */
const IDLE = { pending: 0, delayed: 0, reserved: 0, failed: 0, running: [] };

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const ORDER = { sku: "mug", quantity: 2, email: "ada@example.com" };

interface Status {
  counts: Record<string, { pending: number; delayed: number; reserved: number; failed: number }>;
  worker: { completed: number; failed: number; retried: number } | null;
}

function kill(child: Deno.ChildProcess): void {
  try {
    child.kill("SIGKILL");
  } catch {
    // It exited already.
  }
}

/** Starts examples/serve/main.ts on a free port; resolves once it listens. */
async function startServe(env: Record<string, string>) {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--quiet", "examples/serve/main.ts"],
    cwd: ROOT,
    env: { PORT: "0", ...env },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const stderr = new Response(child.stderr).text();
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let output = "";
  const deadline = setTimeout(() => child.kill("SIGKILL"), 15_000);
  let origin: string | undefined;
  try {
    while (origin === undefined) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`The app exited before listening: ${await stderr}`);
      output += value;
      origin = output.match(/Listening on (http:\/\/127\.0\.0\.1:\d+)\//)?.[1];
    }
  } catch (error) {
    kill(child);
    await child.status;
    await reader.cancel();
    throw error;
  } finally {
    clearTimeout(deadline);
  }
  const rest = (async () => {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return output;
      output += value;
    }
  })();
  return {
    origin,
    child,
    /** SIGTERM, then its exit code and output. */
    async stop(): Promise<{ code: number; stdout: string; stderr: string }> {
      child.kill("SIGTERM");
      const { code } = await child.status;
      return { code, stdout: await rest, stderr: await stderr };
    },
    async [Symbol.asyncDispose]() {
      kill(child);
      await child.status;
      await Promise.allSettled([rest, stderr]);
    },
  };
}

async function status(origin: string): Promise<Status> {
  const response = await fetch(`${origin}/`);
  assert.equal(response.status, 200);
  return await response.json();
}

function postOrder(origin: string, body: string): Promise<Response> {
  return fetch(`${origin}/orders`, { method: "POST", body });
}

Deno.test("the serve example dispatches an order, runs it in its own workers, refuses a bad body with 400, and stops on SIGTERM", async () => {
  await using tmp = await tempDir();
  await using app = await startServe({ QUEUE_DB: tmp.dbPath, QUEUE_WORKERS: "1" });

  const accepted = await postOrder(app.origin, JSON.stringify(ORDER));
  assert.equal(accepted.status, 202);
  const { id } = await accepted.json();
  assert.equal(typeof id, "number");

  const refused = await postOrder(app.origin, JSON.stringify({ sku: "mug", quantity: -1 }));
  assert.equal(refused.status, 400);
  const { error } = await refused.json();
  assert.match(error, /quantity/);
  const notJson = await postOrder(app.origin, "{");
  assert.equal(notJson.status, 400);
  await notJson.body?.cancel();
  // Over the payload cap: a ValidationError too, so the client's doing, not a 500.
  const huge = await postOrder(app.origin, JSON.stringify({ ...ORDER, note: "x".repeat(300_000) }));
  assert.equal(huge.status, 400);
  assert.match((await huge.json()).error, /over the cap of 262144 bytes/);

  await waitUntil(async () => (await status(app.origin)).worker!.completed === 1, {
    what: "the order job ran",
  });
  assert.deepEqual((await status(app.origin)).counts, { default: IDLE });

  const stopped = await app.stop();
  assert.equal(stopped.code, 0, stopped.stderr);
  assert.match(stopped.stdout, /SIGTERM: no new requests/);
});

Deno.test("with QUEUE_WORKERS=0 the serve example only dispatches, and the work command on the same file runs its jobs", async () => {
  await using tmp = await tempDir();
  await using app = await startServe({ QUEUE_DB: tmp.dbPath, QUEUE_WORKERS: "0" });
  const accepted = await postOrder(app.origin, JSON.stringify(ORDER));
  assert.equal(accepted.status, 202);
  const { id } = await accepted.json();
  assert.deepEqual(await status(app.origin), {
    counts: { default: { pending: 1, delayed: 0, reserved: 0, failed: 0, running: [] } },
    worker: null,
  });

  const work = await runCli(
    ["work", "--no-supervise", "--stop-when-empty", "--jobs", "./examples/jobs.ts"],
    { QUEUE_DB: tmp.dbPath },
  );

  assert.equal(work.code, 0, work.stderr);
  const completes = work.stdout.split("\n").filter((line) => line.includes('"job:complete"'));
  assert.deepEqual(completes.map((line) => JSON.parse(line).id), [id]);
  assert.deepEqual((await status(app.origin)).counts, { default: IDLE });
  assert.equal((await app.stop()).code, 0);
});
