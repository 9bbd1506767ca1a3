/**
 * Inline SVG bar charts: numbers only, drawn on the server, styled by the
 * page's stylesheet (no script, no external asset).
 *
 * @internal
 * @module
 */
import { type Html, html } from "./html.ts";

const WIDTH = 600;
const HEIGHT = 120;
const AXIS = 16;

/** One bar: its value and what its tooltip says it is. */
export interface Bar {
  /** The bar's height, in the chart's unit; negative counts as 0. */
  readonly value: number;
  /** The tooltip's text, e.g. `12:05 UTC: 3`. */
  readonly label: string;
}

/** What to draw. */
export interface BarChart {
  /** The chart's name for screen readers, with its total. */
  readonly title: string;
  /** The bars, left to right. */
  readonly bars: readonly Bar[];
  /** Under the first bar, e.g. `60 min ago`. */
  readonly startLabel: string;
  /** Under the last bar, e.g. `now`. */
  readonly endLabel: string;
  /** The CSS class of the bars: `ok` or `bad`. */
  readonly tone: "ok" | "bad";
}

/** An SVG bar chart scaled to its highest bar (at least 1). */
export function barChart(chart: BarChart): Html {
  const { bars } = chart;
  const top = Math.max(1, ...bars.map((bar) => bar.value));
  const slot = WIDTH / Math.max(1, bars.length);
  const rects = bars.map((bar, index) => {
    const value = Math.max(0, bar.value);
    const height = Math.round((value / top) * (HEIGHT - 4) * 10) / 10;
    const x = Math.round(index * slot * 10) / 10;
    const width = Math.max(1, Math.round((slot - 1) * 10) / 10);
    return html`
      <rect class="bar ${chart.tone}" x="${x}" y="${HEIGHT - height}" width="${width}"
        height="${height}">
        <title>${bar.label}</title>
      </rect>
    `;
  });
  return html`<svg class="chart" viewBox="0 0 ${WIDTH} ${
    HEIGHT + AXIS
  }" role="img" aria-label="${chart.title}">
<title>${chart.title}</title>
<line class="axis" x1="0" y1="${HEIGHT + 0.5}" x2="${WIDTH}" y2="${HEIGHT + 0.5}"></line>
${rects}
<text class="tick" x="2" y="11">${top}</text>
<text class="tick" x="2" y="${HEIGHT + AXIS - 2}">${chart.startLabel}</text>
<text class="tick" x="${WIDTH - 2}" y="${
    HEIGHT + AXIS - 2
  }" text-anchor="end">${chart.endLabel}</text>
</svg>`;
}
