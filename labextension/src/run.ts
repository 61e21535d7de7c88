/**
 * A saved run (`application/vnd.memfit.run+json`, i.e. `Run.trace()`), drawn
 * read-only the way the live widget shows it: header and totals, budget,
 * breaker states, context gauge, degradation plan, then the timeline of
 * iterations with reflection badges and spin alerts.
 */

import { badge, bar, clip, count, field, h, money, num, obj, seconds, str } from './dom';
import { contextGauge, degradationPlan, eventCard, levelLabel } from './events';
import { checkRun, HEAD_EVENTS, MAX_EVENTS, MemfitEvent, RunTrace } from './payload';
import { failureBox, problemBox } from './problems';

const STATUS_KIND: Record<string, string> = {
  done: 'good',
  running: 'muted',
  pending: 'muted',
  failed: 'bad',
  degraded: 'warn',
  spin_exit: 'bad',
  cancelled: 'warn',
  escalated: 'warn'
};

function header(raw: Record<string, unknown>): HTMLElement {
  const status = str(raw.status) || 'unknown';
  const tiers = obj(raw.tiers) ?? {};
  const tierText = Object.entries(tiers)
    .filter(([, model]) => typeof model === 'string' && model)
    .map(([tier, model]) => `${tier} ${str(model)}`)
    .join(' · ');
  return h(
    'div',
    { class: 'memfit-header' },
    h(
      'div',
      { class: 'memfit-header-line' },
      badge('memfit run', 'kind'),
      badge(status, STATUS_KIND[status] ?? 'muted'),
      h('span', { class: 'memfit-title' }, clip(str(raw.task) || '(no task)', 500))
    ),
    raw.answer !== null && raw.answer !== undefined && raw.answer !== ''
      ? h('div', { class: 'memfit-answer' }, h('span', { class: 'memfit-label' }, 'answer '), str(raw.answer))
      : null,
    raw.reason ? h('div', { class: 'memfit-muted memfit-reason' }, str(raw.reason)) : null,
    h(
      'div',
      { class: 'memfit-muted memfit-meta' },
      [
        tierText || str(raw.model),
        raw.run_id ? `run ${str(raw.run_id)}` : '',
        raw.started_at ? `started ${str(raw.started_at)}` : ''
      ]
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
    field('cost', money(t.cost_usd)),
    field('tokens', `${count(tokens.total)} (${count(tokens.prompt)} in, ${count(tokens.completion)} out)`),
    field('calls', count(t.calls)),
    field('iterations', count(t.iterations)),
    field('recursive calls', count(t.recursive_calls)),
    field('duration', seconds(t.duration_s))
  );
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
  const states = new Map<string, { state: string; model: string; failures: unknown }>();
  const tiers = obj(raw.tiers) ?? {};
  for (const [tier, model] of Object.entries(tiers)) {
    if (typeof model === 'string' && model) {
      states.set(tier, { state: 'CLOSED', model, failures: null });
    }
  }
  let seen = false;
  for (const e of events) {
    if (e.type !== 'breaker' || e.rejected === true || typeof e.tier !== 'string') {
      continue;
    }
    seen = true;
    const prev = states.get(e.tier);
    states.set(e.tier, {
      state: str(e.to_state) || prev?.state || '?',
      model: str(e.model) || prev?.model || '',
      failures: e.failures
    });
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

function last(events: MemfitEvent[], type: string): MemfitEvent | null {
  for (let i = events.length - 1; i >= 0; i--) {
    if (events[i].type === type) {
      return events[i];
    }
  }
  return null;
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
    }
  }
  return out;
}

function iterationBlock(iteration: number, events: MemfitEvent[]): HTMLElement {
  const title = iteration === 0 ? 'Setup' : `Iteration ${iteration}`;
  const calls = events.filter(e => e.type === 'model_call');
  const cost = calls.reduce((sum, e) => sum + (num(e.cost_usd) ?? 0), 0);
  return h(
    'div',
    { class: 'memfit-iteration', 'data-iteration': String(iteration) },
    h(
      'div',
      { class: 'memfit-iteration-title' },
      h('span', { class: 'memfit-iteration-name' }, title),
      ...iterationBadges(events),
      calls.length ? h('span', { class: 'memfit-muted' }, ` ${calls.length} call(s) · ${money(cost)}`) : null
    ),
    ...events.map(eventCard)
  );
}

/** The timeline, grouped by iteration; a huge trace shows its head and tail. */
function timeline(events: MemfitEvent[]): HTMLElement {
  const root = h('div', { class: 'memfit-timeline' }, h('div', { class: 'memfit-section-title' }, 'Timeline'));
  let shown: (MemfitEvent | number)[] = events;
  if (events.length > MAX_EVENTS) {
    const tail = MAX_EVENTS - HEAD_EVENTS;
    shown = [...events.slice(0, HEAD_EVENTS), events.length - MAX_EVENTS, ...events.slice(events.length - tail)];
  }
  let group: MemfitEvent[] = [];
  let current: number | null = null;
  const flush = () => {
    if (group.length && current !== null) {
      root.append(iterationBlock(current, group));
    }
    group = [];
  };
  for (const item of shown) {
    if (typeof item === 'number') {
      flush();
      current = null;
      root.append(
        h(
          'div',
          { class: 'memfit-truncated', role: 'note' },
          `… ${count(item)} events in the middle are not shown (this trace has ${count(events.length)} events).`
        )
      );
      continue;
    }
    if (item.iteration !== current) {
      flush();
      current = item.iteration;
    }
    group.push(item);
  }
  flush();
  if (events.length === 0) {
    root.append(h('div', { class: 'memfit-empty' }, 'No events recorded.'));
  }
  return root;
}

function drawRun(trace: RunTrace): HTMLElement[] {
  const { raw, events } = trace;
  const parts: (HTMLElement | null)[] = [header(raw), totals(raw), budget(raw), breakers(raw, events)];
  const ctx = last(events, 'context');
  if (ctx) {
    parts.push(h('div', { class: 'memfit-context' }, h('div', { class: 'memfit-section-title' }, 'Context'), contextGauge(ctx)));
  }
  const plan = last(events, 'degradation');
  if (plan) {
    parts.push(degradationPlan(plan));
  }
  parts.push(timeline(events));
  return parts.filter((p): p is HTMLElement => p !== null);
}

/** Render an `application/vnd.memfit.run+json` payload; never throws, never blank. */
export function renderRun(data: unknown): HTMLElement {
  const root = h('div', { class: 'memfit-root memfit-run' });
  try {
    const { value, problems } = checkRun(data);
    const box = problemBox(problems);
    if (box) {
      root.append(box);
    }
    root.append(...(value ? drawRun(value) : [failureBox(null, data)]));
  } catch (err) {
    root.replaceChildren(failureBox(err, data));
  }
  return root;
}
