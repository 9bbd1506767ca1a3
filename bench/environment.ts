/**
 * The machine and versions a bench ran on, printed with its figures: they
 * mean little without them.
 *
 * @module
 */
import { DatabaseSync } from "node:sqlite";

/** Versions and machine of this run. */
export interface Environment {
  /** `Deno.version.deno`. */
  readonly deno: string;
  /** `Deno.version.v8`. */
  readonly v8: string;
  /** The SQLite library `node:sqlite` is built on (`sqlite_version()`). */
  readonly sqlite: string;
  /** Logical cores, from `navigator.hardwareConcurrency`. */
  readonly cores: number;
  /** `Deno.build.os`. */
  readonly os: string;
  /** `Deno.build.arch`. */
  readonly arch: string;
  /**
   * The machine's 1-minute load average when the bench started
   * (`Deno.loadavg()`): above the core count, other work competed for them.
   */
  readonly loadAverage: number;
}

/** Reads the versions and the machine's core count. */
export function readEnvironment(): Environment {
  const db = new DatabaseSync(":memory:");
  let sqlite: string;
  try {
    sqlite = String(db.prepare("SELECT sqlite_version() AS version").get()!.version);
  } finally {
    db.close();
  }
  return {
    deno: Deno.version.deno,
    v8: Deno.version.v8,
    sqlite,
    cores: navigator.hardwareConcurrency,
    os: Deno.build.os,
    arch: Deno.build.arch,
    loadAverage: Deno.loadavg()[0] ?? 0,
  };
}

/**
 * One line: `Deno 2.9.6 (V8 …) · SQLite 3.x · 2 cores (navigator.hardwareConcurrency) ·
 * linux x86_64 · load average 0.4 at start`.
 */
export function formatEnvironment(environment: Environment): string {
  const { deno, v8, sqlite, cores, os, arch, loadAverage } = environment;
  return `Deno ${deno} (V8 ${v8}) · SQLite ${sqlite} · ${cores} cores ` +
    `(navigator.hardwareConcurrency) · ${os} ${arch} · load average ${
      loadAverage.toFixed(1)
    } at start`;
}
