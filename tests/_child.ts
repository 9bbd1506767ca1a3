/**
 * A fixture script run as a real process (`deno run -A`), read line by line,
 * for tests that need another process on the same database.
 *
 * @module
 */
import { fileURLToPath } from "node:url";

/** A script run as a child process; `await using` kills it and waits for its output. */
export class ChildScript implements AsyncDisposable {
  readonly #process: Deno.ChildProcess;
  readonly #stdin: WritableStreamDefaultWriter<Uint8Array>;
  readonly #lines: string[] = [];
  readonly #pumps: Promise<void>;
  #cursor = 0;
  #stderr = "";
  #ended = false;
  #stdinClosed = false;
  #wake: () => void = () => {};
  #changed = this.#nextChange();

  /**
   * Starts `deno run -A <script> ...args` from the project's folder, with this process's
   * environment plus `env` (set here, never in `Deno.env`, which every file of a parallel test
   * run shares).
   */
  constructor(script: URL, args: readonly string[], env: Record<string, string> = {}) {
    this.#process = new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", fileURLToPath(script), ...args],
      cwd: fileURLToPath(new URL("..", import.meta.url)),
      env,
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    this.#stdin = this.#process.stdin.getWriter();
    let partial = "";
    this.#pumps = Promise.all([
      this.#pump(this.#process.stdout, (text) => {
        const parts = (partial + text).split("\n");
        partial = parts.pop()!;
        this.#lines.push(...parts);
      }),
      this.#pump(this.#process.stderr, (text) => this.#stderr += text),
    ]).then(() => {
      this.#ended = true;
      this.#wake();
    });
  }

  /** How the process ended. */
  get status(): Promise<Deno.CommandStatus> {
    return this.#process.status;
  }

  /** What the process wrote to stderr so far. */
  get stderr(): string {
    return this.#stderr;
  }

  /** The next line starting with `prefix`, or an error after `timeoutMs` or at exit. */
  async line(prefix: string, timeoutMs = 15_000): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const index = this.#lines.findIndex((line, i) =>
        i >= this.#cursor && line.startsWith(prefix)
      );
      if (index >= 0) {
        this.#cursor = index + 1;
        return this.#lines[index]!;
      }
      const remaining = deadline - Date.now();
      if (this.#ended || remaining <= 0) {
        throw new Error(
          `No "${prefix}" line from the child (${this.#ended ? "it exited" : "timed out"}):\n` +
            `stdout: ${this.#lines.join("\n")}\nstderr: ${this.#stderr}`,
        );
      }
      let timer: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([
        this.#changed,
        new Promise((resolve) => timer = setTimeout(resolve, remaining)),
      ]);
      clearTimeout(timer);
    }
  }

  /** The child's process id. */
  get pid(): number {
    return this.#process.pid;
  }

  /** Sends `signal` to the child (a SIGTERM to stop it gracefully); nothing if it has exited. */
  kill(signal: Deno.Signal): void {
    try {
      this.#process.kill(signal);
    } catch {
      // it has exited already
    }
  }

  /** Writes `text` to the child's stdin. */
  async send(text: string): Promise<void> {
    await this.#stdin.write(new TextEncoder().encode(text));
  }

  /** Ends the child's stdin. */
  async closeStdin(): Promise<void> {
    if (this.#stdinClosed) return;
    this.#stdinClosed = true;
    await this.#stdin.close().catch(() => {});
  }

  /** Ends the child's stdin, then waits for it to exit, killing it after `timeoutMs`. */
  async exit(timeoutMs: number): Promise<Deno.CommandStatus> {
    await this.closeStdin();
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      return await Promise.race([
        this.#process.status,
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () => reject(new Error(`The child did not exit within ${timeoutMs} ms`)),
            timeoutMs,
          );
        }),
      ]);
    } finally {
      clearTimeout(timer);
      await this[Symbol.asyncDispose]();
    }
  }

  /** Kills the child if it still runs, and waits for it and its output. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.closeStdin();
    try {
      this.#process.kill("SIGKILL");
    } catch {
      // it has exited already
    }
    await this.#process.status;
    await this.#pumps;
  }

  async #pump(stream: ReadableStream<Uint8Array>, onText: (text: string) => void) {
    for await (const text of stream.pipeThrough(new TextDecoderStream())) {
      onText(text);
      this.#wake();
    }
  }

  #nextChange(): Promise<void> {
    return new Promise<void>((resolve) => {
      this.#wake = () => {
        this.#changed = this.#nextChange();
        resolve();
      };
    });
  }
}

/** How a script run to its end by {@linkcode runToEnd} ended. */
export interface ScriptEnd {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * Runs `deno run <permissions> <script> ...args` to its end and gives its
 * exit code and output; kills it and rejects when it has not ended within
 * `timeoutMs`.
 */
export async function runToEnd(
  script: URL,
  args: readonly string[],
  options: { readonly permissions?: readonly string[]; readonly timeoutMs: number },
): Promise<ScriptEnd> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", ...(options.permissions ?? ["-A"]), fileURLToPath(script), ...args],
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    const { code, stdout, stderr } = await Promise.race([
      child.output(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`${script.pathname} did not end within ${options.timeoutMs} ms`)),
          options.timeoutMs,
        );
      }),
    ]);
    const decoder = new TextDecoder();
    return { code, stdout: decoder.decode(stdout), stderr: decoder.decode(stderr) };
  } finally {
    clearTimeout(timer);
    try {
      child.kill();
    } catch {
      // it has ended
    }
  }
}
