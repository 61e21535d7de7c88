/**
 * The memory ranking: one row per memory, a bar for the final score and a
 * small bar per C.O.R.E. P.A.C.T. dimension, plus keyword bonus and semantic
 * similarity.  Payload shape: see `payload.ts`.
 */

import { badge, bar, clip, count, h, num, obj, str } from './dom';
import { checkMemory, MemoryRow } from './payload';
import { problemBox, failureBox } from './problems';

/** The seven scoring dimensions, in the order of their weights (MECHANISMS.md §3.4), with their names. */
export const DIMENSIONS: [string, string][] = [
  ['r', 'Relevance'],
  ['c', 'Connectivity'],
  ['t', 'Temporality'],
  ['a', 'Actionability'],
  ['p', 'Preference'],
  ['o', 'Origin'],
  ['e', 'Emotion']
];

function score(value: unknown): string {
  const n = num(value);
  return n === null ? '—' : n.toFixed(2);
}

function dimCell(row: MemoryRow, key: string, name: string): HTMLElement {
  const n = num(row.breakdown[key]);
  const cell = h('td', { class: 'memfit-dim', title: `${name}: ${score(n)}` });
  if (n === null) {
    cell.append('—');
    return cell;
  }
  const fill = h('div', { class: 'memfit-dim-fill' });
  fill.style.height = `${Math.max(0, Math.min(1, n)) * 100}%`;
  cell.append(h('div', { class: 'memfit-dim-track' }, fill), h('span', null, score(n)));
  return cell;
}

/** The value a column sorts by. */
function sortValue(row: MemoryRow, index: number, key: string): number {
  if (key === 'rank') {
    return -index;
  }
  if (key === 'final') {
    return row.final ?? -Infinity;
  }
  return num(row.breakdown[key]) ?? -Infinity;
}

function rowOf(row: MemoryRow, i: number, floor: number | null): HTMLElement {
  const below = floor !== null && (row.final ?? 0) <= floor;
  return h(
    'tr',
    { class: `memfit-rank-row${below ? ' memfit-below-floor' : ''}`, 'data-rank': String(i + 1), 'data-id': row.id },
    h('td', { class: 'memfit-rank' }, String(i + 1)),
    h(
      'td',
      { class: 'memfit-memory-cell' },
      h('div', { class: 'memfit-memory-content' }, clip(row.content, 400)),
      h('div', { class: 'memfit-memory-meta' }, row.id ? h('code', null, row.id) : null, ...row.tags.slice(0, 12).map(tag => badge(tag, 'tag')))
    ),
    // On an absolute scale (0 to 1): a weak best match is drawn weak, not as a full bar.
    h('td', { class: 'memfit-final' }, bar(row.final ?? 0, score(row.final), 2, 2)),
    ...DIMENSIONS.map(([key, name]) => dimCell(row, key, name)),
    h('td', { class: 'memfit-num' }, score(row.breakdown.keyword_bonus)),
    h('td', { class: 'memfit-num' }, score(row.breakdown.semantic))
  );
}

/**
 * The ranking table for rows already read (also used inside `memory` events).
 * A click on a column header sorts by it (highest first; a second click reverses).
 */
export interface RankingOptions {
  /** What the score column holds: "final score" (a search), "stored score" (a list). */
  scoreLabel?: string;
  /** The most a memory with no word of the query can score (memory/ranking.py relevance_floor). */
  floor?: number | null;
}

export function rankingTable(rows: MemoryRow[], options: RankingOptions = {}): HTMLElement {
  if (rows.length === 0) {
    return h('div', { class: 'memfit-empty' }, 'No memories matched.');
  }
  const floor = options.floor ?? null;
  const scoreLabel = options.scoreLabel || 'final score';
  const drawn = rows.map((row, i) => ({ row, i, el: rowOf(row, i, floor) }));
  const body = h('tbody', null, ...drawn.map(d => d.el));
  const columns: [string, string, string][] = [
    ['rank', '#', 'rank'],
    ['', 'memory', ''],
    ['final', scoreLabel, scoreLabel],
    ...DIMENSIONS.map(([key, name]): [string, string, string] => [key, key.toUpperCase(), name]),
    ['keyword_bonus', 'kw', 'keyword bonus'],
    ['semantic', 'sem', 'semantic similarity']
  ];
  const heads: HTMLElement[] = [];
  const sortBy = (key: string, th: HTMLElement) => {
    const descending = th.getAttribute('aria-sort') !== 'descending';
    const sign = descending ? 1 : -1;
    const order = [...drawn].sort((x, y) => sign * (sortValue(y.row, y.i, key) - sortValue(x.row, x.i, key)) || x.i - y.i);
    body.replaceChildren(...order.map(d => d.el));
    for (const other of heads) {
      other.removeAttribute('aria-sort');
    }
    th.setAttribute('aria-sort', descending ? 'descending' : 'ascending');
  };
  for (const [key, label, title] of columns) {
    const th = h('th', key ? { 'data-key': key, title: `${title}: click to sort`, class: 'memfit-sortable' } : null, label);
    if (key) {
      th.addEventListener('click', () => sortBy(key, th));
      heads.push(th);
    }
  }
  heads[1].setAttribute('aria-sort', 'descending'); // rows arrive ranked by their score
  const nothing = floor !== null && rows.every(r => (r.final ?? 0) <= floor);
  return h(
    'div',
    { class: 'memfit-ranking-box' },
    nothing
      ? h(
          'div',
          { class: 'memfit-nothing-relevant' },
          `Nothing relevant: no memory shares a word with the query; these are only the closest by embedding ` +
            `(every score is at most ${floor.toFixed(2)}, the most a memory can get without a matching word).`
        )
      : null,
    h('table', { class: 'memfit-ranking' }, h('thead', null, h('tr', null, ...heads.slice(0, 1), h('th', null, 'memory'), ...heads.slice(1))), body),
    h(
      'div',
      { class: 'memfit-legend memfit-muted' },
      [...DIMENSIONS.map(([key, name]) => `${key.toUpperCase()} ${name.toLowerCase()}`), 'kw keyword bonus', 'sem semantic similarity'].join(' · ') +
        ' · click a header to sort'
    )
  );
}

/** The score column's label and the relevance floor a payload names (older payloads: none). */
function memoryOptions(data: unknown): RankingOptions {
  const raw = obj(data) ?? {};
  return { scoreLabel: str(raw.score_label) || undefined, floor: num(raw.floor) };
}

/** Render an `application/vnd.memfit.memory+json` payload; never throws. */
export function renderMemory(data: unknown): HTMLElement {
  const root = h('div', { class: 'memfit-root memfit-memory' });
  try {
    const { value, problems } = checkMemory(data);
    const box = problemBox(problems);
    if (box) {
      root.append(box);
    }
    if (!value) {
      root.append(failureBox(null, data));
      return root;
    }
    root.append(
      h(
        'div',
        { class: 'memfit-header' },
        badge('memory', 'kind'),
        h('span', { class: 'memfit-title' }, value.query ? `“${clip(value.query, 300)}”` : 'memories'),
        h(
          'span',
          { class: 'memfit-muted' },
          ` ${value.total} result${value.total === 1 ? '' : 's'}` +
            (value.bytes !== null ? ` · ${count(value.bytes)} bytes` : '') +
            (value.bytesLimit !== null ? ` (limit ${count(value.bytesLimit)})` : '')
        )
      ),
      rankingTable(value.rows, memoryOptions(data))
    );
  } catch (err) {
    root.replaceChildren(failureBox(err, data));
  }
  return root;
}
