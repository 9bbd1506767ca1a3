/**
 * The dashboard's only static bytes: its stylesheet and live-refresh script
 * (inlined into each page with the page's CSP nonce), and a favicon served
 * from its own route. Nothing is loaded from elsewhere.
 *
 * @internal
 * @module
 */

/** The stylesheet, inlined in a `<style nonce>`. */
export const STYLES = `
:root { color-scheme: light dark; --fg: #1d2330; --muted: #5f6b7d; --line: #d8dde6; --bg: #fff;
  --panel: #f5f7fa; --ok: #2f7d4f; --bad: #b3261e; --warn: #a15c00; --accent: #2f5fb3; }
@media (prefers-color-scheme: dark) { :root { --fg: #e6e9ef; --muted: #9aa4b5; --line: #363d4a;
  --bg: #15181e; --panel: #1d2129; --ok: #5cc389; --bad: #f08a84; --warn: #e0a85a; --accent: #7ea6f0; } }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, sans-serif; color: var(--fg); background: var(--bg); }
header { display: flex; flex-wrap: wrap; gap: 1rem; align-items: baseline; padding: .75rem 1.25rem;
  border-bottom: 1px solid var(--line); background: var(--panel); }
header strong { font-size: 1.05rem; }
nav a { margin-right: .9rem; color: var(--muted); text-decoration: none; }
nav a[aria-current="page"] { color: var(--fg); font-weight: 600; border-bottom: 2px solid var(--accent); }
main { padding: 1rem 1.25rem 3rem; max-width: 1200px; }
h1 { font-size: 1.3rem; margin: .25rem 0 1rem; }
h2 { font-size: 1.05rem; margin: 1.75rem 0 .5rem; }
table { border-collapse: collapse; width: 100%; margin: .25rem 0 .75rem; }
th, td { text-align: left; padding: .35rem .5rem; border-bottom: 1px solid var(--line); vertical-align: top; }
th { color: var(--muted); font-weight: 600; font-size: .85rem; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
code, pre { font: 12.5px/1.4 ui-monospace, monospace; }
pre { background: var(--panel); border: 1px solid var(--line); padding: .75rem; overflow: auto; max-height: 28rem;
  white-space: pre-wrap; word-break: break-word; }
.muted { color: var(--muted); }
.error { color: var(--bad); }
.notice { padding: .5rem .75rem; border: 1px solid var(--line); background: var(--panel); margin-bottom: 1rem; }
.notice.bad { border-color: var(--bad); }
.actions { display: flex; flex-wrap: wrap; gap: .5rem; align-items: center; margin: .5rem 0 1rem; }
form.inline { display: inline; margin: 0; }
td:has(> form.inline) { white-space: nowrap; }
button { font: inherit; padding: .2rem .65rem; border: 1px solid var(--line); border-radius: 4px;
  background: var(--bg); color: var(--fg); cursor: pointer; }
button.danger { border-color: var(--bad); color: var(--bad); }
input, select { font: inherit; padding: .2rem .4rem; border: 1px solid var(--line); border-radius: 4px;
  background: var(--bg); color: var(--fg); }
form.filters { display: flex; flex-wrap: wrap; gap: .75rem; align-items: end; margin-bottom: 1rem; }
form.filters label { display: flex; flex-direction: column; font-size: .8rem; color: var(--muted); }
progress { width: 8rem; height: .8rem; vertical-align: middle; accent-color: var(--accent); }
.charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(320px, 1fr)); gap: 1.25rem; }
figure { margin: 0; }
figcaption { color: var(--muted); font-size: .85rem; margin-bottom: .25rem; }
svg.chart { width: 100%; height: auto; background: var(--panel); border: 1px solid var(--line); }
svg.chart .bar.ok { fill: var(--ok); }
svg.chart .bar.bad { fill: var(--bad); }
svg.chart .axis { stroke: var(--line); }
svg.chart .tick { fill: var(--muted); font-size: 10px; }
.pager { display: flex; gap: 1rem; align-items: center; margin-top: .5rem; }
.state-running { color: var(--accent); } .state-delayed { color: var(--warn); }
dl.fields { display: grid; grid-template-columns: max-content 1fr; gap: .3rem 1rem; }
dl.fields dt { color: var(--muted); }
dl.fields dd { margin: 0; }
`;

/**
 * Live refresh: at load and every 5 s, while the tab is visible, fetch the page's JSON
 * from `/api/…` (the URL in `<html data-api>`) and write the values that
 * elements name in `data-live` (a `/`-separated path into the JSON) as text,
 * or as the value of a `<progress>`; as the page draws them: `data-format`
 * `percent` cuts to a whole percent, `flag` writes `data-true` or `data-false`. A list (`data-live-ids`) whose ids
 * changed shows the "reload" notice instead of redrawing itself. Only
 * `textContent` and `value` are written: nothing from the JSON becomes markup.
 */
export const LIVE_SCRIPT = `(() => {
  const api = document.documentElement.dataset.api;
  if (!api) return;
  const pick = (data, path) => path.split("/").reduce((v, key) => v == null ? undefined : v[key], data);
  const show = (value, el) => value == null ? null
    : el.dataset.format === "percent" ? Math.floor(Number(value)) + "%"
    : el.dataset.format === "flag" ? (value ? el.dataset.true : el.dataset.false) ?? null
    : String(value);
  async function refresh() {
    if (document.hidden) return;
    let data;
    try {
      const response = await fetch(api, { headers: { accept: "application/json" }, credentials: "same-origin" });
      if (!response.ok) return;
      data = await response.json();
    } catch { return; }
    for (const el of document.querySelectorAll("[data-live]")) {
      const value = pick(data, el.dataset.live);
      if (el.tagName === "PROGRESS") { el.value = Number(value) || 0; continue; }
      el.textContent = show(value, el) ?? el.dataset.empty ?? "–";
    }
    for (const el of document.querySelectorAll("[data-live-ids]")) {
      const list = pick(data, el.dataset.liveIds);
      const ids = Array.isArray(list) ? list.map((item) => item.id).join(",") : "";
      const notice = document.getElementById("live-changed");
      if (ids !== el.dataset.ids && notice) notice.hidden = false;
    }
    const stamp = document.getElementById("live-at");
    if (stamp) stamp.textContent = "updated " + new Date().toLocaleTimeString();
  }
  refresh();
  setInterval(refresh, 5000);
})();`;

/** The favicon: a small stack of boxes, as SVG. */
export const FAVICON_SVG = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16">
<rect x="2" y="2" width="12" height="3" rx="1" fill="#2f5fb3"/>
<rect x="2" y="6.5" width="12" height="3" rx="1" fill="#2f7d4f"/>
<rect x="2" y="11" width="12" height="3" rx="1" fill="#5f6b7d"/>
</svg>`;
