/**
 * An app in a folder of its own, with its own deno.json (or none), imports
 * this checkout and runs a job: the library brings its own dependencies by
 * full specifier instead of relying on the app's import map. A real child
 * `deno run` from a temp folder.
 *
 * @module
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { tempDir } from "./_helpers.ts";

const MOD = import.meta.resolve("../mod.ts");
const DASHBOARD = import.meta.resolve("../src/dashboard.ts");

const APP = `import { z } from "npm:zod@4";
import { defineJob, Queue, readConfig } from ${JSON.stringify(MOD)};
import { dashboard } from ${JSON.stringify(DASHBOARD)};
const hello = defineJob({ name: "hello", schema: z.object({ who: z.string() }), handle() {} });
await using queue = await Queue.open({ ...readConfig().database, jobs: [hello] });
await queue.dispatch(hello, { who: "world" });
await queue.work({ stopWhenEmpty: true, executor: "isolate" }).done;
const page = await dashboard(queue)(new Request("http://127.0.0.1/api/overview"));
console.log("ran", (await queue.counts()).default?.pending, typeof dashboard, page.status > 0);
`;

for (const withConfig of [true, false]) {
  Deno.test(`an app in another folder ${withConfig ? "with its own deno.json" : "with no deno.json"} imports the module and runs a job`, async () => {
    await using tmp = await tempDir();
    await Deno.writeTextFile(join(tmp.dir, "app.ts"), APP);
    if (withConfig) {
      await Deno.writeTextFile(
        join(tmp.dir, "deno.json"),
        JSON.stringify({ imports: { "@std/unrelated": "npm:zod@4" } }),
      );
    }
    const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", "--quiet", ...(withConfig ? [] : ["--no-config"]), "app.ts"],
      cwd: tmp.dir,
      env: { QUEUE_DB: join(tmp.dir, "queue.db"), NO_COLOR: "1" },
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).output();
    const decode = (bytes: Uint8Array) => new TextDecoder().decode(bytes);
    assert.equal(code, 0, decode(stderr));
    assert.equal(decode(stdout).trim(), "ran 0 function true");
  });
}
