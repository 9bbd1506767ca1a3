/**
 * The code blocks of README.md and docs/*.md, checked so that a guide cannot drift from the API.
 *
 * Each code block tagged `ts` is written to a file of its own in a temp folder (one folder per page) and all
 * of them are type-checked in one `deno check`, with `@renox/queue` and its entries mapped to this
 * checkout and the project's other imports and compiler options. A block whose first line is a
 * comment naming a file (`// jobs.ts: every job`) is written under that name, so that another
 * block of the same page can import it (`import { sendReceipt } from "./jobs.ts"`). Blocks that
 * are not code say so with the tags `sh`, `text` or `json` (each line of a json block must parse).
 * A test file a page names in a code span (`tests/faults/crash_test.ts`, `faults/crash_test.ts`, or
 * a bare `store_part2_test.ts`) must exist, as must the target of a relative link.
 *
 * @module
 */
import assert from "node:assert/strict";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { tempDir } from "./_helpers.ts";

const root = fileURLToPath(new URL("../", import.meta.url));
const languages = new Set(["ts", "sh", "text", "json"]);

/** One fenced block of a Markdown page. */
interface Block {
  page: string;
  /** The line of the opening fence, counted from 1. */
  line: number;
  info: string;
  code: string;
}

function pages(): string[] {
  const docs = [...Deno.readDirSync(join(root, "docs"))]
    .filter((entry) => entry.isFile && entry.name.endsWith(".md"))
    .map((entry) => join("docs", entry.name))
    .sort();
  return ["README.md", ...docs];
}

function blocks(page: string): Block[] {
  const lines = Deno.readTextFileSync(join(root, page)).split("\n");
  const found: Block[] = [];
  // A fence may be indented (a block inside a list item): its lines lose that indent.
  let open: { line: number; indent: string; info: string; body: string[] } | null = null;
  lines.forEach((text, index) => {
    const fence = /^( *)```(.*)$/.exec(text);
    if (open === null) {
      if (fence) open = { line: index + 1, indent: fence[1]!, info: fence[2]!.trim(), body: [] };
    } else if (text === `${open.indent}\`\`\``) {
      found.push({ page, line: open.line, info: open.info, code: open.body.join("\n") + "\n" });
      open = null;
    } else {
      open.body.push(text.startsWith(open.indent) ? text.slice(open.indent.length) : text);
    }
  });
  assert.equal(open, null, `${page}: a code block is never closed`);
  return found;
}

/** The name a block asks to be saved under (`// app.ts: …`), if any. */
function fileName(block: Block): string | null {
  return /^\/\/ ([a-z0-9_]+\.ts)\b/.exec(block.code)?.[1] ?? null;
}

Deno.test("every code block in README.md and docs/ names a language the docs check", () => {
  const unknown = pages().flatMap(blocks).filter((block) => !languages.has(block.info));
  assert.deepEqual(
    unknown.map((block) => `${block.page}:${block.line}: \`\`\`${block.info}`),
    [],
    `use one of ${[...languages].join(", ")} (\`ts ignore\` would skip the check)`,
  );
});

Deno.test("every json block in README.md and docs/ holds one JSON value per line", () => {
  for (const block of pages().flatMap(blocks).filter((block) => block.info === "json")) {
    block.code.split("\n").filter((line) => line.trim() !== "").forEach((line, index) => {
      assert.doesNotThrow(
        () => JSON.parse(line),
        `${block.page}:${block.line + 1 + index}: not JSON`,
      );
    });
  }
});

/** The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces as `-`. */
function anchors(text: string): Set<string> {
  const headings = text.split("\n").filter((line) => /^#{1,6} /.test(line));
  return new Set(
    headings.map((line) =>
      line.replace(/^#+ /, "").toLowerCase().replace(/[^\p{L}\p{N} _-]/gu, "").replaceAll(" ", "-")
    ),
  );
}

Deno.test("every relative link in README.md and docs/ points to a file and heading of the project", () => {
  const broken: string[] = [];
  for (const page of pages()) {
    const text = Deno.readTextFileSync(join(root, page));
    for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      if (/^[a-z]+:/.test(target!)) continue;
      const [file, anchor] = target!.split("#");
      const path = file === "" ? join(root, page) : join(root, dirname(page), file!);
      try {
        Deno.statSync(path);
      } catch {
        broken.push(`${page}: ${target}`);
        continue;
      }
      if (anchor !== undefined && !anchors(Deno.readTextFileSync(path)).has(anchor)) {
        broken.push(`${page}: ${target} (no such heading)`);
      }
    }
  }
  assert.deepEqual(broken, []);
});

/** Every file under `dir` (relative to the root), as root-relative paths with `/`. */
function filesUnder(dir: string): string[] {
  return [...Deno.readDirSync(join(root, dir))].flatMap((entry) =>
    entry.isDirectory ? filesUnder(`${dir}/${entry.name}`) : [`${dir}/${entry.name}`]
  );
}

/**
 * Whether a test path a page names is one of `tests`: `tests/…` from the root; another path with
 * a folder from `tests/` (the reliability page's `faults/crash_test.ts`); a bare name anywhere
 * under `tests/`. A `*` stands for any characters of one name.
 */
function namesTestFile(named: string, tests: readonly string[]): boolean {
  const pattern = (text: string) =>
    new RegExp(`^${text.split("*").map((part) => RegExp.escape(part)).join("[^/]*")}$`);
  if (!named.includes("/")) {
    return tests.some((path) => pattern(named).test(path.slice(path.lastIndexOf("/") + 1)));
  }
  const full = pattern(named.startsWith("tests/") ? named : `tests/${named}`);
  return tests.some((path) => full.test(path));
}

Deno.test("every test file README.md and docs/ name in a code span exists", () => {
  const tests = filesUnder("tests");
  const stale: string[] = [];
  for (const page of pages()) {
    // Fenced blocks are left out: their test files are the reader's own (`// signup_test.ts`).
    const text = Deno.readTextFileSync(join(root, page)).replace(/^( *)```[\s\S]*?^\1```$/gm, "");
    // A span may wrap onto the next line.
    for (const { 1: span, index } of text.matchAll(/`([^`]+)`/g)) {
      for (const [named] of span!.matchAll(/[\w.*/-]*_test\.ts\b/g)) {
        if (namesTestFile(named, tests)) continue;
        stale.push(`${page}: ${named} (near "${text.slice(index, index + 60).split("\n")[0]}")`);
      }
    }
  }
  assert.ok(tests.length > 0);
  assert.deepEqual(stale, [], "a page names a test file that does not exist");
});

Deno.test("docs/working.md names every command the CLI's help lists (the schedule commands: docs/schedules.md)", async () => {
  const { stdout } = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--quiet", join(root, "src/cli.ts"), "help"],
    env: { NO_COLOR: "1" },
  }).output();
  const help = new TextDecoder().decode(stdout);
  const listed = help.split("Commands:\n")[1]!.split("\n\n")[0]!.split("\n")
    .map((line) => line.trim().split(/\s/)[0]!);
  assert.ok(listed.includes("work") && listed.includes("move"), help);
  const named = (page: string) =>
    new Set(
      [...Deno.readTextFileSync(join(root, page)).matchAll(/`([a-z:-]+)[ `]/g)].map((m) => m[1]!),
    );
  const working = named("docs/working.md");
  const schedules = named("docs/schedules.md");
  const missing = listed.filter((command) =>
    !(command.startsWith("schedule") ? schedules : working).has(command)
  );
  assert.deepEqual(missing, []);
});

Deno.test("docs/working.md's sample of work's JSON lines has a line of each event it prints", () => {
  const printed = [
    ...Deno.readTextFileSync(join(root, "src/cli/job_log.ts")).matchAll(/event: "([a-z:]+)"/g),
  ].map((match) => match[1]!);
  assert.ok(printed.includes("worker:stopping"));
  const sample = blocks("docs/working.md").filter((block) => block.info === "json")
    .flatMap((block) => block.code.split("\n").filter((line) => line.trim() !== ""))
    .map((line) => JSON.parse(line).event);
  assert.deepEqual(printed.filter((event) => !sample.includes(event)), []);
});

Deno.test("every ts block in README.md and docs/ type-checks against this checkout", async () => {
  await using temp = await tempDir();
  const config = JSON.parse(Deno.readTextFileSync(join(root, "deno.json")));
  const imports: Record<string, string> = { ...config.imports };
  for (const [entry, path] of Object.entries(config.exports as Record<string, string>)) {
    imports[join(config.name, entry)] = new URL(path, `file://${root}`).href;
  }
  Deno.writeTextFileSync(
    join(temp.dir, "deno.json"),
    JSON.stringify({ imports, compilerOptions: config.compilerOptions }),
  );
  // A copy of the lock: the check resolves the same versions and never writes the project's.
  Deno.copyFileSync(join(root, "deno.lock"), join(temp.dir, "deno.lock"));
  const files = new Map<string, Block>();
  for (const page of pages()) {
    const folder = join(temp.dir, page.replace(/[/.]/g, "_"));
    Deno.mkdirSync(folder);
    for (const block of blocks(page).filter((block) => block.info === "ts")) {
      const path = join(folder, fileName(block) ?? `block_${block.line}.ts`);
      assert.ok(!files.has(path), `${page}:${block.line}: a second block named ${path}`);
      Deno.writeTextFileSync(path, block.code);
      files.set(path, block);
    }
  }
  const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
    args: [
      "check",
      "--quiet",
      `--config=${join(temp.dir, "deno.json")}`,
      `--lock=${join(temp.dir, "deno.lock")}`,
      ...files.keys(),
    ],
    env: { NO_COLOR: "1" },
  }).output();
  let report = new TextDecoder().decode(stdout) + new TextDecoder().decode(stderr);
  for (const [path, block] of files) {
    report = report.replaceAll(`file://${path}`, `${block.page} (block at line ${block.line})`);
  }
  report = report.replaceAll(`file://${root}`, "");
  assert.equal(code, 0, `the docs' code does not type-check:\n${report}`);
  assert.ok(files.size > 0, "no ts block found");
});
