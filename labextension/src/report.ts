/**
 * The travelling report: one offline HTML file that draws a run or a comparison with the same
 * renderer as JupyterLab (memfit_jupyter/jupyter/report.py writes it).  This entry bundles the
 * renderer without JupyterLab (webpack.report.config.js): the page embeds the payload as JSON in
 * `<script type="application/json" id="memfit-report-data">` (`{kind: "run" | "compare", data}`)
 * and this script draws it into `#memfit-report`, in the light or dark colours the reader's
 * system prefers.  No network, no server.
 */

import '../style/base.css';
import '../style/report.css';

import { renderCompare } from './compare';
import { ForkPanel } from './fork';
import { savedRunView } from './run';

/** A run as JupyterLab draws it saved with no kernel: "Fork from here" writes the code to run. */
function drawRun(data: unknown): HTMLElement {
  const { root, view } = savedRunView(data);
  if (!view) {
    return root;
  }
  const forks = new ForkPanel(() => ({ place: (host, _id, saved) => host.replaceChildren(saved()), dispose: () => undefined }));
  forks.attach(view, null, () => (data && typeof data === 'object' ? (data as Record<string, unknown>) : {}));
  const box = document.createElement('div');
  box.append(root, forks.root);
  return box;
}

/** Follow the reader's light or dark preference, as JupyterLab's theme attribute says it. */
function followScheme(): void {
  const dark = window.matchMedia ? window.matchMedia('(prefers-color-scheme: dark)') : null;
  const apply = () => {
    document.body.dataset.jpThemeLight = dark && dark.matches ? 'false' : 'true';
  };
  apply();
  dark?.addEventListener?.('change', apply);
}

/** Draw the embedded payload; a payload that cannot be read is said to be one. */
export function drawReport(): void {
  followScheme();
  const host = document.getElementById('memfit-report');
  const source = document.getElementById('memfit-report-data');
  if (!host || !source) {
    return;
  }
  let payload: { kind?: string; data?: unknown } = {};
  try {
    payload = JSON.parse(source.textContent || '{}');
  } catch (err) {
    host.textContent = `memfit report: the embedded data is not JSON (${String(err)})`;
    return;
  }
  const frame = document.createElement('div');
  frame.className = 'jp-MemfitRenderer';
  frame.append(payload.kind === 'compare' ? renderCompare(payload.data) : drawRun(payload.data));
  host.replaceChildren(frame);
}

if (document.readyState === 'loading') {
  document.addEventListener('DOMContentLoaded', drawReport);
} else {
  drawReport();
}
