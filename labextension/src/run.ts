/**
 * A run (`application/vnd.memfit.run+json`, i.e. `Run.trace()`), drawn the same
 * way live and saved: `RunView` takes the trace's head (everything but the
 * events) and events in batches, and redraws only what a batch touched.  The
 * saved view is one batch holding every event; the live view (live.ts) is fed
 * by the kernel's batches, so both are the same DOM for the same events.
 *
 * Layout: header, totals and budget, breaker states, context gauge, the
 * degradation plan, warnings raised during the run, a toolbar, then one line
 * per iteration (expandable) with the event cards inside.
 *
 * Live only (nothing of it stays once the run has settled, so the live and
 * the saved view end as the same DOM): the reply streaming in, shown in its
 * iteration's row until the call's `model_call` arrives (`setStreaming`), and
 * at most `setMaxRows(n)` iteration rows in the page, the older ones folded
 * into one line that brings them back.
 */

import { badge, bar, canonical, Child, clip, count, field, h, money, num, obj, seconds, str, tierEntries } from './dom';
import { contextGauge, degradationPlan, eventCard, isMinor, levelLabel } from './events';
import { checkRun, MemfitEvent, RunTrace } from './payload';
import { failureBox, problemBox } from './problems';
import { endsStream, streamCard, streamRow, Streaming } from './stream';

/** Beyond this many events, iteration bodies are drawn when first opened, not before. */
export const EAGER_EVENTS = 1500;

export const STATUS_KIND: Record<string, string> = {
  done: 'good',
  running: 'muted',
  pending: 'muted',
  failed: 'bad',
  degraded: 'warn',
  spin_exit: 'bad',
  cancelled: 'warn',
  escalated: 'warn',
  unfinished: 'warn'
};

/** Why a run ended, in the words of its panel title. */
const ENDING_TITLE: Record<string, string> = {
  degraded: 'Degraded',
  spin_exit: 'Stopped: spinning',
  failed: 'Failed',
  cancelled: 'Cancelled',
  escalated: 'Escalated',
  unfinished: 'Not ended'
};

/** How a run can end (memfit_jupyter/records.py STATUSES); any other status is a run still going. */
export const ENDED = new Set(['done', 'failed', 'degraded', 'spin_exit', 'cancelled', 'escalated']);

/**
 * A saved trace of a run that had not ended says so, rather than "running": drawn with no live
 * run behind it (no kernel, the kernel stopped, another session), nothing is running.
 */
function asSaved(head: Record<string, unknown>): Record<string, unknown> {
  if (ENDED.has(str(head.status))) {
    return head;
  }
  return {
    ...head,
    status: 'unfinished',
    reason: `saved while ${str(head.status) || 'going'}: the run had not ended when this copy was written (its kernel stopped, or the notebook was saved mid-run)`
  };
}

function header(raw: Record<string, unknown>): HTMLElement {
  const status = str(raw.status) || 'unknown';
  const tiers = obj(raw.tiers) ?? {};
  const tierText = tierEntries(tiers)
    .filter(([, model]) => typeof model === 'string' && model)
    .map(([tier, model]) => `${tier} ${str(model)}`)
    .join(' · ');
  const reason = str(raw.reason);
  return h(
    'div',
    { class: 'memfit-header' },
    h(
      'div',
      { class: 'memfit-header-line' },
      badge('memfit run', 'kind'),
      h('span', { class: `memfit-badge memfit-badge-${STATUS_KIND[status] ?? 'muted'} memfit-status`, 'data-status': status }, status),
      h('span', { class: 'memfit-title' }, clip(str(raw.task) || '(no task)', 500))
    ),
    raw.answer !== null && raw.answer !== undefined && raw.answer !== ''
      ? h('div', { class: 'memfit-answer' }, h('span', { class: 'memfit-label' }, 'answer '), str(raw.answer))
      : null,
    reason
      ? h(
          'div',
          { class: 'memfit-muted memfit-reason' },
          ENDING_TITLE[status] ? h('span', { class: 'memfit-label' }, `${ENDING_TITLE[status]}: `) : null,
          reason
        )
      : null,
    h(
      'div',
      { class: 'memfit-muted memfit-meta' },
      [tierText || str(raw.model), raw.run_id ? `run ${str(raw.run_id)}` : '', raw.started_at ? `started ${str(raw.started_at)}` : '']
        .filter(Boolean)
        .join(' · ')
    )
  );
}

function totals(raw: Record<string, unknown>): HTMLElement {
  const t = obj(raw.totals) ?? {};
  const tokens = obj(t.tokens) ?? {};
  return h(
    'div',
    { class: 'memfit-totals' },
    field('cost', cost(t)),
    field('tokens', `${count(tokens.total)} (${count(tokens.prompt)} in, ${count(tokens.completion)} out)`),
    field('calls', count(t.calls)),
    field('iterations', count(t.iterations)),
    field('recursive calls', count(t.recursive_calls)),
    field('duration', seconds(t.duration_s))
  );
}

/** The run's cost; a model with no known price is said to be one, not counted as free. */
function cost(t: Record<string, unknown>): Child {
  const unpriced = Array.isArray(t.unpriced) ? t.unpriced.map(String) : [];
  if (!unpriced.length) {
    return money(t.cost_usd);
  }
  const spent = num(t.cost_usd) ?? 0;
  const text = spent > 0 ? `${money(spent)} + calls with no price` : 'no price known';
  return h('span', { class: 'memfit-unpriced', title: `no price known for ${unpriced.join(', ')}` }, text);
}

/** Budget bars: each spent amount against its limit (limits come from `limits`). */
function budget(raw: Record<string, unknown>): HTMLElement | null {
  const t = obj(raw.totals) ?? {};
  const limits = obj(raw.limits) ?? {};
  const rows: [string, number | null, number | null, (v: unknown) => string][] = [
    ['cost', num(t.cost_usd), num(limits.max_cost_usd), money],
    ['time', num(t.duration_s), num(limits.max_duration_seconds), seconds],
    ['iterations', num(t.iterations), num(limits.max_iterations), count],
    ['recursive calls', num(t.recursive_calls), num(limits.max_recursive_calls), count]
  ];
  const bars = rows
    .filter(([, spent, limit]) => spent !== null && limit !== null && limit > 0)
    .map(([name, spent, limit, fmt]) =>
      h(
        'div',
        { class: 'memfit-budget-row' },
        h('span', { class: 'memfit-label' }, name),
        bar((spent as number) / (limit as number), `${fmt(spent)} of ${fmt(limit)}`)
      )
    );
  return bars.length ? h('div', { class: 'memfit-budget' }, h('div', { class: 'memfit-section-title' }, 'Budget'), ...bars) : null;
}

/** The last known circuit-breaker state of each tier. */
function breakers(raw: Record<string, unknown>, events: MemfitEvent[]): HTMLElement | null {
  const states = new Map<string, { state: string; model: string }>();
  for (const [tier, model] of tierEntries(obj(raw.tiers) ?? {})) {
    if (typeof model === 'string' && model) {
      states.set(tier, { state: 'CLOSED', model });
    }
  }
  let seen = false;
  for (const e of events) {
    if (e.type !== 'breaker' || e.rejected === true || typeof e.tier !== 'string') {
      continue;
    }
    seen = true;
    const prev = states.get(e.tier);
    states.set(e.tier, { state: str(e.to_state) || prev?.state || '?', model: str(e.model) || prev?.model || '' });
  }
  if (!seen) {
    return null;
  }
  const kind = (s: string) => (s === 'OPEN' ? 'bad' : s === 'HALF_OPEN' ? 'warn' : 'good');
  return h(
    'div',
    { class: 'memfit-breakers' },
    h('div', { class: 'memfit-section-title' }, 'Circuit breakers'),
    ...[...states.entries()].map(([tier, s]) =>
      h(
        'span',
        { class: 'memfit-breaker', 'data-tier': tier, 'data-state': s.state },
        h('span', { class: 'memfit-label' }, `${tier} `),
        badge(s.state, kind(s.state)),
        s.model ? h('span', { class: 'memfit-muted' }, ` ${s.model}`) : null
      )
    )
  );
}

/** Warnings and log lines raised while the run went on (`log` events), in one place. */
function logs(events: MemfitEvent[]): HTMLElement | null {
  const lines = events.filter(e => e.type === 'log');
  if (!lines.length) {
    return null;
  }
  const worst = lines.some(e => ['ERROR', 'CRITICAL'].includes(str(e.level))) ? 'bad' : 'warn';
  return h(
    'details',
    { class: 'memfit-logs' },
    h('summary', null, badge(`${lines.length} warning${lines.length === 1 ? '' : 's'}`, worst), ' raised during the run'),
    h(
      'ul',
      { class: 'memfit-list' },
      ...lines.slice(-200).map(e =>
        h('li', { 'data-level': str(e.level) }, h('span', { class: 'memfit-label' }, `${str(e.level) || 'LOG'} `), str(e.message, 600))
      )
    )
  );
}

/** Badges summarising an iteration: reflection levels, spin, failures, synthesis. */
function iterationBadges(events: MemfitEvent[]): HTMLElement[] {
  const out: HTMLElement[] = [];
  for (const e of events) {
    if (e.type === 'reflection') {
      out.push(badge(levelLabel(e.level, e.level_name), `level-${num(e.level) ?? 'x'}`));
    } else if (e.type === 'spin' && e.is_spinning === true) {
      out.push(badge('spin', 'bad'));
    } else if (e.type === 'observation' && e.ok === false) {
      out.push(badge('failed action', 'bad'));
    } else if (e.type === 'synthesis') {
      out.push(badge(`synthesis ${str(e.strategy)}`, e.low_confidence ? 'warn' : 'muted'));
    } else if (e.type === 'guarantee' && e.violated) {
      out.push(badge('limit', 'bad'));
    } else if (e.type === 'trial') {
      out.push(badge(e.passed ? 'oracle passed' : 'oracle failed', e.passed ? 'good' : 'bad'));
    } else if (e.type === 'log') {
      out.push(badge('warning', 'warn'));
    }
  }
  return out;
}

/** `tool(key=value, ...)`, short, for an iteration's one line. */
function actionLine(events: MemfitEvent[]): string {
  const act = events.find(e => e.type === 'action');
  if (!act) {
    return '';
  }
  const params = obj(act.params) ?? {};
  const args = Object.entries(params)
    .map(([k, v]) => `${k}=${typeof v === 'string' ? v : str(v)}`)
    .join(', ');
  return `${str(act.tool) || '(no tool)'}(${clip(args, 80)})`;
}

/**
 * Where an iteration's time went: one segment per model call and one for the tool,
 * as shares of the iteration's time.
 */
function waterfall(events: MemfitEvent[]): HTMLElement | null {
  const parts: [string, number, string][] = [];
  for (const e of events) {
    if (e.type === 'model_call' && num(e.latency_s) !== null) {
      parts.push(['call', num(e.latency_s) as number, `${str(e.purpose) || 'model call'} ${seconds(e.latency_s)} · ${money(e.cost_usd)}`]);
    } else if (e.type === 'observation' && num(e.duration_s) !== null) {
      parts.push(['tool', num(e.duration_s) as number, `${str(e.tool) || 'tool'} ${seconds(e.duration_s)}`]);
    }
  }
  const total = parts.reduce((s, [, v]) => s + v, 0);
  if (!parts.length || total <= 0) {
    return null;
  }
  return h(
    'span',
    { class: 'memfit-waterfall', title: parts.map(p => p[2]).join('\n') },
    ...parts.map(([kind, v, label]) => {
      const seg = h('span', { class: `memfit-seg memfit-seg-${kind}`, title: label });
      seg.style.width = `${((v / total) * 100).toFixed(1)}%`;
      return seg;
    })
  );
}

function iterationSummary(iteration: number, events: MemfitEvent[]): HTMLElement {
  const calls = events.filter(e => e.type === 'model_call');
  const cost = calls.reduce((sum, e) => sum + (num(e.cost_usd) ?? 0), 0);
  const time =
    calls.reduce((s, e) => s + (num(e.latency_s) ?? 0), 0) +
    events.filter(e => e.type === 'observation').reduce((s, e) => s + (num(e.duration_s) ?? 0), 0);
  const line = actionLine(events);
  return h(
    'summary',
    { class: 'memfit-iteration-title' },
    h('span', { class: 'memfit-iteration-name' }, iteration === 0 ? 'Setup' : `Iteration ${iteration}`),
    line ? h('code', { class: 'memfit-iteration-action' }, line) : null,
    ...iterationBadges(events),
    calls.length
      ? h('span', { class: 'memfit-muted memfit-iteration-cost' }, ` ${calls.length} call${calls.length === 1 ? '' : 's'} · ${money(cost)} · ${seconds(time)}`)
      : null,
    waterfall(events)
  );
}

/** Draws a run; `update` takes the newest head and the events not seen yet. */
export class RunView {
  readonly root: HTMLElement;

  constructor() {
    this.root = h('div', { class: 'memfit-root memfit-run' });
    this._problems = h('div', { class: 'memfit-problem-slot' });
    this._summary = h('div', { class: 'memfit-summary' });
    this._toolbar = this._makeToolbar();
    this._timeline = h('div', { class: 'memfit-timeline' });
    this.root.append(this._problems, this._summary, this._toolbar, this._timeline);
  }

  /** Number of events drawn so far. */
  get length(): number {
    return this._events.length;
  }

  get events(): readonly MemfitEvent[] {
    return this._events;
  }

  /** Show problems found in the payload (see payload.ts). */
  setProblems(problems: string[]): void {
    const box = problemBox(problems);
    this._problems.replaceChildren(...(box ? [box] : []));
  }

  /** Take the newest head and more events; redraw the summary and the iterations they touched. */
  update(head: Record<string, unknown>, events: readonly MemfitEvent[]): void {
    this._head = canonical(head);
    const touched = new Set<number>();
    let streamEnded = false;
    for (const raw of events) {
      const e = canonical(raw);
      if (endsStream(this._stream, e)) {
        streamEnded = true;
      }
      this._events.push(e);
      let group = this._byIteration.get(e.iteration);
      if (!group) {
        group = [];
        this._byIteration.set(e.iteration, group);
      }
      group.push(e);
      touched.add(e.iteration);
    }
    if (streamEnded && this._stream) {
      touched.add(this._stream.iteration);
      this._stream = null;
    }
    this._drawSummary();
    for (const iteration of [...touched].sort((a, b) => a - b)) {
      this._drawIteration(iteration);
    }
    if (this._events.length === 0 && !this._stream && !this._timeline.querySelector('.memfit-empty')) {
      this._timeline.replaceChildren(h('div', { class: 'memfit-empty' }, 'No events recorded.'));
    }
    this._fold();
  }

  /** The reply streaming in now (null: none); drawn in its iteration's row, live only. */
  setStreaming(stream: Streaming | null): void {
    const before = this._stream;
    this._stream = stream;
    if (before && (!stream || before.iteration !== stream.iteration)) {
      this._drawIteration(before.iteration);
    }
    if (stream) {
      const block = this._blocks.get(stream.iteration);
      if (block && before && before.iteration === stream.iteration) {
        this._decorate(block); // the same row: only its streamed text changes
      } else {
        this._drawIteration(stream.iteration);
      }
    }
    this._fold();
  }

  get streaming(): Streaming | null {
    return this._stream;
  }

  /**
   * Put `tools(iteration)` (e.g. "Fork from here", fork.ts) at the top of each iteration's body,
   * drawn rows included; null takes them away.
   */
  setRowTools(tools: ((iteration: number) => HTMLElement | null) | null): void {
    this._rowTools = tools;
    for (const [iteration, block] of this._blocks) {
      block.querySelector(':scope > .memfit-row-tools')?.remove();
      this._addRowTools(iteration, block);
    }
  }

  private _addRowTools(iteration: number, block: HTMLElement): void {
    const tools = this._rowTools?.(iteration);
    if (tools) {
      tools.classList.add('memfit-row-tools');
      block.querySelector(':scope > summary')?.after(tools);
    }
  }

  /** Keep at most `n` iteration rows in the page (0: all); the older ones fold into one line. */
  setMaxRows(n: number): void {
    const rows = Math.max(0, Math.floor(n));
    if (rows !== this._maxRows) {
      this._maxRows = rows;
      this._fold();
    }
  }

  /** Put the streamed reply into its row (and, once the row is opened, its body). */
  private _decorate(block: HTMLElement): void {
    block.querySelector(':scope > summary > .memfit-stream-row')?.remove();
    block.querySelector(':scope > .memfit-iteration-body > .memfit-stream')?.remove();
    const s = this._stream;
    if (!s || Number(block.getAttribute('data-iteration')) !== s.iteration) {
      block.classList.remove('memfit-streaming');
      return;
    }
    block.classList.add('memfit-streaming');
    const summary = block.querySelector(':scope > summary');
    summary?.insertBefore(streamRow(s), summary.querySelector('.memfit-iteration-name')?.nextSibling ?? null);
    block.querySelector(':scope > .memfit-iteration-body')?.append(streamCard(s));
  }

  /** Rows past the newest `_maxRows` leave the page, replaced by one line that shows them all. */
  private _fold(): void {
    const order = [...this._blocks.keys()].sort((a, b) => a - b);
    const hide = this._maxRows > 0 && !this._unfolded ? Math.max(0, order.length - this._maxRows) : 0;
    order.forEach((iteration, i) => {
      const block = this._blocks.get(iteration) as HTMLElement;
      if (i < hide) {
        block.remove();
      } else if (block.parentNode !== this._timeline) {
        this._place(iteration, block);
      }
    });
    let line = this._timeline.querySelector(':scope > .memfit-folded');
    if (!hide) {
      line?.remove();
      return;
    }
    if (!line) {
      const button = h('button', { type: 'button', class: 'memfit-tool-button' }, 'show them');
      button.addEventListener('click', () => {
        this._unfolded = true;
        this._fold();
      });
      line = h('div', { class: 'memfit-folded memfit-muted' }, h('span', { class: 'memfit-folded-count' }), ' ', button);
      this._timeline.prepend(line);
    }
    const countEl = line.querySelector('.memfit-folded-count');
    if (countEl) {
      countEl.textContent = `${hide} earlier iteration${hide === 1 ? '' : 's'} folded away (the newest ${this._maxRows} are shown)`;
    }
  }

  /** Forget every event (the kernel sends them again from the start). */
  reset(): void {
    this._stream = null;
    this._events = [];
    this._byIteration.clear();
    this._blocks.clear();
    this._last = -Infinity;
    this._timeline.replaceChildren();
  }

  /** The block of one iteration, if drawn. */
  block(iteration: number): HTMLElement | undefined {
    return this._blocks.get(iteration);
  }

  /** Open or close every iteration. */
  expandAll(open = true): void {
    for (const block of this._blocks.values()) {
      (block as HTMLDetailsElement).open = open;
      if (open) {
        this._fill(block);
      }
    }
  }

  private _drawSummary(): void {
    const raw = this._head;
    const events = this._events;
    let ctx: MemfitEvent | null = null;
    let plan: MemfitEvent | null = null;
    for (const e of events) {
      if (e.type === 'context') {
        ctx = e;
      } else if (e.type === 'degradation') {
        plan = e;
      }
    }
    const parts: (HTMLElement | null)[] = [
      header(raw),
      h('div', { class: 'memfit-facts' }, totals(raw), budget(raw)),
      breakers(raw, events),
      ctx ? h('div', { class: 'memfit-context' }, h('div', { class: 'memfit-section-title' }, 'Context'), contextGauge(ctx)) : null,
      plan ? degradationPlan(plan) : null,
      logs(events)
    ];
    const open = this._summary.querySelector('.memfit-logs')?.hasAttribute('open');
    this._summary.replaceChildren(...parts.filter((p): p is HTMLElement => p !== null));
    if (open) {
      this._summary.querySelector('.memfit-logs')?.setAttribute('open', '');
    }
  }

  private _drawIteration(iteration: number): void {
    const events = this._byIteration.get(iteration) ?? [];
    const old = this._blocks.get(iteration);
    if (!events.length && this._stream?.iteration !== iteration) {
      old?.remove(); // a row drawn for a stream alone, the stream gone with no event (a reset)
      this._blocks.delete(iteration);
      return;
    }
    const block = h('details', { class: 'memfit-iteration', 'data-iteration': String(iteration) });
    block.append(iterationSummary(iteration, events));
    const body = h('div', { class: 'memfit-iteration-body' });
    block.append(body);
    this._addRowTools(iteration, block);
    if (old?.hasAttribute('open')) {
      block.setAttribute('open', '');
    }
    if (this._events.length <= EAGER_EVENTS || block.hasAttribute('open')) {
      this._fill(block);
    } else {
      block.addEventListener('toggle', () => this._fill(block), { once: true });
    }
    this._blocks.set(iteration, block);
    this._decorate(block);
    if (old) {
      if (old.parentNode === this._timeline) {
        old.replaceWith(block);
      }
      return; // a folded row stays folded
    }
    if (this._timeline.firstElementChild?.classList.contains('memfit-empty')) {
      this._timeline.firstElementChild.remove();
    }
    this._place(iteration, block);
  }

  /** Put a row in the page in iteration order (iterations mostly arrive in order). */
  private _place(iteration: number, block: HTMLElement): void {
    if (iteration > this._last) {
      this._last = iteration;
      this._timeline.append(block);
      return;
    }
    let next: HTMLElement | undefined;
    let nextAt = Infinity;
    for (const [i, b] of this._blocks) {
      if (i > iteration && i < nextAt && b.parentNode === this._timeline) {
        next = b;
        nextAt = i;
      }
    }
    this._timeline.insertBefore(block, next ?? null);
  }

  private _fill(block: HTMLElement): void {
    const body = block.querySelector('.memfit-iteration-body');
    if (!body || this._filled.has(body)) {
      return;
    }
    this._filled.add(body);
    const events = this._byIteration.get(Number(block.getAttribute('data-iteration'))) ?? [];
    body.prepend( // before the streamed reply, if one is shown: it is the newest
      ...events.map(e => {
        const card = eventCard(e);
        if (isMinor(e)) {
          card.classList.add('memfit-minor');
        }
        return card;
      })
    );
  }

  private _makeToolbar(): HTMLElement {
    const detail = h('button', { class: 'memfit-tool-button memfit-toggle-minor', type: 'button', 'aria-pressed': 'false' }, 'show model calls, triage and context');
    detail.addEventListener('click', () => {
      const on = this.root.classList.toggle('memfit-show-minor');
      detail.setAttribute('aria-pressed', String(on));
    });
    const expand = h('button', { class: 'memfit-tool-button memfit-expand-all', type: 'button' }, 'expand all');
    expand.addEventListener('click', () => {
      const open = expand.textContent === 'expand all';
      this.expandAll(open);
      expand.textContent = open ? 'collapse all' : 'expand all';
    });
    const big = h('button', { class: 'memfit-tool-button memfit-toggle-presentation', type: 'button', 'aria-pressed': 'false', title: 'a larger size for lectures' }, 'presentation size');
    big.addEventListener('click', () => {
      const on = this.root.classList.toggle('memfit-presentation');
      big.setAttribute('aria-pressed', String(on));
    });
    return h('div', { class: 'memfit-toolbar' }, h('span', { class: 'memfit-section-title' }, 'Timeline'), detail, expand, big);
  }

  private _head: Record<string, unknown> = {};
  private _events: MemfitEvent[] = [];
  private _byIteration = new Map<number, MemfitEvent[]>();
  private _blocks = new Map<number, HTMLElement>();
  private _last = -Infinity;
  private _stream: Streaming | null = null;
  private _filled = new WeakSet<Element>();
  private _maxRows = 0;
  private _unfolded = false;
  private _rowTools: ((iteration: number) => HTMLElement | null) | null = null;
  private _problems: HTMLElement;
  private _summary: HTMLElement;
  private _toolbar: HTMLElement;
  private _timeline: HTMLElement;
}

/** The trace without its events: what `RunView.update` takes as the head. */
export function headOf(raw: Record<string, unknown>): Record<string, unknown> {
  const head: Record<string, unknown> = { ...raw };
  delete head.events;
  return head;
}

/** Draw a checked trace into a new view: a saved copy, with no live run behind it. */
export function viewOf(trace: RunTrace, problems: string[] = []): RunView {
  const view = new RunView();
  view.setProblems(problems);
  view.update(asSaved(headOf(trace.raw)), trace.events);
  return view;
}

/** Render an `application/vnd.memfit.run+json` payload; never throws, never blank. */
export function renderRun(data: unknown): HTMLElement {
  return savedRunView(data).root;
}

/** A saved run's element, and its view when the payload could be drawn as one (never throws). */
export function savedRunView(data: unknown): { root: HTMLElement; view: RunView | null } {
  try {
    const { value, problems } = checkRun(data);
    if (!value) {
      const root = h('div', { class: 'memfit-root memfit-run' });
      const box = problemBox(problems);
      root.append(...(box ? [box] : []), failureBox(null, data));
      return { root, view: null };
    }
    const view = viewOf(value, problems);
    return { root: view.root, view };
  } catch (err) {
    return { root: h('div', { class: 'memfit-root memfit-run' }, failureBox(err, data)), view: null };
  }
}
