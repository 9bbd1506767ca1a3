/**
 * The durable steps of one attempt, where its handler runs: `ctx.step`,
 * `ctx.sleep`, `ctx.sleepUntil` and `ctx.waitFor`. Each call takes the next
 * call position and a key (`name`, `name#2`, …); a memo recorded at that
 * position by an earlier attempt is returned instead of running the step
 * again, and a memo that does not match what the code asks for fails the
 * job for good (`StepMismatchError`). New memos go to the store through the
 * attempt's {@linkcode StepPort} (the runner's settle path, fenced by the
 * claim's token) before the step resolves. A sleep or a wait that must wait
 * parks the attempt: {@linkcode DurableSteps.parkRequest} says how, the
 * `onPark` callback hears it, and the executor ends the attempt with it.
 *
 * @internal
 * @module
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { MAX_DELAY_MS } from "../backoff.ts";
import { assertSealedIfEncrypted, isEncryptedPayload, type PayloadCipher } from "../encryption.ts";
import {
  asError,
  PayloadIntegrityError,
  PermanentError,
  StepMismatchError,
  ValidationError,
} from "../errors.ts";
import { assertSchema, type JobDefinition, type PayloadSchema } from "../job.ts";
import { holdsTransform, jsonChange } from "../json_safe.ts";
import { dataDetail, schemaRefusal } from "../schema_issues.ts";
import { assertStepName, signalSealedAs, stepSealedAs } from "../admin/steps.ts";
import type { StepOptions, WaitOptions } from "../steps.ts";
import { optionBag, optionNames } from "../option_bags.ts";
import { shown } from "../shown.ts";
import type { JobStepsRow, StepRow, StepWrite } from "../stores/store.ts";
import type { ParkRequest, StepPort } from "./executor.ts";

const encoder = new TextEncoder();

/** The options `ctx.step` takes. */
const STEP_OPTIONS = optionNames<StepOptions>()(["timeoutMs", "maxAttempts", "backoff", "output"]);
/** The options `ctx.waitFor` takes. */
const WAIT_OPTIONS = optionNames<WaitOptions>()(["timeoutMs", "schema"]);

/**
 * The step whose function runs where the code is: a step, sleep or wait
 * called from there would take a call position that a later run, reading
 * that step's memo back without calling its function, never reaches.
 */
const insideStep = new AsyncLocalStorage<{ readonly attempt: symbol; readonly key: string }>();

/** The longest a timer can wait (a longer `setTimeout` fires at once): a step's timeout and backoff. */
const MAX_TIMER_MS = 2_147_483_647;

/** The durable steps of one attempt of one job. */
export class DurableSteps {
  readonly #port: StepPort | undefined;
  readonly #job: JobDefinition;
  readonly #id: number;
  readonly #attempt: number;
  readonly #signal: AbortSignal;
  readonly #cipher: PayloadCipher | null;
  /** The job's memos and mailbox, read when the first step is reached. */
  #stored: Promise<Stored> | null = null;
  #seq = 0;
  readonly #uses = new Map<string, number>();
  /** This attempt in {@linkcode insideStep}: a token, so a timer a step started keeps no memos alive. */
  readonly #inside = Symbol("attempt");
  /** How a sleep or a wait parked the attempt; null while it runs. */
  #parkRequest: ParkRequest | null = null;
  /** Set once the attempt's handler returned, threw or parked (see {@linkcode DurableSteps.end}). */
  #ended = false;
  /** Hears the park, once the executor listens for it. */
  onPark: ((request: ParkRequest) => void) | undefined = undefined;

  /**
   * `port` is absent for a job run now without being stored (`dispatchSync`):
   * its steps then run without memos, and it cannot sleep or wait.
   */
  constructor(
    port: StepPort | undefined,
    job: JobDefinition,
    id: number,
    attempt: number,
    signal: AbortSignal,
    cipher: PayloadCipher | null,
  ) {
    this.#port = port;
    this.#job = job;
    this.#id = id;
    this.#attempt = attempt;
    this.#signal = signal;
    this.#cipher = cipher;
  }

  /** How a sleep or a wait parked the attempt, or null while none did. */
  get parkRequest(): ParkRequest | null {
    return this.#parkRequest;
  }

  /**
   * Ends the attempt (its handler returned, threw or parked): a call of its
   * steps still going, or made later (by code the handler did not await),
   * never settles, as a parked attempt's calls never return. Its function
   * does not run if it had not yet, and nothing more is recorded: a
   * rejection nobody awaits would end the process (or the Web Worker) and
   * every job running in it. The runner's step port (`#stepPort` in
   * src/runner/runner.ts) holds back the reads and writes of an attempt it
   * saw end as well, for a Web Worker's calls already on their way.
   */
  end(): void {
    this.#ended = true;
  }

  /** `work`'s outcome while the attempt runs; past its end or its park, a promise that never settles. */
  async #live<T>(work: () => Promise<T>): Promise<T> {
    if (this.#over) return await new Promise<never>(() => {});
    try {
      const value = await work();
      if (this.#over) return await new Promise<never>(() => {});
      return value;
    } catch (error) {
      if (this.#over) return await new Promise<never>(() => {});
      throw error;
    }
  }

  /** Whether the attempt ended or parked. */
  get #over(): boolean {
    return this.#ended || this.#parkRequest !== null;
  }

  /** `ctx.step(name, fn, options)`. */
  step<T, O = T>(
    name: string,
    fn: (signal: AbortSignal) => T | Promise<T>,
    options: StepOptions<T, O> = {},
  ): Promise<O> {
    return this.#live(() => this.#step(name, fn, options));
  }

  async #step<T, O>(
    name: string,
    fn: (signal: AbortSignal) => T | Promise<T>,
    options: StepOptions<T, O>,
  ): Promise<O> {
    const where = "ctx.step";
    assertStepName(name, where, "the step's name");
    if (typeof fn !== "function") {
      throw new TypeError(
        `${where}(${JSON.stringify(name)}): fn must be a function: got ${typeof fn}`,
      );
    }
    options = optionBag(options, `${where}(${JSON.stringify(name)})`, STEP_OPTIONS) ?? {};
    if (options.output !== undefined) {
      assertSchema(options.output, `${where}(${JSON.stringify(name)})`, "output");
    }
    const tries = checkedTries(options, name);
    const timeoutMs = checkedDurationMs(
      options.timeoutMs,
      `${where}(${JSON.stringify(name)})`,
      "timeoutMs",
      MAX_TIMER_MS,
    );
    const { seq, key } = this.#next(name);
    const memo = await this.#memo(seq, key, "step");
    if (memo !== undefined) {
      return await this.#openOutput(key, memo.output, options.output) as O;
    }
    const startedAt = performance.now();
    const ended = timeoutMs === undefined ? null : this.#port?.timeStep(key, timeoutMs);
    let value: T;
    try {
      value = await this.#runTries(name, key, fn, tries, options.backoff);
    } finally {
      ended?.(performance.now() - startedAt >= timeoutMs!);
    }
    const { output, readBack } = await this.#sealOutput(key, value, options.output);
    await this.#record({
      seq,
      key,
      kind: "step",
      output,
      until: null,
      done: true,
      attempt: this.#attempt,
      durationMs: Math.round(performance.now() - startedAt),
    });
    // What every later run reads back, so this run goes on with the same value.
    return readBack as O;
  }

  /** `ctx.sleep(name, ms)`. */
  sleep(name: string, ms: number): Promise<void> {
    return this.#live(() => {
      assertStepName(name, "ctx.sleep", "the sleep's name");
      const where = `ctx.sleep(${JSON.stringify(name)})`;
      if (ms === undefined) throw new RangeError(`${where}: ms is required: how long to sleep`);
      return this.#sleep(name, { delayMs: checkedDurationMs(ms, where, "ms")! });
    });
  }

  /** `ctx.sleepUntil(name, until)`. */
  sleepUntil(name: string, until: Date | number): Promise<void> {
    return this.#live(() => {
      assertStepName(name, "ctx.sleepUntil", "the sleep's name");
      const where = `ctx.sleepUntil(${JSON.stringify(name)})`;
      const time = until instanceof Date ? until.getTime() : until;
      if (typeof time !== "number" || !Number.isFinite(time)) {
        throw new RangeError(
          `${where}: until must be a valid Date or ms since the epoch: got ${shown(until)}`,
        );
      }
      // A whole ms, never before the time asked (a store keeps times as whole ms).
      return this.#sleep(name, { untilMs: Math.ceil(time) });
    });
  }

  /** `ctx.waitFor(name, options)`. */
  waitFor<T>(name: string, options: WaitOptions<T> = {}): Promise<T | null> {
    return this.#live(() => this.#waitFor(name, options));
  }

  async #waitFor<T>(name: string, options: WaitOptions<T>): Promise<T | null> {
    assertStepName(name, "ctx.waitFor", "the signal's name");
    const where = `ctx.waitFor(${JSON.stringify(name)})`;
    options = optionBag(options, where, WAIT_OPTIONS) ?? {};
    if (options.schema !== undefined) assertSchema(options.schema, where, "schema");
    const timeoutMs = checkedDurationMs(options.timeoutMs, where, "timeoutMs");
    this.#requirePort(where);
    const { seq, key } = this.#next(name);
    const memo = await this.#memo(seq, key, "wait");
    if (memo?.done === true) return this.#openSignal(name, memo.output, options.schema);
    const stored = await this.#stored!;
    const signal = stored.signals.find((row) => row.name === name && !stored.taken.has(row.id));
    if (signal !== undefined) {
      stored.taken.add(signal.id);
      const value = await this.#openSignal(name, signal.payload, options.schema);
      await this.#record({ ...this.#waitWrite(seq, key, signal.payload), takesSignal: signal.id });
      return value;
    }
    if (memo !== undefined && memo.until !== null) {
      // Parked until its timeout and claimed again without a signal: the timeout passed.
      await this.#record(this.#waitWrite(seq, key, "null"));
      return null;
    }
    return await this.#parkAt({
      delayMs: timeoutMs ?? null,
      step: {
        seq,
        key,
        kind: "wait",
        output: null,
        done: false,
        attempt: this.#attempt,
        durationMs: 0,
      },
    });
  }

  /** A sleep for `wake.delayMs`, or until `wake.untilMs` (the runner's clock decides how long). */
  async #sleep(
    name: string,
    wake: { readonly delayMs: number } | { readonly untilMs: number },
  ): Promise<void> {
    this.#requirePort(`ctx.sleep(${JSON.stringify(name)})`);
    const { seq, key } = this.#next(name);
    const memo = await this.#memo(seq, key, "sleep");
    if (memo !== undefined) return; // parked until its wake time, and claimed again after it
    if ("delayMs" in wake && wake.delayMs === 0) {
      await this.#record({
        seq,
        key,
        kind: "sleep",
        output: null,
        until: null,
        done: true,
        attempt: this.#attempt,
        durationMs: 0,
      });
      return;
    }
    await this.#parkAt({
      ...("delayMs" in wake ? { delayMs: wake.delayMs } : { delayMs: null, untilMs: wake.untilMs }),
      step: {
        seq,
        key,
        kind: "sleep",
        output: null,
        done: true,
        attempt: this.#attempt,
        durationMs: 0,
      },
    });
  }

  #waitWrite(seq: number, key: string, output: string): StepWrite {
    return {
      seq,
      key,
      kind: "wait",
      output,
      until: null,
      done: true,
      attempt: this.#attempt,
      durationMs: 0,
    };
  }

  /** Parks the attempt: the executor ends it with `request`; the handler's call never returns. */
  #parkAt(request: ParkRequest): Promise<never> {
    // The first park ends the attempt; another started beside it (`Promise.all` of two waits)
    // never settles, and a later run reaches it again.
    if (this.#parkRequest === null) {
      this.#parkRequest = request;
      this.onPark?.(request);
    }
    return new Promise<never>(() => {});
  }

  #requirePort(where: string): StepPort {
    if (this.#port === undefined) {
      throw new TypeError(
        `${where}: a job run now without being stored (dispatchSync) cannot sleep or wait`,
      );
    }
    return this.#port;
  }

  /** The next call position, and the key of `name` there (`name#n` from its second use). */
  #next(name: string): { seq: number; key: string } {
    const outer = insideStep.getStore();
    if (outer?.attempt === this.#inside) {
      throw new PermanentError(
        `ctx: ${JSON.stringify(name)} was called inside step ${
          JSON.stringify(outer.key)
        } (its function, or code it started): steps do not nest (a later run reads ${
          JSON.stringify(outer.key)
        } back without calling its function, so the inner call would not come again); call it before or after that step`,
      );
    }
    const uses = (this.#uses.get(name) ?? 0) + 1;
    this.#uses.set(name, uses);
    return { seq: ++this.#seq, key: uses === 1 ? name : `${name}#${uses}` };
  }

  /**
   * The memo recorded at `seq`, checked against what the code asks for
   * there; undefined when none was recorded (nor `key` elsewhere).
   */
  async #memo(seq: number, key: string, kind: StepRow["kind"]): Promise<StepRow | undefined> {
    if (this.#port === undefined) return undefined;
    const stored = await (this.#stored ??= this.#load());
    const memo = stored.bySeq.get(seq);
    if (memo !== undefined) {
      if (memo.key !== key || memo.kind !== kind) {
        throw new StepMismatchError(
          this.#job.name,
          seq,
          `${memo.kind} ${JSON.stringify(memo.key)}`,
          `${kind} ${JSON.stringify(key)}`,
        );
      }
      return memo;
    }
    const elsewhere = stored.byKey.get(key);
    if (elsewhere !== undefined) {
      throw new StepMismatchError(this.#job.name, seq, null, `${kind} ${JSON.stringify(key)}`);
    }
    return undefined;
  }

  async #load(): Promise<Stored> {
    const row: JobStepsRow = await this.#port!.load();
    return {
      bySeq: new Map(row.steps.map((step) => [step.seq, step])),
      byKey: new Map(row.steps.map((step) => [step.key, step])),
      signals: row.signals,
      taken: new Set(),
    };
  }

  async #record(write: StepWrite): Promise<void> {
    if (this.#port === undefined) return;
    if (this.#signal.aborted) throw asError(this.#signal.reason);
    if (this.#over) return await new Promise<never>(() => {}); // never recorded (see end())
    await this.#port.record(write);
  }

  /** Runs `fn` up to `tries` times within the attempt, waiting `backoff` between. */
  async #runTries<T>(
    name: string,
    key: string,
    fn: (signal: AbortSignal) => T | Promise<T>,
    tries: number,
    backoff: StepOptions["backoff"],
  ): Promise<T> {
    for (let run = 1;; run++) {
      if (this.#signal.aborted) throw asError(this.#signal.reason);
      // Its attempt ended since the first try (a step the handler did not await): no try more.
      if (run > 1 && this.#over) return await new Promise<never>(() => {});
      try {
        return await insideStep.run({ attempt: this.#inside, key }, () => fn(this.#signal));
      } catch (error) {
        if (run >= tries || error instanceof PermanentError || this.#signal.aborted) throw error;
        await abortableDelay(retryWait(name, backoff, run), this.#signal);
      }
    }
  }

  /**
   * A step's value as stored (`output`): JSON of what `schema` outputs,
   * sealed for an encrypted job; and `readBack`, what every run reads back
   * from it, this one included. An output that would fail its read-back
   * (see {@linkcode readBackSchema}) is refused here, never recorded.
   */
  async #sealOutput(
    key: string,
    value: unknown,
    schema: PayloadSchema | undefined,
  ): Promise<{ output: string | null; readBack: unknown }> {
    const job = this.#job;
    const action = { action: `store step ${JSON.stringify(key)} of` };
    let checked: unknown = value;
    if (schema !== undefined) {
      const result = schema.safeParse(value);
      if (!result.success) {
        const { detail, issues, options } = schemaRefusal(job, "step output", result.error);
        throw new ValidationError(job.name, detail, issues, { ...action, ...options });
      }
      checked = result.data;
    }
    if (checked === undefined) return { output: null, readBack: undefined };
    const change = jsonChange(checked, "step output");
    if (change !== null) {
      const { detail } = dataDetail(job, change);
      throw new ValidationError(
        job.name,
        `step output does not survive JSON: ${detail}`,
        [],
        action,
      );
    }
    const json = JSON.stringify(checked);
    const bytes = json.length * 3 <= job.maxOutputBytes ? json.length : encoder.encode(json).length;
    if (bytes > job.maxOutputBytes) {
      throw new ValidationError(
        job.name,
        `step output is ${bytes} bytes of JSON: over the cap of ${job.maxOutputBytes} bytes (maxOutputBytes)`,
        [],
        action,
      );
    }
    const readBack = readBackOutput(JSON.parse(json), schema, job);
    if (!readBack.ok) {
      throw new ValidationError(
        job.name,
        `step output would fail its output schema once read back from JSON: ${readBack.issues} (JSON drops an object property holding undefined: only an .optional() one reads back)`,
        [],
        action,
      );
    }
    if (!job.encrypted) return { output: json, readBack: readBack.value };
    if (this.#cipher === null) {
      throw new PayloadIntegrityError(job.name, "it must be encrypted, and there is no APP_KEY", {
        of: "step output",
      });
    }
    return {
      output: await this.#cipher.encrypt(stepSealedAs(this.#id, key), json),
      readBack: readBack.value,
    };
  }

  /** A recorded step's value, opened and read back (and checked, see {@linkcode readBackSchema}). */
  async #openOutput(
    key: string,
    stored: string | null,
    schema: PayloadSchema | undefined,
  ): Promise<unknown> {
    if (stored === null) return undefined;
    const json = await this.#open(
      stored,
      stepSealedAs(this.#id, key),
      "step output",
      this.#job.encrypted,
    );
    const sealed = { encrypted: isEncryptedPayload(stored) };
    const value = this.#parsed(json, "step output", sealed);
    const readBack = readBackOutput(value, schema, sealed);
    if (!readBack.ok) {
      // No retry can change what was recorded: the job fails for good.
      throw new PayloadIntegrityError(
        this.#job.name,
        `it does not match the step's output schema: ${readBack.issues}`,
        { of: "step output" },
      );
    }
    return readBack.value;
  }

  /** A signal's payload as the wait resolves it (null for a timeout's `"null"`). */
  async #openSignal<T>(
    name: string,
    stored: string | null,
    schema: PayloadSchema<T> | undefined,
  ): Promise<T | null> {
    if (stored === null || stored === "null") return null;
    const json = await this.#open(
      stored,
      signalSealedAs(this.#id, name),
      "signal",
      this.#job.encrypted,
    );
    const sealed = { encrypted: isEncryptedPayload(stored) };
    const value = this.#parsed(json, "signal", sealed);
    if (schema === undefined) return value as T;
    const result = schema.safeParse(value);
    if (!result.success) {
      // No retry can change a signal already sent: the job fails for good.
      const { detail, options } = schemaRefusal(sealed, "signal", result.error);
      throw new PayloadIntegrityError(
        this.#job.name,
        `it does not match the wait's schema: ${detail}`,
        { of: "signal", ...options },
      );
    }
    return result.data;
  }

  async #open(
    stored: string,
    boundTo: string,
    what: "step output" | "signal",
    mustBeSealed: boolean,
  ): Promise<string> {
    const name = this.#job.name;
    if (isEncryptedPayload(stored)) {
      if (this.#cipher === null) {
        throw new PayloadIntegrityError(name, "it is encrypted, and this process has no APP_KEY", {
          of: what,
        });
      }
      return await this.#cipher.decrypt(boundTo, stored, { job: name, what });
    }
    assertSealedIfEncrypted({ name, encrypted: mustBeSealed }, stored, what);
    return stored;
  }

  /** `json` parsed; an error says nothing taken from it when it was `sealed`. */
  #parsed(json: string, what: "step output" | "signal", sealed: { encrypted: boolean }): unknown {
    try {
      return JSON.parse(json);
    } catch (error) {
      const { detail } = dataDetail(sealed, asError(error).message);
      throw new PayloadIntegrityError(this.#job.name, `not JSON: ${detail}`, { of: what });
    }
  }
}

/**
 * What a step's recorded output, parsed from its JSON, reads back as: the
 * output of {@linkcode readBackSchema}'s check, or the parsed value as
 * recorded when there is no check; or the issues when the check fails
 * (none taken from the value when `secret` is encrypted). The run that
 * records an output reads it back this way too, so every run gets the
 * same value.
 */
function readBackOutput(
  recorded: unknown,
  schema: PayloadSchema | undefined,
  secret: { readonly encrypted: boolean },
): { ok: true; value: unknown } | { ok: false; issues: string } {
  const check = readBackSchema(schema);
  if (check === undefined) return { ok: true, value: recorded };
  const result = check.safeParse(recorded);
  return result.success
    ? { ok: true, value: result.data }
    : { ok: false, issues: schemaRefusal(secret, "step output", result.error).detail };
}

const holdsTransformOf = new WeakMap<object, boolean>();

/**
 * The schema that checks a step's output when it is read back: the step's
 * `output` schema, unless it holds a transform or a pipe. Such a schema
 * outputs what it does not parse (`z.string().transform((s) => s.length)`
 * records a number), so its output was checked when it was recorded, and
 * is read back as recorded.
 */
function readBackSchema(schema: PayloadSchema | undefined): PayloadSchema | undefined {
  if (schema === undefined) return undefined;
  let transforms = holdsTransformOf.get(schema);
  if (transforms === undefined) {
    transforms = holdsTransform(schema);
    holdsTransformOf.set(schema, transforms);
  }
  return transforms ? undefined : schema;
}

/** The memos and mailbox read for an attempt, and the signals its waits took. */
interface Stored {
  readonly bySeq: Map<number, StepRow>;
  readonly byKey: Map<string, StepRow>;
  readonly signals: JobStepsRow["signals"];
  readonly taken: Set<number>;
}

function checkedTries(options: StepOptions<unknown>, name: string): number {
  const tries = options.maxAttempts ?? 1;
  if (!Number.isSafeInteger(tries) || tries < 1 || tries > 1_000) {
    throw new RangeError(
      `ctx.step(${JSON.stringify(name)}): maxAttempts must be an integer from 1 to 1000: got ${
        shown(tries)
      }`,
    );
  }
  const backoff = options.backoff;
  if (backoff !== undefined && typeof backoff !== "function" && !Array.isArray(backoff)) {
    throw new TypeError(
      `ctx.step(${JSON.stringify(name)}): backoff must be an array of delays or a function`,
    );
  }
  // A list is checked whole before the first run, not when a retry comes to a bad delay.
  if (Array.isArray(backoff)) {
    for (let retry = 1; retry <= Math.max(backoff.length, 1); retry++) {
      retryWait(name, backoff, retry);
    }
  }
  return tries;
}

/** A duration option: undefined when absent, else a finite number of ms from 0 to 100 years. */
function checkedDurationMs(
  ms: unknown,
  where: string,
  what: string,
  max: number = MAX_DELAY_MS,
): number | undefined {
  if (ms === undefined) return undefined;
  if (typeof ms !== "number" || !Number.isFinite(ms) || ms < 0 || ms > max) {
    throw new RangeError(
      `${where}: ${what} must be a number of ms from 0 to ${max}: got ${shown(ms)}`,
    );
  }
  return Math.round(ms);
}

/** The wait before retry `run` of a step inside its attempt. */
function retryWait(name: string, backoff: StepOptions["backoff"], run: number): number {
  const wait = backoff === undefined
    ? 1_000 * run
    : typeof backoff === "function"
    ? backoff(run)
    : backoff[Math.min(run, backoff.length) - 1];
  if (typeof wait !== "number" || !Number.isFinite(wait) || wait < 0 || wait > MAX_TIMER_MS) {
    throw new RangeError(
      `ctx.step(${
        JSON.stringify(name)
      }): backoff for retry ${run} must be a delay from 0 to ${MAX_TIMER_MS} ms: got ${
        shown(wait)
      }`,
    );
  }
  return wait;
}

/** Waits `ms`, or rejects with the signal's reason once it aborts. */
function abortableDelay(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(timer);
      reject(asError(signal.reason));
    };
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal.addEventListener("abort", onAbort, { once: true });
  });
}
