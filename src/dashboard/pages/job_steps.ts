/**
 * A job's durable steps, as the job page (`/jobs/<id>`) and the failed job
 * page show them: each step, sleep and wait with its call position, key,
 * state, attempt, duration and output, escaped. An encrypted output is only
 * named: the dashboard never decrypts.
 *
 * @internal
 * @module
 */
import { stepStateText } from "../../admin/steps.ts";
import type { JobStep } from "../../steps.ts";
import { firstLine, formatDuration, formatTime } from "../format.ts";
import { type Html, html } from "../html.ts";

/** A step's state in words (see {@linkcode stepStateText}), times in UTC. */
function stepState(step: JobStep, now: number): string {
  return stepStateText(step, now, (time) => `${formatTime(time)} UTC`);
}

function outputCell(step: JobStep): Html | string {
  if (step.encrypted) {
    return html`<strong>encrypted</strong> <span class="muted">— the dashboard never decrypts</span>`;
  }
  if (step.output === undefined) return "";
  return html`<code>${firstLine(JSON.stringify(step.output), 200)}</code>`;
}

/** A job's steps as a table, as of `now`; nothing for a job that recorded none. */
export function stepsSection(steps: readonly JobStep[], now: number): Html | null {
  if (steps.length === 0) return null;
  const rows = steps.map((step) =>
    html`
      <tr class="step-${step.kind}">
        <td class="num">${step.seq}</td>
        <td>${step.key}</td>
        <td>${step.kind}</td>
        <td>${stepState(step, now)}</td>
        <td class="num">${step.attempt}</td>
        <td class="num">${step.kind === "step" ? formatDuration(step.durationMs) : "–"}</td>
        <td>${outputCell(step)}</td>
      </tr>
    `
  );
  return html`
    <h2>Steps</h2>
    <table class="steps">
      <thead>
        <tr>
          <th class="num">Seq</th>
          <th>Key</th>
          <th>Kind</th>
          <th>State</th>
          <th class="num">Attempt</th>
          <th class="num">Duration</th>
          <th>Output</th>
        </tr>
      </thead>
      <tbody>${rows}</tbody>
    </table>
  `;
}
