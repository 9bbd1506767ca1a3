/**
 * Rolling upgrades, whatever the store: which schema steps a database lacks,
 * each one's kind, and which live workers a contract step would break.
 *
 * An *expand* step leaves code of the step before working (its workers keep
 * running while it is applied); a *contract* step does not, so it is applied
 * only once no worker built for an older step has been seen within
 * {@linkcode LIVE_WORKER_WINDOW_MS}, unless forced. Code older than the
 * database opens it while every newer step is an expand step, and refuses
 * ({@linkcode OutdatedCodeError}) past a contract step; a running worker
 * learns the same from its heartbeat ({@linkcode SchemaNews}).
 *
 * @module
 */
import type { Migration, SchemaStepKind } from "../../migrations/migration.ts";
import { OutdatedCodeError } from "../errors.ts";
import { optionBag, optionNames } from "../option_bags.ts";
import { shown } from "../shown.ts";

export type { SchemaStepKind } from "../../migrations/migration.ts";

/**
 * How long after its last heartbeat a worker still counts as live for a
 * contract step: three heartbeats (a worker writes one at most 10 s apart).
 */
export const LIVE_WORKER_WINDOW_MS = 30_000;

/** How a store applies the schema steps its database lacks. */
export interface MigrateOptions {
  /**
   * Apply a contract step even while workers built for an older step were
   * seen within the heartbeat window (they stop claiming and exit once their
   * next heartbeat sees the step; the jobs they run may fail on the new schema).
   * @default {false}
   */
  readonly force?: boolean;
  /**
   * How long to wait, in ms, for the workers of older code that block a
   * contract step to go (a worker removes its row when it stops; one that
   * died ages out of the window {@linkcode LIVE_WORKER_WINDOW_MS} after its
   * last heartbeat) before refusing. Looked at again every second.
   * @default {0}
   */
  readonly waitMs?: number;
}

/** Every option of {@linkcode MigrateOptions}: any other is refused by name. */
const MIGRATE_OPTIONS = optionNames<MigrateOptions>()(["force", "waitMs"]);

/** A step recorded in the database, with its kind when the database records kinds. */
export interface AppliedStep {
  /** Number of the step. */
  readonly version: number;
  /** Its kind, or null when it was applied before kinds were recorded and not yet filled in. */
  readonly kind: SchemaStepKind | null;
}

/** A worker seen within the heartbeat window whose code is older than a step. */
export interface OlderWorker {
  /** The machine it runs on. */
  readonly host: string;
  /** Its process id. */
  readonly pid: number;
  /** The schema step its code was built for; null for code older than step 18, which did not say. */
  readonly schemaStep: number | null;
  /** Its last heartbeat. */
  readonly lastSeenAt: Date;
}

/** One step a database lacks. */
export interface PlannedStep {
  /** Number of the step. */
  readonly version: number;
  /** Whether older code keeps working on it. */
  readonly kind: SchemaStepKind;
  /** For a contract step, the live workers built for an older step (empty for an expand step). */
  readonly blockedBy: readonly OlderWorker[];
}

/** What migrating a database would do. */
export interface MigrationPlan {
  /** The newest step this code knows. */
  readonly codeStep: number;
  /** The newest step applied to the database (0 for a new one). */
  readonly databaseStep: number;
  /** The steps it lacks, oldest first. */
  readonly steps: readonly PlannedStep[];
}

/**
 * What a worker's heartbeat read of the database's schema: its newest step,
 * and the first contract step newer than the worker's code, if any.
 */
export interface SchemaNews {
  /** The schema step the worker's code was built for. */
  readonly codeStep: number;
  /** The newest step applied to the database. */
  readonly databaseStep: number;
  /** The first applied contract step newer than the code, or null while every newer step is an expand step. */
  readonly contractStep: number | null;
}

/**
 * The plan for a database with `applied` steps and `live` workers, for code
 * that knows `known`. Throws {@linkcode OutdatedCodeError} when the database
 * has a contract step newer than `known` (a step of unknown kind counts as one).
 */
export function planSteps(
  known: readonly Migration[],
  applied: readonly AppliedStep[],
  live: readonly OlderWorker[],
): MigrationPlan {
  const codeStep = known.at(-1)?.version ?? 0;
  const databaseStep = Math.max(0, ...applied.map((step) => step.version));
  const contractStep = firstContractAfter(codeStep, applied);
  if (contractStep !== null) {
    throw new OutdatedCodeError("open the queue database", {
      codeStep,
      databaseStep,
      contractStep,
    });
  }
  const done = new Set(applied.map((step) => step.version));
  const steps = known.filter((step) => !done.has(step.version)).map((step) => ({
    version: step.version,
    kind: step.kind,
    blockedBy: step.kind === "contract" ? live.filter((worker) => olderThan(worker, step)) : [],
  }));
  return { codeStep, databaseStep, steps };
}

/** The first of `applied` newer than `codeStep` that is not an expand step, or null. */
export function firstContractAfter(
  codeStep: number,
  applied: readonly AppliedStep[],
): number | null {
  const newer = applied.filter((step) => step.version > codeStep && step.kind !== "expand");
  return newer.length === 0 ? null : Math.min(...newer.map((step) => step.version));
}

/** The first step of `plan` that live older workers block, unless `options.force`. */
export function blockedStep(
  plan: MigrationPlan,
  options: MigrateOptions,
): PlannedStep | undefined {
  return options.force === true ? undefined : plan.steps.find((step) => step.blockedBy.length > 0);
}

/**
 * What a store calls a version of its schema, in messages: a SQL schema's
 * `"schema step"`, a Redis store's `"key layout"` (the key layout stands for
 * the schema there).
 */
export type StepNoun = "schema step" | "key layout";

/**
 * Checks the migrate options `given` (an unknown one, or a value of the
 * wrong type, is refused by name: every store's `migrate` option and
 * `migrate()` come here), then runs `attempt` (which applies the steps it
 * lacks, or nothing while a contract step is blocked, and answers its plan)
 * until no step is blocked, for up to `options.waitMs`; then throws,
 * listing the workers, if one still is, naming the step with `noun`.
 */
export async function migrateWaiting(
  attempt: () => Promise<MigrationPlan>,
  given: MigrateOptions,
  noun: StepNoun,
): Promise<MigrationPlan> {
  const options = optionBag(given, "migrate", MIGRATE_OPTIONS) ?? {};
  if (options.force !== undefined && typeof options.force !== "boolean") {
    throw new TypeError(`migrate: force must be true or false: got ${shown(options.force)}`);
  }
  const waitMs = options.waitMs ?? 0;
  if (!(Number.isFinite(waitMs) && waitMs >= 0)) {
    throw new RangeError(
      `migrate: waitMs must be a finite number of ms >= 0: got ${shown(waitMs)}`,
    );
  }
  const deadline = performance.now() + waitMs;
  for (;;) {
    const plan = await attempt();
    const blocked = blockedStep(plan, options);
    if (blocked === undefined) return plan;
    const leftMs = deadline - performance.now();
    if (leftMs <= 0) throw blockedError(blocked, noun);
    await new Promise((resolve) => setTimeout(resolve, Math.min(LOOK_AGAIN_MS, leftMs)));
  }
}

/** How often a contract step waiting for older workers looks again. */
const LOOK_AGAIN_MS = 1_000;

function blockedError(blocked: PlannedStep, noun: StepNoun): Error {
  const unaware = blocked.blockedBy.some((worker) => worker.schemaStep === null);
  return new Error(
    `Cannot apply ${noun} ${blocked.version}, a contract step: workers of older code were seen within the last ${
      LIVE_WORKER_WINDOW_MS / 1000
    } s and would break on it: ${
      blocked.blockedBy.map((worker) => describeWorker(worker, noun)).join("; ")
    }. Stop them, then migrate again (or start the new version, which applies it); --force (CLI) or migrate: { force: true } (API) applies it anyway, and they stop at their next heartbeat${
      unaware ? `, but for ${PRE_ROLLING[noun]}, which never learns of it: stop that yourself` : ""
    }`,
  );
}

/** How a worker whose row records no step is named: code from before rolling upgrades. */
const PRE_ROLLING: Readonly<Record<StepNoun, string>> = {
  "schema step": "code before step 18",
  "key layout": "code of key layout 1 from before rolling upgrades",
};

/**
 * A worker as messages show it: `host pid 123, schema step 18` (`code
 * before step 18`, or its Redis counterpart, where its row does not say).
 */
export function describeWorker(worker: OlderWorker, noun: StepNoun): string {
  const step = worker.schemaStep === null ? PRE_ROLLING[noun] : `${noun} ${worker.schemaStep}`;
  return `${worker.host} pid ${worker.pid}, ${step}`;
}

function olderThan(worker: OlderWorker, step: Migration): boolean {
  return worker.schemaStep === null || worker.schemaStep < step.version;
}
