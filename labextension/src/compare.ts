/**
 * Two runs side by side (`application/vnd.memfit.compare+json`, made by
 * `memfit_jupyter.compare(a, b)`): a table of outcome, iterations, cost and the
 * mechanisms that fired in each, where the two diverged, then both runs.
 *
 * Payload: {version: 1, labels: [a, b], runs: [trace, trace],
 *   rows: [{label, kind: text|count|money|seconds, values: [a, b]}],
 *   diverged: {iteration, a, b} | null}
 */

import { badge, count, h, money, num, obj, seconds, str } from './dom';
import { failureBox } from './problems';
import { renderRun, STATUS_KIND } from './run';

function format(kind: string, value: unknown): string {
  if (value === null || value === undefined) {
    return '—';
  }
  switch (kind) {
    case 'money':
      return money(value);
    case 'count':
      return count(value);
    case 'seconds':
      return seconds(value);
    default:
      return str(value, 300);
  }
}

function cell(kind: string, value: unknown, other: unknown, label: string): HTMLElement {
  const td = h('td', { class: 'memfit-compare-value' }, format(kind, value));
  if (label === 'outcome' && typeof value === 'string') {
    td.replaceChildren(h('span', { class: `memfit-badge memfit-badge-${STATUS_KIND[value] ?? 'muted'}` }, value));
  }
  if (JSON.stringify(value) !== JSON.stringify(other)) {
    td.classList.add('memfit-differs');
  }
  return td;
}

/** Mark the iteration where the runs diverged, in each side drawn so far (`.memfit-diverged-row`). */
function markDiverged(sides: HTMLElement, iteration: number): void {
  for (const row of Array.from(sides.querySelectorAll(`.memfit-iteration[data-iteration="${iteration}"]`))) {
    row.classList.add('memfit-diverged-row');
    row.querySelector(':scope > summary .memfit-iteration-name')?.after(badge('diverged here', 'bad'));
  }
}

/**
 * Draw a comparison.  `side(trace, i)` draws each run (default: the saved run view); the
 * renderer passes one that draws a run live while the kernel streams it.
 */
export function renderCompare(data: unknown, side: (trace: unknown, i: number) => HTMLElement = renderRun): HTMLElement {
  const root = h('div', { class: 'memfit-root memfit-compare' });
  try {
    const raw = obj(data);
    const runs = raw && Array.isArray(raw.runs) ? raw.runs : null;
    if (!raw || !runs || runs.length !== 2) {
      root.append(failureBox(new Error('expected a comparison of two runs'), data));
      return root;
    }
    const labels = Array.isArray(raw.labels) ? raw.labels.map(l => str(l, 80)) : ['A', 'B'];
    const rows = Array.isArray(raw.rows) ? raw.rows.map(obj).filter((r): r is Record<string, unknown> => r !== null) : [];
    const table = h(
      'table',
      { class: 'memfit-compare-table' },
      h('thead', null, h('tr', null, h('th', null, ''), h('th', null, labels[0] ?? 'A'), h('th', null, labels[1] ?? 'B'))),
      h(
        'tbody',
        null,
        ...rows.map(r => {
          const values = Array.isArray(r.values) ? r.values : [];
          const kind = str(r.kind) || 'text';
          const label = str(r.label);
          return h('tr', { 'data-row': label }, h('th', { scope: 'row' }, label), cell(kind, values[0], values[1], label), cell(kind, values[1], values[0], label));
        })
      )
    );
    const d = obj(raw.diverged);
    const diverged = d
      ? h(
          'div',
          { class: 'memfit-diverged' },
          h('span', { class: 'memfit-label' }, `Diverged at iteration ${count(num(d.iteration))}: `),
          h('code', null, str(d.a) || '(nothing)'),
          ' vs ',
          h('code', null, str(d.b) || '(nothing)')
        )
      : h('div', { class: 'memfit-diverged memfit-muted' }, 'The two runs took the same actions.');
    const sides = h(
      'div',
      { class: 'memfit-side-by-side' },
      ...runs.map((t, i) => h('div', { class: 'memfit-side' }, h('div', { class: 'memfit-section-title' }, labels[i] ?? ''), side(t, i)))
    );
    const at = d ? num(d.iteration) : null;
    if (at !== null) {
      markDiverged(sides, at);
    }
    root.append(
      h('div', { class: 'memfit-header' }, h('span', { class: 'memfit-badge memfit-badge-kind' }, 'memfit compare'), h('span', { class: 'memfit-title' }, `${labels[0]} vs ${labels[1]}`)),
      table,
      diverged,
      sides
    );
  } catch (err) {
    root.replaceChildren(failureBox(err, data));
  }
  return root;
}
