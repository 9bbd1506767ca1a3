/**
 * The Deno flags of this process, for the `work` supervisor to start its
 * child with: the same permissions (asked of `Deno.permissions`, not `-A`)
 * and the same other flags (`--config`, `--import-map`, `--unstable-*`,
 * `--no-lock`, …).
 *
 * What Deno lets a program discover about its own flags:
 * - permissions: `Deno.permissions.querySync` says whether a whole kind is
 *   granted, and whether one path, host, variable or command is; it cannot
 *   list the granted ones. So a kind granted whole is passed whole, and a
 *   partial grant is rebuilt from candidates (the parent's own
 *   `--allow-X=…` values where its command line can be read, and what the
 *   child needs: the CLI, the jobs module, the database, the current folder)
 *   kept only where the query says granted.
 * - other flags: no API exposes them (`Deno.args` holds only the script's
 *   arguments, `Deno.mainModule` the script). The process's command line
 *   holds them all: the flags are what sits between `run` and the script,
 *   whose arguments end it as `Deno.args`. Deno lets only `-A` read
 *   `/proc/self/cmdline`; otherwise `ps -o args=` tells, where running `ps`
 *   is allowed. Elsewhere (Windows, no permission) they are not
 *   discoverable, and `work --deno-flags="…"` gives them.
 *
 * @module
 * @internal
 */
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** What the child needs to reach, so that a partial grant is kept for it. */
export interface ChildNeeds {
  /** Files and folders the child reads. */
  readonly read: readonly string[];
  /** Files and folders the child writes. */
  readonly write: readonly string[];
  /** Hosts (`host` or `host:port`) the child connects to. */
  readonly net: readonly string[];
  /** Environment variables the child reads. */
  readonly env: readonly string[];
}

/** Permission kinds and their flags. */
const KINDS = ["read", "write", "net", "env", "run", "ffi", "sys", "import"] as const;
type Kind = typeof KINDS[number];

/** The `sys` kinds `Deno.permissions` knows: it answers for each one. */
const SYS_KINDS = [
  "hostname",
  "osRelease",
  "osUptime",
  "loadavg",
  "networkInterfaces",
  "systemMemoryInfo",
  "uid",
  "gid",
  "cpus",
  "homedir",
  "statfs",
  "getPriority",
  "setPriority",
  "username",
  "ca",
  "umask",
] as const;

/** Flags that grant or deny permissions, short and long: rebuilt from queries instead. */
const PERMISSION_FLAG =
  /^(-A|--allow-all|-[RWNESI](=.*)?|-P(=.*)?|--permission-set(=.*)?|--(allow|deny)-(all|read|write|net|env|run|ffi|sys|import|hrtime)(=.*)?)$/;
/** Flags of the parent that must not pass to a restarted child. */
const PARENT_ONLY_FLAG =
  /^--(watch|watch-hmr|watch-exclude|inspect|inspect-brk|inspect-wait)(=.*)?$/;

/**
 * This process's Deno flags (what comes between `deno [run]` and the
 * script), from its command line, or null where it cannot be read.
 */
export function ownDenoFlags(): string[] | null {
  const argv = commandLine();
  if (argv === null) return null;
  const scriptArgs = Deno.args;
  const scriptAt = argv.length - scriptArgs.length - 1;
  const tail = argv.slice(scriptAt + 1);
  const start = argv[1] === "run" ? 2 : 1;
  if (scriptAt < start || tail.some((arg, index) => arg !== scriptArgs[index])) return null;
  return argv.slice(start, scriptAt);
}

/**
 * The command line of this process: `/proc/self/cmdline` (exact, but Deno
 * lets only `-A` read it), else `ps -ww -o args=` where running `ps` is
 * allowed (its words split on spaces, so a flag's value with a space in it is
 * misread: give such flags with --deno-flags).
 */
function commandLine(): string[] | null {
  try {
    const argv = Deno.readTextFileSync("/proc/self/cmdline").split("\0");
    if (argv.at(-1) === "") argv.pop();
    return argv;
  } catch {
    // not Linux, or no -A
  }
  if (Deno.build.os === "windows" || !granted({ name: "run", command: "ps" })) return null;
  try {
    const { success, stdout } = new Deno.Command("ps", {
      args: ["-ww", "-o", "args=", "-p", String(Deno.pid)],
      stdin: "null",
      stdout: "piped",
      stderr: "null",
    }).outputSync();
    if (!success) return null;
    const line = new TextDecoder().decode(stdout).trim();
    const tail = Deno.args.join(" ");
    if (tail !== "" && !line.endsWith(` ${tail}`)) return null;
    const head = tail === "" ? line : line.slice(0, line.length - tail.length - 1);
    return [...head.split(/ +/), ...Deno.args];
  } catch {
    return null;
  }
}

/** The parent's `--allow-X=a,b` values, as candidates for a partial grant. */
function listedValues(flags: readonly string[] | null, kind: Kind): string[] {
  if (flags === null) return [];
  const short: Partial<Record<Kind, string>> = {
    read: "-R",
    write: "-W",
    net: "-N",
    env: "-E",
    sys: "-S",
    import: "-I",
  };
  return flags.flatMap((flag) => {
    const match = /^([^=]+)=(.*)$/.exec(flag);
    if (match === null) return [];
    return match[1] === `--allow-${kind}` || match[1] === short[kind] ? match[2]!.split(",") : [];
  });
}

function granted(descriptor: Deno.PermissionDescriptor): boolean {
  try {
    return Deno.permissions.querySync(descriptor).state === "granted";
  } catch {
    return false; // a malformed candidate
  }
}

function descriptor(kind: Kind, value?: string): Deno.PermissionDescriptor {
  if (value === undefined) return { name: kind } as Deno.PermissionDescriptor;
  switch (kind) {
    case "read":
    case "write":
    case "ffi":
      return { name: kind, path: value };
    case "net":
    case "import":
      return { name: kind, host: value };
    case "env":
      return { name: "env", variable: value };
    case "run":
      return { name: "run", command: value };
    case "sys":
      return { name: "sys", kind: value as typeof SYS_KINDS[number] };
  }
}

/**
 * The permission flags of this process: `--allow-X` for a kind granted
 * whole, `--allow-X=a,b` for the candidates granted one by one, nothing for
 * a kind with none. `rawFlags` are the parent's own flags (for its listed
 * values), `needs` what the child must reach.
 */
export function permissionFlags(rawFlags: readonly string[] | null, needs: ChildNeeds): string[] {
  const flags: string[] = [];
  for (const kind of KINDS) {
    if (granted(descriptor(kind))) {
      flags.push(`--allow-${kind}`);
      continue;
    }
    const needed = kind === "read" || kind === "write" || kind === "net" || kind === "env"
      ? needs[kind]
      : kind === "sys"
      ? SYS_KINDS
      : [];
    const listed = listedValues(rawFlags, kind);
    const paths = kind === "read" || kind === "write" || kind === "ffi";
    const candidates = [
      ...new Set([...listed, ...needed].map((value) => paths ? resolve(value) : value)),
    ];
    const kept = candidates.filter((value) => granted(descriptor(kind, value)));
    if (kept.length > 0) flags.push(`--allow-${kind}=${kept.join(",")}`);
  }
  return flags;
}

/** The file path of a `file:` URL, else null. */
export function filePath(url: string): string | null {
  return url.startsWith("file:") ? fileURLToPath(url) : null;
}

/** A file and its folder, for read and write candidates. */
export function withFolder(path: string): string[] {
  return [path, dirname(path)];
}

/**
 * The Deno flags to start the supervised child with: `given` (from
 * `--deno-flags`) as they are, else the parent's discoverable flags, less its
 * permission flags and watch/inspect flags, followed by its permissions.
 */
export function childDenoFlags(given: readonly string[] | undefined, needs: ChildNeeds): string[] {
  if (given !== undefined) return [...given];
  const own = ownDenoFlags();
  const kept = (own ?? []).filter((flag) =>
    !PERMISSION_FLAG.test(flag) && !PARENT_ONLY_FLAG.test(flag)
  );
  return [...kept, ...permissionFlags(own, needs)];
}
