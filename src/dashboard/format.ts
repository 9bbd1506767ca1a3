/**
 * How the dashboard writes times, durations and counts for people.
 *
 * @internal
 * @module
 */

/** `2026-01-01 12:00:05 UTC`-style, without the zone (every time on the dashboard is UTC). */
export function formatTime(date: Date): string {
  return date.toISOString().replace("T", " ").slice(0, 19);
}

/** `850 ms`, `1.2 s`, `4.5 min`, `2.0 h`; `–` for null. */
export function formatDuration(ms: number | null): string {
  if (ms === null || !Number.isFinite(ms)) return "–";
  if (ms > 0 && ms < 1) return `${ms.toFixed(2)} ms`;
  if (ms < 1_000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1_000).toFixed(1)} s`;
  if (ms < 3_600_000) return `${(ms / 60_000).toFixed(1)} min`;
  return `${(ms / 3_600_000).toFixed(1)} h`;
}

/** A progress percentage as shown: rounded down, `–` for null. */
export function formatPercent(percent: number | null): string {
  return percent === null ? "–" : `${Math.floor(percent)}%`;
}

/** The first line of `text`, cut to `max` characters with an ellipsis. */
export function firstLine(text: string, max = 160): string {
  const line = text.split("\n", 1)[0] ?? "";
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}
