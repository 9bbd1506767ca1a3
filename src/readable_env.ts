/**
 * Reading an environment variable a process may not have leave to read,
 * without a permission prompt: optional settings (`DATABASE_URL`, an
 * `APP_KEY` no registered job needs) must not stop an app run in a terminal
 * with `--allow-env` for its own variables only.
 *
 * @internal
 * @module
 */

/** Environment variable `name`, or undefined when unset or not readable (never prompts). */
export function readableEnv(name: string): string | undefined {
  try {
    if (Deno.permissions.querySync({ name: "env", variable: name }).state !== "granted") {
      return undefined;
    }
    return Deno.env.get(name);
  } catch {
    return undefined;
  }
}
