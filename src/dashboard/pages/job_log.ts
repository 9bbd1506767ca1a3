/**
 * A job's log, as the job page (`/jobs/<id>`) and the failed job page show
 * it: each line with its attempt, time, level, text and fields, escaped.
 * Lines of encrypted jobs are never opened here: the dashboard never
 * decrypts.
 *
 * @internal
 * @module
 */
import type { JobLogLine } from "../../job_logs.ts";
import { formatTime } from "../format.ts";
import { type Html, html } from "../html.ts";

/** A job's log lines as a table, or a note that it has none. */
export function logSection(lines: readonly JobLogLine[]): Html {
  if (lines.length === 0) {
    return html`<p class="muted">No log lines (a job's log is kept as long as the job or its history).</p>`;
  }
  const rows = lines.map((line) =>
    html`
      <tr class="log-${line.level}">
        <td class="num">${line.attempt === 0 ? "" : line.attempt}</td>
        <td>${formatTime(line.at)}</td>
        <td>${line.level}</td>
        <td>${line.sealed
          ? html`<span class="muted">encrypted — the dashboard never decrypts</span>`
          : html`<pre>${line.message}</pre>`}</td>
        <td>${line.fields === null ? "" : html`<pre>${JSON.stringify(line.fields)}</pre>`}</td>
      </tr>
    `
  );
  return html`
    <table class="log">
      <thead>
        <tr>
          <th class="num">Attempt</th>
          <th>At (UTC)</th>
          <th>Level</th>
          <th>Message</th>
          <th>Fields</th>
        </tr>
      </thead>
      <tbody>${rows}</tbody>
    </table>
  `;
}
