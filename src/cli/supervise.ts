/**
 * The supervisor of `work`: runs the worker as a child process and starts a
 * new one when it crashes or exits stuck, with a growing pause between
 * starts, the way Supervisor or systemd keep a PHP `queue:work` alive.
 *
 * @module
 * @internal
 */
import { EXIT } from "./command.ts";
import { onSignals, WORK_STOP_SIGNALS } from "./stop_signals.ts";

/** The pause before the first restart; it doubles on each crash in a row. */
const FIRST_DELAY_MS = 500;
/** The longest pause between restarts. */
const MAX_DELAY_MS = 30_000;
/** A child that ran this long was healthy: the next pause starts from the first again. */
const HEALTHY_RUN_MS = 60_000;

/**
 * The variable that gives a supervised worker its supervisor's pid: the
 * worker stops once its parent is another process (the supervisor was
 * killed with SIGKILL, which reaches no child of another process group).
 */
export const SUPERVISOR_PID_ENV = "QUEUE_SUPERVISOR_PID";

/** The CLI's entry module, which the child runs. */
export const CLI_URL = new URL("../cli.ts", import.meta.url).href;
/**
 * After a second stop signal, how long the child has to exit before it is
 * killed: a worker stuck in synchronous code never runs its signal listener.
 */
export const KILL_AFTER_MS = 2_000;

/** How {@linkcode supervise} starts and judges its child. */
export interface SuperviseOptions {
  /** The Deno flags of the child, before the CLI's module (see deno_flags.ts). */
  readonly denoFlags: readonly string[];
  /**
   * Whether the child was given a limit (`--once`, `--max-jobs`, `--max-time`,
   * `--stop-when-empty`) that explains an exit 0; without one, an exit 0 (a
   * handler calling `Deno.exit(0)`) is restarted like a crash.
   */
  readonly mayFinish: boolean;
  /**
   * Asked when a child exits with 1: whether the queue was moved to another
   * store (docs/moving.md), where every new child would stop the same way.
   * Supervision then ends with 1 instead of starting another.
   */
  readonly movedAway: () => Promise<boolean>;
}

function describe(status: Deno.CommandStatus): string {
  if (status.signal !== null) return `was killed by ${status.signal}`;
  if (status.code === EXIT.stuck) return "exited with code 3 (a job was stuck in synchronous code)";
  return `exited with code ${status.code}`;
}

function say(text: string): void {
  // In a terminal, first erase the child's unfinished status line.
  console.error(`${Deno.stderr.isTerminal() ? "\r\x1b[K" : ""}queue work: ${text}`);
}

/**
 * Runs `deno run <flags> <cli> ...args` until it exits 0 for a reason its
 * limit flags explain, or with a usage error, starting it again after a
 * crash, a stuck exit or an unexplained exit 0. A stop signal is passed on to
 * the child (SIGHUP as SIGTERM), and then the child's exit code is returned
 * without a restart. A second signal is passed on too, and a child still
 * running {@linkcode KILL_AFTER_MS} later is killed with SIGKILL.
 */
export async function supervise(
  args: readonly string[],
  options: SuperviseOptions,
): Promise<number> {
  let child: Deno.ChildProcess | null = null;
  const stop = Promise.withResolvers<"stop">();
  let stopping = false;
  let killTimer: ReturnType<typeof setTimeout> | undefined;
  const kill = (signal: Deno.Signal) => {
    try {
      child?.kill(signal);
    } catch {
      // The child has just exited: its status is on its way.
    }
  };
  const forward = (signal: Deno.Signal, count: number) => {
    stopping = true;
    stop.resolve("stop");
    kill(signal === "SIGHUP" ? "SIGTERM" : signal);
    if (count === 2 && child !== null) {
      killTimer = setTimeout(() => {
        say(
          `the worker did not stop within ${KILL_AFTER_MS / 1000} s of the second signal: SIGKILL`,
        );
        kill("SIGKILL");
      }, KILL_AFTER_MS);
    }
  };
  // A hang-up (the terminal closed) would end this process and orphan the child: stop it instead.
  const listening = onSignals(forward, WORK_STOP_SIGNALS);
  try {
    return await superviseLoop();
  } finally {
    // Once stopping, more stop signals (Ctrl-C pressed again) must not end this process by their
    // default action between here and its exit code: it keeps listening, and the CLI exits next.
    if (!stopping) listening[Symbol.dispose]();
  }

  async function superviseLoop(): Promise<number> {
    let delayMs = FIRST_DELAY_MS;
    for (;;) {
      const startedAt = performance.now();
      child = new Deno.Command(Deno.execPath(), {
        args: ["run", ...options.denoFlags, CLI_URL, ...args],
        stdin: "null",
        stdout: "inherit",
        stderr: "inherit",
        // Its own process group: Ctrl-C reaches only this process, which passes it on once.
        detached: true,
        // So it stops once this process is gone (SIGKILL reaches no child): see `work`.
        env: { [SUPERVISOR_PID_ENV]: String(Deno.pid) },
      }).spawn();
      const status = await child.status;
      child = null;
      clearTimeout(killTimer);
      if (stopping) {
        if (status.signal === "SIGKILL") return EXIT.stuck;
        // Ended by the stop signal passed on before it listened for one: it had claimed nothing.
        return status.signal === "SIGTERM" || status.signal === "SIGINT" ? EXIT.ok : status.code;
      }
      if (status.success && options.mayFinish) return status.code;
      if (status.signal === null && status.code === EXIT.usage) return EXIT.usage;
      // Started again, the same old code would refuse the database: the next restart must bring the new.
      if (status.signal === null && status.code === EXIT.outdated) return EXIT.outdated;
      if (status.signal === null && status.code === EXIT.failure) {
        // A store that cannot say is taken to be where it was: the next child meets the same.
        if (await options.movedAway().catch(() => false)) return EXIT.failure;
      }
      if (performance.now() - startedAt >= HEALTHY_RUN_MS) delayMs = FIRST_DELAY_MS;
      const why = status.success
        ? "exited with code 0, though no limit flag asked it to (did a job call Deno.exit()?)"
        : describe(status);
      say(`the worker ${why}; starting another in ${delayMs / 1000} s`);
      let timer: ReturnType<typeof setTimeout> | undefined;
      const waited = await Promise.race([
        new Promise<"wait">((resolve) => timer = setTimeout(() => resolve("wait"), delayMs)),
        stop.promise,
      ]);
      clearTimeout(timer);
      if (waited === "stop") return 0;
      delayMs = Math.min(delayMs * 2, MAX_DELAY_MS);
    }
  }
}
