/**
 * Watching what a Redis store sends to the server: `MONITOR` lists every
 * command the server runs, those of the store's functions too, in order.
 * For the tests that a settle between two prunes sends no command for them.
 *
 * @module
 */
import assert from "node:assert/strict";
// deno-lint-ignore no-import-prefix
import { createClient } from "npm:@redis/client@^6.4";

/** A watch on the commands that touch keys under one store's prefix. */
export interface CommandWatch extends AsyncDisposable {
  /** The monitor's lines of the commands on the prefix's keys that `action` sent. */
  during(action: () => Promise<unknown>): Promise<string[]>;
}

/** Starts watching the commands on the keys under `prefix` on the server at `url`. */
export async function watchCommands(url: string, prefix: string): Promise<CommandWatch> {
  const monitor = createClient({ url });
  const marker = createClient({ url });
  const close = () => Promise.allSettled([monitor.close(), marker.close()]).then(() => {});
  try {
    for (const client of [monitor, marker]) {
      client.on("error", () => {});
      await client.connect();
    }
    const lines: string[] = [];
    await monitor.monitor((line) => {
      if (line.includes(`{${prefix}}:`)) lines.push(line);
    });
    let marks = 0;
    return {
      async during(action) {
        // Markers before and after: the monitor's stream comes late, so commands sent before the
        // action (the test's own reads) may not have arrived when it starts.
        const seen = async () => {
          const mark = `{${prefix}}:marker:${++marks}`;
          await marker.get(mark);
          const deadline = Date.now() + 10_000;
          for (;;) {
            const at = lines.findLastIndex((line) => line.includes(mark));
            if (at >= 0) return at;
            assert.ok(Date.now() < deadline, "the monitor shows the marker");
            await new Promise((resolve) => setTimeout(resolve, 10));
          }
        };
        const from = await seen() + 1;
        await action();
        const end = await seen();
        return lines.slice(from, end);
      },
      [Symbol.asyncDispose]: close,
    };
  } catch (error) {
    await close();
    throw error;
  }
}
