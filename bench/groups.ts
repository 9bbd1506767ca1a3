/**
 * The groups of measurements `--only` can pick, and how a pick is widened
 * to the baselines its rows are compared with.
 *
 * @module
 */

/** Every group, in the order the report shows them. */
export const GROUPS = [
  "ceiling",
  "dispatch",
  "drain",
  "workers",
  "cpu",
  "steps",
  "fair",
  "pickup",
  "flows",
  "peers",
] as const;

/** One group of measurements. */
export type Group = typeof GROUPS[number];

/** The groups `--store postgres` measures (Web Workers and CPU-bound jobs do not depend on it). */
export const POSTGRES_GROUPS: readonly Group[] = [
  "ceiling",
  "dispatch",
  "drain",
  "steps",
  "pickup",
  "peers",
];

/**
 * The groups `--store redis` measures: each row beside BullMQ's on the same
 * server, but the durable steps', beside our own drain (BullMQ has none).
 */
export const REDIS_GROUPS: readonly Group[] = ["dispatch", "drain", "pickup", "steps"];

/** Whether `name` is a group. */
export function isGroup(name: string): name is Group {
  return (GROUPS as readonly string[]).includes(name);
}

/** What a measurement needs for {@linkcode withComparisons}. */
export interface Compared {
  /** Stable key. */
  readonly id: string;
  /** The id it is compared with. */
  readonly baseline: string;
  /** Further ids it is compared with. */
  readonly alsoComparedWith?: readonly string[];
}

/**
 * The measurements of the `chosen` groups, plus every measurement of other
 * groups they are compared with (and theirs, in turn), in the order of
 * `byGroup`: a ratio needs its baseline measured in the same run.
 */
export function withComparisons<T extends Compared>(
  byGroup: Readonly<Partial<Record<Group, readonly T[]>>>,
  chosen: ReadonlySet<Group>,
): T[] {
  const all = GROUPS.flatMap((group) => byGroup[group] ?? []);
  const byId = new Map(all.map((measurement) => [measurement.id, measurement]));
  const wanted = new Set<string>();
  const want = (id: string) => {
    const measurement = byId.get(id);
    if (measurement === undefined || wanted.has(id)) return;
    wanted.add(id);
    want(measurement.baseline);
    for (const other of measurement.alsoComparedWith ?? []) want(other);
  };
  for (const group of GROUPS) {
    if (chosen.has(group)) { for (const measurement of byGroup[group] ?? []) want(measurement.id); }
  }
  return all.filter((measurement) => wanted.has(measurement.id));
}
