/**
 * One card per event, by type, following the event catalogue in
 * memfit_jupyter/events.py.  A type this file does not know gets a generic
 * card listing its fields, so new event types still show up.
 */

import {
  badge,
  bar,
  clip,
  count,
  details,
  field,
  h,
  list,
  money,
  num,
  obj,
  percent,
  pretty,
  seconds,
  str,
  strings
} from './dom';
import { rankingTable } from './memory';
import { EventType, MemfitEvent, readRows } from './payload';

type Card = (e: MemfitEvent) => HTMLElement;

const LEVEL_NAMES = ['none', 'minimal', 'standard', 'deep', 'critical'];

function card(e: MemfitEvent, title: string, ...body: (HTMLElement | string | null)[]): HTMLElement {
  return h(
    'div',
    { class: `memfit-event memfit-event-${e.type.replace(/[^a-z0-9_-]/gi, '')}`, 'data-type': e.type },
    h('div', { class: 'memfit-event-title' }, title),
    ...body
  );
}

function text(value: unknown, cls = 'memfit-text'): HTMLElement | null {
  const s = str(value);
  return s ? h('div', { class: cls }, s) : null;
}

function pre(value: unknown): HTMLElement | null {
  const s = typeof value === 'string' ? clip(value) : value === null || value === undefined ? '' : pretty(value);
  return s ? h('pre', { class: 'memfit-pre' }, s) : null;
}

/** "L2 standard" for a reflection level number (or name). */
export function levelLabel(level: unknown, name?: unknown): string {
  const n = num(level);
  const label = typeof name === 'string' && name ? name.toLowerCase() : n !== null ? LEVEL_NAMES[n] ?? '' : '';
  return n === null ? `reflection ${label}`.trim() : `L${n} ${label}`.trim();
}

const runStart: Card = e =>
  card(
    e,
    'Run started',
    field('tools', strings(e.tools).join(', ') || '—'),
    strings(e.extensions).length ? field('extensions', strings(e.extensions).join(', ')) : null,
    obj(e.settings) ? details('settings', pretty(e.settings)) : null
  );

const modelCall: Card = e => {
  const tokens = `${count(e.prompt_tokens)}+${count(e.completion_tokens)} tok`;
  const parts = [str(e.purpose), str(e.tier), str(e.model), tokens, money(e.cost_usd), seconds(e.latency_s)];
  const attempt = num(e.attempt);
  if (attempt !== null && attempt > 1) {
    parts.push(`attempt ${attempt}`);
  }
  const el = h(
    'div',
    { class: 'memfit-event memfit-event-model_call', 'data-type': e.type },
    h('span', { class: 'memfit-muted' }, 'model call '),
    e.ok === false ? badge('failed', 'bad') : null,
    h('span', { class: 'memfit-call-line' }, parts.filter(Boolean).join(' · ')),
    e.error ? text(`${e.error_kind ? `${str(e.error_kind)}: ` : ''}${str(e.error)}`, 'memfit-error') : null,
    typeof e.reply === 'string' && e.reply ? details('reply', clip(e.reply)) : null,
    // a call cut off (interrupted, timed out) keeps what had streamed in
    typeof e.partial_reply === 'string' && e.partial_reply ? details('partial reply, as streamed before the call ended', clip(e.partial_reply)) : null
  );
  return el;
};

const formatError: Card = e =>
  card(
    e,
    `Malformed reply (${str(e.purpose) || 'call'}, attempt ${count(e.attempt)})`,
    text(e.error, 'memfit-error')
  );

const action: Card = e => {
  const level = e.reflection === null || e.reflection === undefined ? null : levelLabel(e.reflection);
  return card(
    e,
    'Action',
    text(e.thought, 'memfit-thought'),
    h(
      'div',
      { class: 'memfit-action-line' },
      h('code', { class: 'memfit-tool' }, str(e.tool) || '(no tool)'),
      e.action_type ? badge(str(e.action_type), 'type') : null,
      level ? badge(`asks ${level}`, 'reflection') : null
    ),
    obj(e.params) && Object.keys(obj(e.params) ?? {}).length ? pre(e.params) : null
  );
};

const observation: Card = e =>
  card(
    e,
    `Observation${e.tool ? ` from ${str(e.tool)}` : ''}`,
    h(
      'div',
      null,
      e.ok === false ? badge('failed', 'bad') : badge('ok', 'good'),
      ' ',
      h('span', { class: 'memfit-muted' }, seconds(e.duration_s))
    ),
    pre(e.output),
    e.error ? text(e.error, 'memfit-error') : null
  );

const approval: Card = e =>
  card(
    e,
    `Approval ${str(e.state) || ''}`.trim(),
    field('tool', str(e.tool) || '—'),
    text(e.reason)
  );

const note: Card = e => card(e, 'Note', text(e.text));

/** What a fork changed at its step, in a few words (the fork's card and the run view's tree). */
export function forkChanges(changes: Record<string, unknown>): string {
  const parts: string[] = [];
  for (const [key, value] of Object.entries(changes)) {
    if (key === 'action') {
      const a = obj(value) ?? {};
      const params = obj(a.params) ?? {};
      const args = Object.entries(params)
        .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`)
        .join(', ');
      parts.push(`action ${str(a.tool)}(${clip(args, 60)})`);
    } else if (typeof value === 'string') {
      parts.push(`${key} “${clip(value, 80)}”`);
    } else {
      parts.push(`${key} ${clip(JSON.stringify(value) ?? '', 60)}`);
    }
  }
  return parts.join(' · ') || 'no change (the same settings from here)';
}

/** Where a fork went live: the run it came from, what changed, and how its files were restored. */
const fork: Card = e => {
  const w = obj(e.workspace) ?? {};
  const problems = strings(w.problems);
  const restored =
    w.exact === false
      ? `not exactly the parent's files${problems.length ? `: ${problems.join('; ')}` : ''}`
      : `the parent's files at step ${count(e.at)}${num(w.files) !== null ? ` (${count(w.files)} files)` : ''}`;
  return card(
    e,
    `Forked from run ${str(e.parent)} at step ${count(e.at)}`,
    field('changes', forkChanges(obj(e.changes) ?? {})),
    field('workspace', restored),
    list(strings(w.caveats)),
    e.memory ? field('memory', str(e.memory)) : null
  );
};

const reflection: Card = e => {
  const impact = obj(e.impact);
  const impactLines: string[] = [];
  if (impact) {
    for (const [key, value] of Object.entries(impact)) {
      const empty = value === null || value === undefined || value === '' || (obj(value) !== null && Object.keys(obj(value) ?? {}).length === 0);
      const items = Array.isArray(value) ? strings(value) : empty ? [] : [str(value)];
      if (items.length) {
        impactLines.push(`${key.replace(/_/g, ' ')}: ${items.join('; ')}`);
      }
    }
  }
  return card(
    e,
    'Reflection',
    h(
      'div',
      null,
      badge(levelLabel(e.level, e.level_name), `level-${num(e.level) ?? 'x'}`),
      e.trigger ? h('span', { class: 'memfit-muted' }, ` trigger: ${str(e.trigger)}`) : null,
      e.ok === false ? badge('reflection failed', 'bad') : null
    ),
    text(e.summary),
    list(strings(e.suggestions), 'memfit-list memfit-suggestions'),
    impactLines.length ? list(impactLines, 'memfit-list memfit-impact') : null,
    strings(e.memory_used).length ? field('memory used', strings(e.memory_used).join(', ')) : null,
    e.error ? text(e.error, 'memfit-error') : null
  );
};

const spin: Card = e => {
  const spinning = e.is_spinning === true;
  const el = card(
    e,
    spinning ? 'Spin detected' : 'Spin check',
    h(
      'div',
      null,
      badge(e.layer === 'detector' ? 'detector' : `layer ${str(e.layer) || '?'}`, spinning ? 'bad' : 'muted'),
      e.detector ? h('span', { class: 'memfit-muted' }, ` ${str(e.detector)}`) : null,
      num(e.consecutive_count) !== null ? h('span', { class: 'memfit-muted' }, ` · ${count(e.consecutive_count)} in a row`) : null,
      num(e.warning_count) !== null ? h('span', { class: 'memfit-muted' }, ` · warning ${count(e.warning_count)}`) : null,
      e.is_task_progressing === false ? h('span', { class: 'memfit-muted' }, ' · task not progressing') : null
    ),
    text(e.reason),
    list(strings(e.suggestions), 'memfit-list memfit-suggestions'),
    strings(e.next_actions).length ? field('next actions', strings(e.next_actions).join('; ')) : null
  );
  if (spinning) {
    el.classList.add('memfit-alert');
  }
  return el;
};

const guarantee: Card = e => {
  if (e.override) {
    return card(e, 'Limits overridden', text(e.confirmed === false ? 'not confirmed' : 'confirmed'), pre(e));
  }
  const el = card(
    e,
    e.violated ? `Limit reached: ${str(e.limit)}` : `Guarantee check${e.limit ? `: ${str(e.limit)}` : ''}`,
    text(e.message),
    h(
      'div',
      { class: 'memfit-muted' },
      `cost ${money(e.cost_usd)} · elapsed ${seconds(e.elapsed_s)} · recursive calls ${count(e.recursive_calls)}`
    )
  );
  if (e.violated) {
    el.classList.add('memfit-alert');
  }
  return el;
};

const breaker: Card = e => {
  if (e.rejected === true) {
    return card(
      e,
      `Call turned away: ${str(e.tier)} breaker is open`,
      e.fallback_tier ? field('fell back to', str(e.fallback_tier)) : null,
      text(e.reason)
    );
  }
  return card(
    e,
    `Breaker ${str(e.tier)}: ${str(e.from_state) || '?'} → ${str(e.to_state) || '?'}`,
    h(
      'div',
      { class: 'memfit-muted' },
      [str(e.model), `failures ${count(e.failures)}`, `successes ${count(e.successes)}`]
        .filter(Boolean)
        .join(' · ')
    ),
    text(e.reason)
  );
};

const synthesis: Card = e => {
  const strategy = str(e.strategy) || '?';
  const clusters = Array.isArray(e.clusters) ? e.clusters.map(obj).filter(Boolean) : [];
  const samples = Array.isArray(e.samples) ? e.samples.map(obj).filter(Boolean) : [];
  const conf = num(e.confidence);
  const alternatives = Array.isArray(e.alternatives) ? e.alternatives : [];
  const chosen = e.choice !== undefined && e.choice !== null;
  const el = card(
    e,
    `Synthesis (${strategy})`,
    e.question ? text(e.question, 'memfit-muted') : null,
    h(
      'div',
      { class: 'memfit-synthesis-answer' },
      h('span', { class: 'memfit-label' }, 'answer '),
      str(e.answer) || '—',
      conf !== null ? h('span', { class: 'memfit-muted' }, ` · confidence ${percent(conf)}`) : null,
      e.low_confidence ? badge('low confidence', 'bad') : null
    ),
    clusters.length
      ? h(
          'div',
          { class: 'memfit-clusters' },
          ...clusters.slice(0, 20).map(c =>
            h(
              'div',
              { class: 'memfit-cluster' },
              h('span', { class: 'memfit-cluster-answer' }, str(c?.answer, 200)),
              bar(num(c?.share) ?? num(c?.weight) ?? 0, `${percent(num(c?.share) ?? num(c?.weight) ?? 0)} · ${count(c?.size)} sample(s)`, 2, 2)
            )
          )
        )
      : null,
    strategy === 'diverse' || alternatives.length
      ? h(
          'div',
          { class: 'memfit-diverse' },
          list(alternatives.slice(0, 20).map(a => str(obj(a)?.answer ?? a, 300)), 'memfit-list memfit-alternatives'),
          chosen
            ? field('chosen', choiceText(e.choice))
            : h('div', { class: 'memfit-muted' }, 'no choice made yet')
        )
      : null,
    e.rationale ? field('rationale', str(e.rationale)) : null,
    samples.length ? details(`${samples.length} sample(s)`, pretty(samples)) : null
  );
  if (e.low_confidence) {
    el.classList.add('memfit-alert');
  }
  return el;
};

/** A diverse choice as a person reads it: the answer and which alternative it was. */
function choiceText(choice: unknown): string {
  const c = obj(choice);
  if (!c) {
    return str(choice, 500);
  }
  const index = num(c.index);
  return `${str(c.answer, 500)}${index !== null ? ` (alternative ${index})` : ''}`;
}

const memory: Card = e => {
  const results = Array.isArray(e.results) ? e.results : [];
  const added = strings(e.added);
  return card(
    e,
    `Memory ${str(e.op) || ''}`.trim(),
    e.query ? field('query', str(e.query, 300)) : null,
    results.length ? rankingTable(readRows(results)) : null,
    added.length ? field('added', added.join(', ')) : null,
    num(e.bytes) !== null ? h('div', { class: 'memfit-muted' }, `${count(e.bytes)} bytes`) : null
  );
};

/** The context gauge: tokens used against the window, with 70% and 100% marks. */
export function contextGauge(e: MemfitEvent): HTMLElement {
  const used = num(e.used_tokens);
  const window = num(e.window);
  const ratio = num(e.ratio) ?? (used !== null && window ? used / window : 0);
  return h(
    'div',
    { class: 'memfit-gauge' },
    bar(ratio, `${count(used)} of ${count(window)} tokens (${percent(ratio)}) · ${str(e.watermark) || 'ok'}`),
    h('div', { class: 'memfit-gauge-marks' }, h('span', { class: 'memfit-mark-70' }), h('span', { class: 'memfit-mark-100' }))
  );
}

const context: Card = e =>
  card(
    e,
    `Context ${str(e.watermark) || ''}`.trim(),
    contextGauge(e),
    num(e.evicted) ? field('evicted', count(e.evicted)) : null,
    num(e.recall_size) !== null ? field('recall size', count(e.recall_size)) : null,
    e.summary ? text(e.summary) : null
  );

/** The graceful-degradation plan (also shown at the top of the run). */
export function degradationPlan(e: MemfitEvent): HTMLElement {
  const el = card(
    e,
    'Degradation plan',
    text(e.reason, 'memfit-error'),
    e.partial_result ? field('partial result', str(e.partial_result)) : null,
    text(e.explanation),
    list(strings(e.recommendations), 'memfit-list memfit-recommendations'),
    h(
      'div',
      { class: 'memfit-muted' },
      `spent ${money(e.cost_usd)} · ${seconds(e.duration_s)} · ${count(e.calls)} calls · ${count(e.iterations)} iterations`
    ),
    strings(e.tried).length ? field('tried', strings(e.tried).join(', ')) : null
  );
  el.classList.add('memfit-alert');
  return el;
}

const trial: Card = e =>
  card(
    e,
    `Trial ${count(e.trial)} of ${count(e.max_trials)}`,
    e.passed ? badge('oracle passed', 'good') : badge('oracle failed', 'bad'),
    pre(e.oracle_output),
    e.lesson ? field('lesson', str(e.lesson)) : null
  );

const error: Card = e =>
  card(
    e,
    'Error',
    text(e.message, 'memfit-error'),
    typeof e.traceback === 'string' && e.traceback ? details('traceback', clip(e.traceback)) : null
  );

const logLine: Card = e =>
  card(e, `${str(e.level) || 'Log'}: ${str(e.logger) || 'memfit'}`, text(e.message, 'memfit-error'));

const answer: Card = e =>
  card(e, 'Answer changed', text(e.answer, 'memfit-answer'), text(e.reason, 'memfit-muted'));

const runEnd: Card = e =>
  card(e, `Run ended: ${str(e.status) || '?'}`, text(e.answer, 'memfit-answer'), text(e.reason, 'memfit-muted'));

const SKIP = new Set(['type', 'iteration', 'ts']);

/** A field value as text; fractions keep four significant digits, not seventeen. */
function readable(value: unknown): string {
  const n = num(value);
  if (n !== null && !Number.isInteger(n)) {
    return String(Number(n.toPrecision(4)));
  }
  return str(value, 500);
}

/** The card for a type this extension does not know: its fields, one per line. */
export function genericCard(e: MemfitEvent): HTMLElement {
  const fields = Object.entries(e).filter(([key]) => !SKIP.has(key));
  return card(
    e,
    e.type,
    ...fields.slice(0, 40).map(([key, value]) => field(key, readable(value))),
    fields.length > 40 ? text(`… ${fields.length - 40} more fields`, 'memfit-muted') : null
  );
}

/** A card per known type (keys checked against the generated catalogue); the others get `genericCard`. */
export const CARDS: { [K in EventType]?: Card } = {
  run_start: runStart,
  model_call: modelCall,
  format_error: formatError,
  action,
  observation,
  approval,
  note,
  fork,
  reflection,
  spin,
  guarantee,
  breaker,
  synthesis,
  memory,
  context,
  degradation: degradationPlan,
  trial,
  error,
  log: logLine,
  answer,
  run_end: runEnd
};

/**
 * Events behind the "show model calls, triage and context" toggle: routine
 * bookkeeping that a long run has many of.  Failures are never minor.
 */
export function isMinor(e: MemfitEvent): boolean {
  switch (e.type) {
    case 'model_call':
      return e.ok !== false;
    case 'context':
      return !e.watermark || e.watermark === 'ok';
    case 'memory':
      return e.op === 'triage' || e.op === 'insert' || !(Array.isArray(e.results) && e.results.length);
    case 'guarantee':
      return !e.violated && !e.override;
    default:
      return /_delta$/.test(e.type);
  }
}

/** The card for any event; a card that fails to draw falls back to the generic one. */
export function eventCard(e: MemfitEvent): HTMLElement {
  const make = (Object.prototype.hasOwnProperty.call(CARDS, e.type) && CARDS[e.type as EventType]) || genericCard;
  try {
    return make(e);
  } catch {
    return genericCard(e);
  }
}
