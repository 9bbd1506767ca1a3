/**
 * The `key:generate` command: prints a fresh key for `APP_KEY`.
 *
 * @module
 * @internal
 */
import { generateAppKey } from "../encryption.ts";
import { expectPositionals } from "./args.ts";
import type { Command } from "./command.ts";

/** `key:generate`: one line, the base64 of 32 random bytes. */
export const keyGenerate: Command = {
  name: "key:generate",
  operands: "",
  summary: "print a new APP_KEY for encrypted payloads",
  description:
    "Prints the base64 of 32 random bytes, a key for APP_KEY. To rotate, move the old key to\nAPP_PREVIOUS_KEYS (comma-separated) so the jobs it encrypted still open, and set the new one.",
  flags: {},
  run(args) {
    expectPositionals(args, 0, 0, "");
    console.log(generateAppKey());
    return Promise.resolve(0);
  },
};
