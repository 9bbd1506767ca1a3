/**
 * The running attempts' timeouts, on one timer per runner instead of one
 * `setTimeout` per attempt (setting and clearing a timer costs about 2 µs,
 * which a quick job pays on every attempt). Attempts of the same
 * `timeoutMs` time out in the order they started, so each length keeps its
 * deadlines in a first-in, first-out lane, and the one timer waits for the
 * earliest head of a lane. An attempt that ends takes its deadline out at
 * once (it is marked, and skipped or compacted away); once no attempt runs,
 * the lanes are emptied (the timer stays set until it fires or the runner
 * closes them).
 *
 * @internal
 * @module
 */

/** An attempt's place in its lane, as {@linkcode AttemptTimeouts.add} hands it out. */
export interface Deadline<T> {
  /** When it times out (performance.now). */
  readonly at: number;
  /** The attempt; null once it ended or timed out. */
  item: T | null;
  /** The lane it waits in. */
  readonly lane: Lane<T>;
}

/** The deadlines of one `timeoutMs`, oldest first, from `head` on. */
interface Lane<T> {
  readonly timeoutMs: number;
  deadlines: Deadline<T>[];
  head: number;
  /** How many from `head` on still hold their attempt. */
  live: number;
}

/** A lane is compacted once it holds this many ended deadlines and more of them than live ones. */
const COMPACT_AT = 64;

/** Times out running attempts on one timer. */
export class AttemptTimeouts<T> {
  readonly #onTimeout: (item: T) => void;
  readonly #lanes = new Map<number, Lane<T>>();
  #live = 0;
  #timer: ReturnType<typeof setTimeout> | undefined;
  /** When the timer fires (performance.now); Infinity when none is set. */
  #timerAt = Infinity;

  /** Calls `onTimeout` with each attempt whose time is up and that has not ended. */
  constructor(onTimeout: (item: T) => void) {
    this.#onTimeout = onTimeout;
  }

  /** Starts `item`'s timeout of `timeoutMs`; pass what it returns to {@linkcode AttemptTimeouts.end}. */
  add(item: T, timeoutMs: number): Deadline<T> {
    let lane = this.#lanes.get(timeoutMs);
    if (lane === undefined) {
      lane = { timeoutMs, deadlines: [], head: 0, live: 0 };
      this.#lanes.set(timeoutMs, lane);
    }
    const deadline: Deadline<T> = { at: performance.now() + timeoutMs, item, lane };
    lane.deadlines.push(deadline);
    lane.live++;
    this.#live++;
    if (deadline.at < this.#timerAt) this.#setTimer(deadline.at);
    return deadline;
  }

  /** Ends `deadline`'s attempt without a timeout; a deadline that already ended is ignored. */
  end(deadline: Deadline<T>): void {
    if (deadline.item === null) return;
    deadline.item = null;
    this.#live--;
    if (this.#live === 0) {
      // Every deadline left has ended. The timer stays: the next attempts' deadlines come after
      // it, and a worker that starts a few jobs at a time would otherwise set a timer each time.
      this.#lanes.clear();
      return;
    }
    const { lane } = deadline;
    lane.live--;
    const ended = lane.deadlines.length - lane.head - lane.live;
    if (ended >= COMPACT_AT && ended > lane.live) {
      lane.deadlines = lane.deadlines.slice(lane.head).filter((kept) => kept.item !== null);
      lane.head = 0;
    }
  }

  /** Ends every attempt's deadline without a timeout and clears the timer. */
  close(): void {
    for (const lane of this.#lanes.values()) {
      for (const deadline of lane.deadlines) deadline.item = null;
    }
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#timerAt = Infinity;
    this.#lanes.clear();
    this.#live = 0;
  }

  #setTimer(at: number): void {
    clearTimeout(this.#timer);
    this.#timerAt = at;
    this.#timer = setTimeout(() => this.#fire(), Math.max(0, at - performance.now()));
  }

  /** Times out every attempt whose time is up, then waits for the next deadline. */
  #fire(): void {
    this.#timer = undefined;
    this.#timerAt = Infinity;
    const now = performance.now();
    const due: Deadline<T>[] = [];
    let next = Infinity;
    for (const lane of this.#lanes.values()) {
      const { deadlines } = lane;
      while (lane.head < deadlines.length) {
        const deadline = deadlines[lane.head]!;
        if (deadline.item !== null && deadline.at > now) break;
        lane.head++;
        if (deadline.item === null) continue;
        due.push(deadline);
        lane.live--;
        this.#live--;
      }
      if (lane.head === deadlines.length) this.#lanes.delete(lane.timeoutMs);
      else next = Math.min(next, deadlines[lane.head]!.at);
    }
    if (next < Infinity) this.#setTimer(next);
    // In deadline order across lanes, however late the timer fired.
    due.sort((a, b) => a.at - b.at);
    const items = due.map((deadline) => deadline.item!);
    for (const deadline of due) deadline.item = null;
    for (const item of items) this.#onTimeout(item);
  }
}
