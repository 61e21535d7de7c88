/**
 * Renderer tests.  Real traces come from the engine: tests/test_labextension.py
 * writes fresh ones into $MEMFIT_TRACE_DIR; run alone, jest reads the copies in
 * test/fixtures.
 */

import * as fs from 'fs';
import * as path from 'path';

import extensions, { COMPARE_MIME, MEMORY_MIME, RANK, RUN_MIME } from '../src/index';
import { estimateLine, LiveRunView } from '../src/live';
import { LiveState } from '../src/livestate';
import { Controls, LiveSource, registerLive, unregisterLive } from '../src/liveregistry';
import { renderCompare } from '../src/compare';
import { renderMemory } from '../src/memory';
import { MAX_RESULTS, MemfitEvent } from '../src/payload';
import { EAGER_EVENTS, headOf, renderRun } from '../src/run';
import { addDelta, thoughtOf } from '../src/stream';
import { MemfitRenderer } from '../src/widget';

import { FakeLink } from './fakelink';

const TRACE_DIR = process.env.MEMFIT_TRACE_DIR || path.join(__dirname, 'fixtures');

function trace(name: string): any {
  return JSON.parse(fs.readFileSync(path.join(TRACE_DIR, `${name}.json`), 'utf8'));
}

/** One event of every catalogued type plus one unknown type (also used by the saved notebook). */
function catalogueTrace(): any {
  return JSON.parse(fs.readFileSync(path.join(__dirname, 'fixtures', 'catalogue.json'), 'utf8'));
}

function texts(root: HTMLElement, selector: string): string[] {
  return Array.from(root.querySelectorAll(selector)).map(n => n.textContent ?? '');
}

describe('run renderer on real engine traces', () => {
  it('shows the header, totals and every iteration of the demo run', () => {
    const t = trace('demo');
    const root = renderRun(t);
    expect(root.querySelector('.memfit-problems')).toBeNull();
    const head = root.querySelector('.memfit-header')!.textContent!;
    expect(head).toContain('done');
    expect(head).toContain(t.task);
    expect(head).toContain(t.answer);
    expect(head).toContain(t.run_id);
    const iterations = Array.from(root.querySelectorAll('.memfit-iteration')).map(n =>
      n.getAttribute('data-iteration')
    );
    expect(iterations).toEqual(['0', '1', '2', '3']);
    const tools = texts(root, '.memfit-event-action .memfit-tool');
    expect(tools).toEqual(t.events.filter((e: any) => e.type === 'action').map((e: any) => e.tool));
    const thoughts = texts(root, '.memfit-thought');
    expect(thoughts[0]).toBe(t.events.find((e: any) => e.type === 'action').thought);
    const outputs = texts(root, '.memfit-event-observation pre');
    expect(outputs).toContain(t.events.find((e: any) => e.type === 'observation' && e.tool === 'python').output);
    const totals = root.querySelector('.memfit-totals')!.textContent!;
    expect(totals).toContain(`tokens ${t.totals.tokens.total.toLocaleString('en-US')}`);
    expect(totals).toContain(`calls ${t.totals.calls}`);
    // params are shown as JSON
    expect(root.textContent).toContain('"path": "data.txt"');
  });

  it('says a model has no known price instead of showing a free run', () => {
    const t = trace('demo');
    const free = renderRun({ ...t, totals: { ...t.totals, cost_usd: 0, unpriced: ['openai/local'] } });
    const cost = free.querySelector('.memfit-totals .memfit-unpriced') as HTMLElement;
    expect(cost.textContent).toBe('no price known');
    expect(cost.title).toBe('no price known for openai/local');
    const mixed = renderRun({ ...t, totals: { ...t.totals, cost_usd: 0.25, unpriced: ['openai/local'] } });
    expect(mixed.querySelector('.memfit-totals')!.textContent).toContain('$0.2500 + calls with no price');
    expect(renderRun(t).querySelector('.memfit-unpriced')).toBeNull();
  });

  it('draws budget bars against the run limits', () => {
    const t = trace('demo');
    const root = renderRun(t);
    const rows = texts(root, '.memfit-budget-row');
    expect(rows.find(r => r.startsWith('iterations'))).toContain(`${t.totals.iterations} of ${t.limits.max_iterations}`);
    const fill = root.querySelector('.memfit-budget-row .memfit-bar-fill') as HTMLElement;
    const expected = (t.totals.cost_usd / t.limits.max_cost_usd) * 100;
    expect(parseFloat(fill.style.width)).toBeCloseTo(expected, 3);
  });

  it('shows a failed run and why it ended, with the breaker that opened', () => {
    const t = trace('outage');
    expect(t.status).toBe('failed');
    const root = renderRun(t);
    expect(root.querySelector('.memfit-header .memfit-badge-bad')!.textContent).toBe('failed');
    expect(root.querySelector('.memfit-reason')!.textContent).toBe(`Failed: ${t.reason}`);
    const opened = t.events.filter((e: any) => e.type === 'breaker' && e.rejected !== true);
    const lastState = opened[opened.length - 1].to_state;
    const chip = root.querySelector('.memfit-breaker[data-tier="primary"]')!;
    expect(chip.getAttribute('data-state')).toBe(lastState);
    const rejected = t.events.filter((e: any) => e.type === 'breaker' && e.rejected === true).length;
    expect(texts(root, '.memfit-event-breaker .memfit-event-title').filter(s => s.startsWith('Call turned away')).length).toBe(rejected);
  });

  it('says a saved copy of a run that had not ended is unfinished, not running', () => {
    const t = trace('demo');
    const cut = { ...t, status: 'running', reason: '', events: t.events.filter((e: any) => e.type !== 'run_end') };
    const root = renderRun(cut);
    expect(root.querySelector('.memfit-header .memfit-status')!.textContent).toBe('unfinished');
    expect(root.querySelector('.memfit-reason')!.textContent).toMatch(/^Not ended: saved while running: the run had not ended/);
    expect(renderRun(t).querySelector('.memfit-header .memfit-status')!.textContent).toBe('done');
  });

  it('badges every reflection and spin of a spinning run', () => {
    const t = trace('spin-demo');
    const root = renderRun(t);
    const reflections = t.events.filter((e: any) => e.type === 'reflection');
    const spins = t.events.filter((e: any) => e.type === 'spin' && e.is_spinning === true);
    expect(reflections.length).toBeGreaterThan(0);
    expect(spins.length).toBeGreaterThan(0);
    expect(root.querySelectorAll('.memfit-iteration-title [class*="memfit-badge-level-"]').length).toBe(reflections.length);
    expect(root.querySelectorAll('.memfit-event-spin.memfit-alert').length).toBe(spins.length);
    expect(root.querySelector('.memfit-event-spin.memfit-alert')!.textContent).toContain(spins[0].reason);
  });

  it('shows the synthesis of disagreeing samples', () => {
    const t = trace('disagree');
    const syn = t.events.find((e: any) => e.type === 'synthesis');
    const card = renderRun(t).querySelector('.memfit-event-synthesis')!;
    expect(card.textContent).toContain(`Synthesis (${syn.strategy})`);
    expect(card.querySelectorAll('.memfit-cluster').length).toBe(syn.clusters.length);
  });

  it('gauges the context window from the last context event', () => {
    const t = trace('context-overflow');
    const ctx = t.events.filter((e: any) => e.type === 'context');
    const last = ctx[ctx.length - 1];
    const gauge = renderRun(t).querySelector('.memfit-context .memfit-bar-fill') as HTMLElement;
    expect(parseFloat(gauge.style.width)).toBeCloseTo(Math.min(1, last.ratio) * 100, 3);
  });

  it('shows malformed model replies and the failed observation they caused', () => {
    const t = trace('bad-output');
    const root = renderRun(t);
    const formatErrors = root.querySelectorAll('.memfit-event-format_error');
    expect(formatErrors.length).toBe(t.events.filter((e: any) => e.type === 'format_error').length);
    expect(formatErrors[0].textContent).toContain('reply does not fit the action schema');
    expect(texts(root, '.memfit-iteration-title').some(s => s.includes('failed action'))).toBe(true);
  });
});

describe('run renderer on every catalogued event type', () => {
  const root = renderRun(catalogueTrace());

  it('badges reflection levels and spin on the iteration titles', () => {
    const titles = texts(root, '.memfit-iteration-title');
    expect(titles[1]).toContain('L4 critical');
    expect(titles[1]).toContain('failed action');
    expect(titles[2]).toContain('spin');
    expect(titles[3]).toContain('synthesis diverse');
  });

  it('renders reflection, spin, breaker and context cards', () => {
    const refl = root.querySelector('.memfit-event-reflection')!.textContent!;
    expect(refl).toContain('trigger: execution failure');
    expect(refl).toContain('list data/ before reading');
    expect(refl).toContain('negative effects: wasted a call');
    expect(refl).not.toContain('resource usage'); // empty in this trace
    const spin = root.querySelector('.memfit-event-spin')!;
    expect(spin.classList.contains('memfit-alert')).toBe(true);
    expect(spin.textContent).toContain('Spin detected');
    expect(spin.textContent).toContain('the same read_file call 3 times in a row');
    expect(spin.textContent).toContain('3 in a row');
    expect(texts(root, '.memfit-event-breaker .memfit-event-title')).toEqual([
      'Breaker primary: CLOSED → OPEN',
      'Call turned away: primary breaker is open'
    ]);
    const gauge = root.querySelector('.memfit-context')!;
    expect(gauge.textContent).toContain('5,800 of 8,000 tokens (73%) · warning');
    expect(gauge.querySelector('.memfit-bar')!.getAttribute('data-level')).toBe('warn');
  });

  it('summarises breaker states per tier', () => {
    const chips = Array.from(root.querySelectorAll('.memfit-breaker')).map(n => [
      n.getAttribute('data-tier'),
      n.getAttribute('data-state')
    ]);
    expect(chips).toEqual([
      ['primary', 'OPEN'],
      ['fast', 'CLOSED'],
      ['fallback', 'CLOSED']
    ]);
  });

  it('shows the synthesis, the choice made for diverse, and low confidence', () => {
    const syn = root.querySelector('.memfit-event-synthesis')!;
    expect(syn.textContent).toContain('Synthesis (diverse)');
    expect(syn.textContent).toContain('confidence 55%');
    expect(syn.textContent).toContain('low confidence');
    expect(syn.querySelector('.memfit-diverse')!.textContent).toContain('chosen revenue');
    expect(texts(syn as HTMLElement, '.memfit-alternatives li')).toEqual(['revenue', 'costs']);
    const widths = Array.from(syn.querySelectorAll('.memfit-bar-fill')).map(n => (n as HTMLElement).style.width);
    expect(widths).toEqual(['60%', '40%']);
  });

  it('says when a diverse synthesis still waits for a choice', () => {
    const t = catalogueTrace();
    delete t.events.find((e: any) => e.type === 'synthesis').choice;
    const syn = renderRun(t).querySelector('.memfit-event-synthesis')!;
    expect(syn.textContent).toContain('no choice made yet');
  });

  it('shows the degradation plan at the top and in the timeline', () => {
    const plans = root.querySelectorAll('.memfit-event-degradation');
    expect(plans.length).toBe(2);
    expect(plans[0].textContent).toContain('raise --max-cost');
    expect(plans[0].textContent).toContain('partial result Revenue grew 12%');
    const limit = root.querySelector('.memfit-event-guarantee')!;
    expect(limit.textContent).toContain('Limit reached: max_cost_usd');
    // cost bar is over its limit
    const cost = root.querySelector('.memfit-budget-row .memfit-bar')!;
    expect(cost.getAttribute('data-level')).toBe('over');
  });

  it('ranks memory results inside memory events', () => {
    const mem = root.querySelector('.memfit-event-memory')!;
    expect(texts(mem as HTMLElement, '.memfit-memory-content')).toEqual([
      'CSV files here use semicolons',
      'Q4 data arrives late'
    ]);
  });

  it('renders trial, approval, error and unknown event types', () => {
    expect(root.querySelector('.memfit-event-trial')!.textContent).toContain('Trial 1 of 3');
    expect(root.querySelector('.memfit-event-trial')!.textContent).toContain('lesson check every quarter');
    expect(root.querySelector('.memfit-event-approval')!.textContent).toContain('Approval approved');
    expect(root.querySelector('.memfit-event-error')!.textContent).toContain('tool crashed');
    const unknown = root.querySelector('[data-type="future_event"]')!;
    expect(unknown.textContent).toContain('gizmo sprocket');
    expect(unknown.textContent).toContain('level 7');
  });

  it('falls back to a generic card when a known type has odd fields', () => {
    const t = catalogueTrace();
    t.events = [{ type: 'synthesis', iteration: 1, ts: 0, clusters: 'not a list', alternatives: 5 }];
    const r = renderRun(t);
    expect(r.querySelector('[data-type="synthesis"]')).not.toBeNull();
  });
});

describe('bad run payloads render a readable message', () => {
  it.each([
    [null, 'expected a JSON object, got null'],
    ['a string', 'expected a JSON object, got a string'],
    [[1, 2], 'expected a JSON object, got a list'],
    [42, 'expected a JSON object, got a number']
  ])('not an object: %p', (data, message) => {
    const root = renderRun(data);
    expect(root.querySelector('.memfit-problems')!.textContent).toContain(message);
    expect(root.querySelector('.memfit-failure')).not.toBeNull();
  });

  it('lists missing fields and still renders what it has', () => {
    const root = renderRun({ version: 1, task: 'only a task' });
    expect(root.querySelector('.memfit-problems')!.textContent).toBe(
      'This memfit run is missing fields: run_id, status, totals, events.'
    );
    expect(root.querySelector('.memfit-title')!.textContent).toBe('only a task');
    expect(root.querySelector('.memfit-empty')!.textContent).toBe('No events recorded.');
  });

  it('warns about an unknown version and shows what it can', () => {
    const t = trace('demo');
    t.version = 99;
    const root = renderRun(t);
    expect(root.querySelector('.memfit-problems')!.textContent).toContain(
      'This memfit run is version 99, but this extension reads version 1'
    );
    expect(root.querySelectorAll('.memfit-iteration').length).toBe(4);
  });

  it('skips events without a type and says so', () => {
    const t = trace('demo');
    t.events.push(5, { no: 'type' }, null);
    const root = renderRun(t);
    expect(root.querySelector('.memfit-problems')!.textContent).toContain('3 event(s) without a type were skipped.');
  });

  it('explains events that are not a list', () => {
    const root = renderRun({ ...trace('demo'), events: { a: 1 } });
    expect(root.querySelector('.memfit-problems')!.textContent).toContain("The run's events should be a list, got an object.");
  });

  it('draws a huge trace one line per iteration, bodies when opened, and clips huge text', () => {
    const t = trace('demo');
    const n = 20_000;
    t.events = Array.from({ length: n }, (_, i) => ({
      type: 'observation',
      iteration: i + 1,
      ts: i,
      tool: 'python',
      ok: true,
      output: i === 0 ? 'x'.repeat(1_000_000) : `out ${i}`,
      error: null
    }));
    expect(n).toBeGreaterThan(EAGER_EVENTS);
    const root = renderRun(t);
    const blocks = root.querySelectorAll('.memfit-iteration');
    expect(blocks.length).toBe(n);
    expect(root.querySelectorAll('.memfit-event').length).toBe(0); // nothing drawn until opened
    expect(blocks[n - 1].getAttribute('data-iteration')).toBe(String(n));
    const first = blocks[0] as HTMLDetailsElement;
    first.open = true;
    first.dispatchEvent(new Event('toggle'));
    const pre = first.querySelector('.memfit-event-observation pre')!.textContent!;
    expect(pre.length).toBeLessThan(2100);
    expect(pre).toContain('(998000 more characters)');
  });

  it('never turns payload text into HTML', () => {
    const t = trace('demo');
    t.task = '<img src=x onerror="window.pwned=1">';
    t.events[0].tools = ['<script>bad()</script>'];
    const root = renderRun(t);
    expect(root.querySelector('img')).toBeNull();
    expect(root.querySelector('script')).toBeNull();
    expect(root.querySelector('.memfit-title')!.textContent).toBe(t.task);
  });
});

function ranking(): any {
  return {
    version: 1,
    query: 'csv parsing',
    results: [
      { id: 'a1', content: 'CSV uses semicolons', tags: ['csv'], score: 0.8, breakdown: { r: 1, c: 0.5, t: 0.25, a: 0, p: 0.1, o: 0.9, e: 0, keyword_bonus: 0.18, semantic: 0.7, final: 0.8 } },
      { id: 'b2', content: 'Dates are ISO', tags: [], score: 0.4, breakdown: { r: 0.2, c: 0.1, t: 0.1, a: 0.1, p: 0.1, o: 0.1, e: 0.1, keyword_bonus: 0, semantic: 0.3, final: 0.4 } }
    ]
  };
}

describe('memory ranking renderer', () => {
  it('draws one row per result with score bars on an absolute scale', () => {
    const root = renderMemory(ranking());
    expect(root.querySelector('.memfit-problems')).toBeNull();
    expect(root.querySelector('.memfit-header')!.textContent).toContain('“csv parsing” 2 results');
    const withBytes = renderMemory({ ...ranking(), bytes: 1234, bytes_limit: 2048 });
    expect(withBytes.querySelector('.memfit-header')!.textContent).toContain('2 results · 1,234 bytes (limit 2,048)');
    const rows = root.querySelectorAll('.memfit-rank-row');
    expect(rows.length).toBe(2);
    const finals = Array.from(root.querySelectorAll('.memfit-final .memfit-bar-fill')).map(n => (n as HTMLElement).style.width);
    expect(finals).toEqual(['80%', '40%']); // the scores themselves, not a share of the best
    expect(root.querySelector('.memfit-nothing-relevant')).toBeNull();
    // every result at or under the floor (no word of the query in any): said, and the rows muted
    const weak = renderMemory({ ...ranking(), floor: 0.9, score_label: 'final score' });
    expect(weak.querySelector('.memfit-nothing-relevant')!.textContent).toContain('Nothing relevant');
    expect(weak.querySelectorAll('.memfit-below-floor').length).toBe(2);
    expect(renderMemory({ ...ranking(), floor: 0.5 }).querySelector('.memfit-nothing-relevant')).toBeNull();
    // a list has no query: the stored score, named so
    const listed = renderMemory({ ...ranking(), query: '', score_label: 'stored score' });
    expect(listed.querySelector('th[data-key=final]')!.textContent).toBe('stored score');
    const first = rows[0];
    expect(first.querySelector('.memfit-memory-content')!.textContent).toBe('CSV uses semicolons');
    expect(first.querySelector('code')!.textContent).toBe('a1');
    const dims = Array.from(first.querySelectorAll('.memfit-dim')).map(n => n.getAttribute('title'));
    expect(dims).toEqual([
      'Relevance: 1.00',
      'Connectivity: 0.50',
      'Temporality: 0.25',
      'Actionability: 0.00',
      'Preference: 0.10',
      'Origin: 0.90',
      'Emotion: 0.00'
    ]);
    expect(texts(first as HTMLElement, '.memfit-num')).toEqual(['0.18', '0.70']);
  });

  it('reads score when the breakdown is missing', () => {
    const r = ranking();
    delete r.results[1].breakdown;
    const root = renderMemory(r);
    expect(root.querySelectorAll('.memfit-rank-row')[1].querySelector('.memfit-bar-label')!.textContent).toBe('0.40');
    expect(root.querySelectorAll('.memfit-rank-row')[1].querySelector('.memfit-dim')!.textContent).toBe('—');
  });

  it('explains bad payloads', () => {
    expect(renderMemory(null).textContent).toContain('not a memfit memory ranking');
    expect(renderMemory({ version: 1, query: 'q' }).textContent).toContain('missing fields: results');
    const v2 = renderMemory({ ...ranking(), version: 2 });
    expect(v2.querySelector('.memfit-problems')!.textContent).toContain('version 2');
    expect(v2.querySelectorAll('.memfit-rank-row').length).toBe(2);
    expect(renderMemory({ version: 1, results: [] }).textContent).toContain('No memories matched.');
  });

  it('cuts a huge ranking', () => {
    const r = ranking();
    r.results = Array.from({ length: 5000 }, (_, i) => ({ ...r.results[0], id: `m${i}` }));
    const root = renderMemory(r);
    expect(root.querySelectorAll('.memfit-rank-row').length).toBe(MAX_RESULTS);
    expect(root.querySelector('.memfit-problems')!.textContent).toContain(`Showing the first ${MAX_RESULTS} of 5000 results.`);
  });
});

describe('compare renderer', () => {
  it('draws the table, where the runs diverged and both runs side by side', () => {
    const a = trace('demo');
    const b = trace('spin-demo');
    const root = renderCompare({
      version: 1,
      labels: ['on', 'off'],
      runs: [a, b],
      rows: [
        { label: 'outcome', kind: 'text', values: [a.status, b.status] },
        { label: 'cost', kind: 'money', values: [0.5, 0.5] },
        { label: 'iterations', kind: 'count', values: [3, 6] }
      ],
      diverged: { iteration: 2, a: 'python(code=1)', b: 'read_file(path=x)' }
    });
    expect(root.querySelector('.memfit-title')!.textContent).toBe('on vs off');
    const iterations = root.querySelector('tr[data-row="iterations"]')!;
    expect(texts(iterations as HTMLElement, 'td')).toEqual(['3', '6']);
    expect(iterations.querySelectorAll('.memfit-differs').length).toBe(2);
    expect(root.querySelector('tr[data-row="cost"] .memfit-differs')).toBeNull();
    expect(root.querySelector('.memfit-diverged')!.textContent).toBe('Diverged at iteration 2: python(code=1) vs read_file(path=x)');
    const sides = root.querySelectorAll('.memfit-side-by-side > .memfit-side');
    expect(sides.length).toBe(2);
    expect(sides[1].querySelector('.memfit-title')!.textContent).toBe(b.task);
  });

  it('explains a payload that is not two runs', () => {
    expect(renderCompare({ version: 1, runs: [1] }).textContent).toContain('expected a comparison of two runs');
  });
});

describe('the JupyterLab extension', () => {
  it('registers its MIME types, safe, ranked above text/html', () => {
    const byType = Object.fromEntries(extensions.map(e => [e.rendererFactory.mimeTypes[0], e]));
    expect(Object.keys(byType).sort()).toEqual([COMPARE_MIME, MEMORY_MIME, RUN_MIME].sort());
    for (const ext of extensions) {
      expect(ext.rank).toBe(RANK);
      expect(ext.rendererFactory.safe).toBe(true);
      expect(ext.dataType).toBe('json');
    }
    expect(RANK).toBeLessThan(50); // JupyterLab's HTML renderer rank
  });

  it('renders a model into the widget node', async () => {
    const widget = runRenderer();
    const t = trace('demo');
    await widget.renderModel({ data: { [RUN_MIME]: t }, trusted: false, metadata: {}, setData: () => undefined });
    expect(widget.node.classList.contains('jp-MemfitRenderer')).toBe(true);
    expect(widget.node.textContent).toContain(t.answer);
    // a second render replaces the first
    await widget.renderModel({ data: { [RUN_MIME]: { version: 1 } }, trusted: false, metadata: {}, setData: () => undefined });
    expect(widget.node.querySelectorAll('.memfit-root').length).toBe(1);
    expect(widget.node.textContent).toContain('missing fields');
  });

  function runRenderer(): MemfitRenderer {
    const ext = extensions.find(e => e.rendererFactory.mimeTypes[0] === RUN_MIME)!;
    return ext.rendererFactory.createRenderer({
      mimeType: RUN_MIME,
      sanitizer: {} as any,
      resolver: null,
      linkHandler: null,
      latexTypesetter: null
    }) as MemfitRenderer;
  }

  /** A run streamed as the kernel streams it: events in batches, controls as they change. */
  class Stream extends FakeLink implements LiveSource {
    constructor(readonly liveId: string) {
      super();
    }
    head: Record<string, unknown> = {};
    events: MemfitEvent[] = [];
    controls: Controls = { status: 'running', busy: true, buttons: [] };
    batch(head: Record<string, unknown>, events: MemfitEvent[]): void {
      this.head = head;
      this.events.push(...events);
      this.tell({ kind: 'batch', events });
    }
    setControls(c: Controls): void {
      this.controls = c;
      this.tell({ kind: 'controls' });
    }
    close(): void {
      this.closed = true;
      this.tell({ kind: 'closed' });
    }
  }

  /** The DOM of a run view, with open/closed (view state, not content) left out. */
  const dom = (el: Element) => el.innerHTML.replace(/ open=""/g, '');

  it.each(['demo', 'spin-demo', 'outage', 'disagree', 'context-overflow'])(
    'draws the same DOM live, batch by batch, as saved (%s)',
    name => {
      const t = trace(name);
      const stream = new Stream('m1');
      const live = new LiveRunView(stream);
      // uneven batches, as the throttle cuts them
      for (let i = 0, size = 1; i < t.events.length; i += size, size = (size * 3) % 7 + 1) {
        stream.batch({ ...headOf(t), status: 'running' }, t.events.slice(i, i + size));
      }
      stream.batch(headOf(t), []);
      stream.setControls({ status: 'done', buttons: [] });
      const saved = renderRun(t);
      expect(dom(live.run.root)).toBe(dom(saved));
      // JupyterLab saves a notebook's JSON with sorted keys: the reopened run is the same DOM
      const sortKeys = (v: any): any =>
        Array.isArray(v) ? v.map(sortKeys) : v && typeof v === 'object' ? Object.fromEntries(Object.keys(v).sort().map(k => [k, sortKeys(v[k])])) : v;
      expect(dom(renderRun(sortKeys(t)))).toBe(dom(saved));
      live.dispose();
    }
  );

  it('draws a live run from its widget model, then the saved trace once the kernel is gone', async () => {
    const t = trace('demo');
    const stream = new Stream('model-7');
    registerLive(stream);
    const widget = runRenderer();
    const metadata = { [RUN_MIME]: { version: 1, live_widget: 'model-7' } };
    const start = { ...headOf(t), status: 'running', events: [] };
    await widget.renderModel({ data: { [RUN_MIME]: start }, trusted: false, metadata, setData: () => undefined });
    expect(widget.node.querySelector('.memfit-live')).not.toBeNull();
    stream.batch(headOf(t), t.events.slice(0, 5));
    expect(widget.node.querySelectorAll('.memfit-iteration').length).toBe(new Set(t.events.slice(0, 5).map((e: any) => e.iteration)).size);
    expect(widget.node.querySelector('.memfit-spinner')).not.toBeNull();
    // the kernel updates the saved copy as the run settles: the live view stays
    await widget.renderModel({ data: { [RUN_MIME]: t }, trusted: false, metadata, setData: () => undefined });
    expect(widget.node.querySelector('.memfit-live')).not.toBeNull();
    stream.close();
    unregisterLive('model-7');
    expect(widget.node.querySelector('.memfit-live')).toBeNull();
    expect(widget.node.querySelector('.memfit-header')!.textContent).toContain(t.answer);
    widget.dispose();
  });

  it('goes live when the widget model arrives after the output', async () => {
    const t = trace('demo');
    const widget = runRenderer();
    const metadata = { [RUN_MIME]: { version: 1, live_widget: 'model-late' } };
    await widget.renderModel({ data: { [RUN_MIME]: t }, trusted: false, metadata, setData: () => undefined });
    expect(widget.node.querySelector('.memfit-live')).toBeNull();
    const stream = new Stream('model-late');
    registerLive(stream);
    expect(widget.node.querySelector('.memfit-live')).not.toBeNull();
    unregisterLive('model-late');
    widget.dispose();
  });

  it('asks about a waiting tool call as text, with no Continue, and sends the answer', () => {
    const stream = new Stream('m2');
    const live = new LiveRunView(stream);
    stream.setControls({
      status: 'waiting for approval',
      buttons: ['approve', 'reject', 'abort'],
      approval: { tool: 'read_file', params: { path: "<b>it's.txt</b>" } }
    });
    const text = live.root.querySelector('.memfit-approval')!.textContent!;
    expect(text).toBe('Approve the call read_file({"path":"<b>it\'s.txt</b>"})?');
    expect(live.root.querySelector('.memfit-approval b')).toBeNull();
    const actions = Array.from(live.root.querySelectorAll('.memfit-controls button')).map(b => b.getAttribute('data-action'));
    expect(actions).toEqual(['approve', 'reject', 'abort']);
    (live.root.querySelector('button[data-action="approve"]') as HTMLButtonElement).click();
    expect(stream.sent).toEqual([{ action: 'approve' }]);
    // every button waits for the kernel's answer
    expect(Array.from(live.root.querySelectorAll('.memfit-controls button')).every(b => (b as HTMLButtonElement).disabled)).toBe(true);
    live.dispose();
  });

  it('asks for confirmation before an override, then sends the new limit', () => {
    const stream = new Stream('m3');
    const live = new LiveRunView(stream);
    stream.setControls({ status: 'degraded', buttons: ['override'], override_cost: 2 });
    (live.root.querySelector('button[data-action="override"]') as HTMLButtonElement).click();
    expect(stream.sent).toEqual([]);
    const input = live.root.querySelector('.memfit-override-cost') as HTMLInputElement;
    expect(input.value).toBe('2');
    input.value = '3.5';
    (live.root.querySelector('button[data-action="confirm_override"]') as HTMLButtonElement).click();
    expect(stream.sent).toEqual([{ action: 'override', max_cost_usd: 3.5 }]);
    live.dispose();
  });

  it('shows what changed in the next prompt, guidance highlighted', () => {
    const stream = new Stream('m4');
    const live = new LiveRunView(stream);
    const first = [
      { role: 'system', content: 'You are an agent.' },
      { role: 'user', content: 'Task: add up data.txt' }
    ];
    stream.setControls({ status: 'paused', buttons: ['step', 'continue', 'abort'], prompt: first });
    const second = [...first, { role: 'assistant', content: 'read_file data.txt' }, { role: 'user', content: '[SYSTEM] Reflection: list the directory first.' }];
    stream.setControls({ status: 'paused', buttons: ['step', 'continue', 'abort'], prompt: second });
    const xray = live.root.querySelector('.memfit-xray')!;
    expect(xray.querySelector('summary')!.textContent).toBe('X-ray: the next prompt · 2 new messages since the last step · 1 guidance');
    expect(xray.querySelectorAll(':scope > .memfit-message').length).toBe(2);
    expect(xray.querySelector(':scope > .memfit-guidance')!.textContent).toContain('list the directory first');
    expect(xray.querySelectorAll('.memfit-prompt-full .memfit-message').length).toBe(4);
    live.dispose();
  });
});

/** A live run fed with the kernel's own messages, held as the widget model holds them (LiveState). */
class KernelFeed extends FakeLink implements LiveSource {
  constructor(readonly liveId: string) {
    super();
  }
  state = new LiveState();
  controls: Controls = { status: 'running', busy: true, buttons: [] };
  get head() {
    return this.state.head;
  }
  get events() {
    return this.state.events;
  }
  get streaming() {
    return this.state.streaming;
  }
  /** One message from the kernel, as widget.py sends it. */
  message(content: unknown): void {
    const { changes, sync } = this.state.take(content);
    if (sync !== undefined) {
      this.sent.push({ action: 'sync', have: sync });
    }
    changes.forEach(change => this.tell(change));
  }
  setControls(c: Controls): void {
    this.controls = c;
    this.tell({ kind: 'controls' });
  }
}

const domOf = (el: Element) => el.innerHTML.replace(/ open=""/g, '');

describe('a reply streaming in', () => {
  it('reads the thought out of a partial JSON reply, escapes and all', () => {
    expect(thoughtOf('{"thought": "First I need')).toBe('First I need');
    expect(thoughtOf('{"thought": "a \\"quoted\\" line\\nand more", "tool": "x"}')).toBe('a "quoted" line\nand more');
    expect(thoughtOf('{"thought": "cut in two \\')).toBe('cut in two ');
    expect(thoughtOf('{"thought": "caf\\u00e9 \\u00')).toBe('café ');
    expect(thoughtOf('{"action_type": "read", ')).toBe(''); // no thought yet
    expect(thoughtOf('I think I should read the file.')).toBe('I think I should read the file.');
  });

  it('notices pieces that never arrived', () => {
    const d = (text: string, chars: number) => ({ type: 'model_delta' as const, iteration: 2, ts: 1, purpose: 'action', model: 'm', text, chars });
    let s = addDelta(null, d('{"tho', 5));
    s = addDelta(s, d('ught"', 10));
    expect(s.text).toBe('{"thought"');
    expect(s.gap).toBe(false);
    expect(addDelta(s, d('xyz', 40)).gap).toBe(true);
    // a new call starts afresh
    expect(addDelta(s, { ...d('{', 1), iteration: 3 }).text).toBe('{');
  });

  it('shows the thought as it is written in its row, then the parsed action; the end is the saved DOM', () => {
    const t = trace('demo');
    const feed = new KernelFeed('s1');
    const live = new LiveRunView(feed);
    let start = 0;
    let sawStreaming = 0;
    const head = { ...headOf(t), status: 'running' };
    t.events.forEach((e: any, i: number) => {
      if (e.type === 'model_call' && e.purpose === 'action' && e.ok) {
        // the events before the call, then its reply in pieces of 7 characters
        feed.message({ kind: 'batch', start, events: t.events.slice(start, i), head });
        start = i;
        const reply: string = e.reply;
        for (let at = 0; at < reply.length; at += 7) {
          feed.message({ kind: 'delta', event: { type: 'model_delta', iteration: e.iteration, ts: 0, purpose: 'action', model: e.model, text: reply.slice(at, at + 7), chars: Math.min(reply.length, at + 7) } });
          const row = live.run.block(e.iteration)!.querySelector('.memfit-stream-row')!;
          expect(row.querySelector('.memfit-badge')!.textContent).toBe('streaming');
          const thought = thoughtOf(reply.slice(0, at + 7));
          expect(row.querySelector('.memfit-stream-text')!.textContent).toBe(thought || `action: ${Math.min(reply.length, at + 7)} characters`);
          expect(live.root.querySelector('.memfit-streaming-note')!.textContent).toContain('streaming the action');
          sawStreaming += 1;
        }
        const whole = JSON.parse(reply).thought;
        expect(live.run.block(e.iteration)!.querySelector('.memfit-stream-thought')!.textContent).toBe(whole);
        expect(live.root.querySelectorAll('.memfit-stream-row').length).toBe(1);
      }
    });
    expect(sawStreaming).toBeGreaterThan(10);
    // the rest, with the last call's model_call: the parsed action replaces the stream
    feed.message({ kind: 'batch', start, events: t.events.slice(start), head: headOf(t) });
    feed.setControls({ status: 'done', buttons: [] });
    expect(live.root.querySelector('.memfit-stream-row, .memfit-stream, .memfit-streaming-note')).toBeNull();
    expect(domOf(live.run.root)).toBe(domOf(renderRun(t)));
    // nothing streamed is an event: what the view holds is the trace
    expect(feed.events).toEqual(t.events);
    live.dispose();
  });

  it('ends the stream of a call that failed mid-way and shows what had streamed', () => {
    const feed = new KernelFeed('s2');
    const live = new LiveRunView(feed);
    feed.message({ kind: 'batch', start: 0, events: [{ type: 'run_start', iteration: 0, ts: 0, task: 't', tools: [] }], head: { status: 'running' } });
    feed.message({ kind: 'delta', event: { type: 'model_delta', iteration: 1, ts: 1, purpose: 'action', model: 'm', text: '{"thought": "Half a tho', chars: 23 } });
    expect(live.run.block(1)!.querySelector('.memfit-stream-text')!.textContent).toBe('Half a tho');
    // a model_call of another purpose or iteration does not end it
    feed.message({ kind: 'batch', start: 1, events: [{ type: 'model_call', iteration: 0, ts: 1, purpose: 'action', ok: true }] });
    expect(feed.streaming).not.toBeNull();
    feed.message({ kind: 'batch', start: 2, events: [{ type: 'model_call', iteration: 1, ts: 2, purpose: 'action', ok: false, error: 'interrupted by the person', error_kind: 'cancelled', partial_reply: '{"thought": "Half a tho' }] });
    expect(feed.streaming).toBeNull();
    expect(live.root.querySelector('.memfit-stream-row')).toBeNull();
    const call = live.run.block(1)!.querySelector('.memfit-event-model_call')!;
    expect(call.textContent).toContain('partial reply');
    expect(call.textContent).toContain('Half a tho');
    live.dispose();
  });
});

describe('the live header', () => {
  it('shows the expected cost of an iteration, or says no price is known', () => {
    const feed = new KernelFeed('e1');
    const live = new LiveRunView(feed);
    expect(live.root.querySelector('.memfit-estimate')).toBeNull(); // not estimated yet
    feed.setControls({
      status: 'running', busy: true, buttons: [],
      estimate: { model: 'memfit/demo', priced: true, iteration_cost_usd: 0.005392, iteration_worst_case_usd: 0.026848, calls_per_iteration: 3, prompt_tokens: 568, iterations_affordable: 185 }
    });
    expect(live.root.querySelector('.memfit-live-status .memfit-estimate')!.textContent).toBe(
      '≈ $0.0054 per iteration (3 calls, ~568 prompt tokens, at most $0.0268, the budget left pays for ~185)');
    feed.setControls({ status: 'running', busy: true, buttons: [], estimate: { model: 'openai/local', priced: false, iteration_cost_usd: 0 } });
    const honest = live.root.querySelector('.memfit-estimate')!;
    expect(honest.textContent).toBe('cost per iteration: no price known for openai/local');
    expect(honest.getAttribute('data-priced')).toBe('false');
    expect(estimateLine({ error: 'ValueError: x' })!.textContent).toBe('cost per iteration: could not be estimated');
    live.dispose();
  });

  it('keeps the newest max_cards rows of a long run in the page, the older folded into one line', () => {
    const events: any[] = [{ type: 'run_start', iteration: 0, ts: 0, task: 't', tools: [] }];
    for (let i = 1; i <= 500; i++) {
      events.push({ type: 'action', iteration: i, ts: i, thought: `step ${i}`, tool: 'shell', params: { command: `echo ${i}` } });
    }
    const feed = new KernelFeed('f1');
    feed.setControls({ status: 'running', busy: true, buttons: [], max_cards: 100 });
    const live = new LiveRunView(feed);
    for (let i = 0; i < events.length; i += 37) {
      feed.message({ kind: 'batch', start: i, events: events.slice(i, i + 37), head: { status: 'running' } });
    }
    const rows = () => Array.from(live.run.root.querySelectorAll('.memfit-iteration')).map(b => Number(b.getAttribute('data-iteration')));
    expect(rows().length).toBe(100);
    expect(rows()[0]).toBe(401);
    expect(rows()[99]).toBe(500);
    const folded = live.run.root.querySelector('.memfit-folded')!;
    expect(folded.textContent).toContain('401 earlier iterations folded away');
    // an event of a folded iteration keeps it folded
    feed.message({ kind: 'batch', start: events.length, events: [{ type: 'note', iteration: 3, ts: 1, text: 'late' }] });
    expect(rows().length).toBe(100);
    (folded.querySelector('button') as HTMLButtonElement).click();
    expect(rows()).toEqual(Array.from({ length: 501 }, (_, i) => i));
    expect(live.run.root.querySelector('.memfit-folded')).toBeNull();
    live.dispose();
  });
});

describe('following the newest iteration', () => {
  /** The events of iterations `from`..`to`, one action each (iteration 0: the run's start). */
  const steps = (from: number, to: number): any[] =>
    Array.from({ length: to - from + 1 }, (_, k) => from + k).map(i =>
      i === 0 ? { type: 'run_start', iteration: 0, ts: 0, task: 't', tools: [] } : { type: 'action', iteration: i, ts: i, thought: `step ${i}`, tool: 'shell', params: { command: `echo ${i}` } }
    );
  const open = (live: LiveRunView) => Array.from(live.run.root.querySelectorAll('.memfit-iteration[open]')).map(b => Number(b.getAttribute('data-iteration')));

  it('opens the newest row while the run goes and closes the one it opened before', () => {
    const feed = new KernelFeed('w1');
    const live = new LiveRunView(feed);
    feed.message({ kind: 'batch', start: 0, events: steps(0, 2), head: { status: 'running' } });
    expect(open(live)).toEqual([2]);
    feed.message({ kind: 'batch', start: 3, events: steps(3, 3), head: { status: 'running' } });
    expect(open(live)).toEqual([3]);
    live.dispose();
  });

  it('leaves a row seen open alone once the kernel says the run has ended, its last events arriving after', () => {
    const feed = new KernelFeed('w2');
    const live = new LiveRunView(feed);
    feed.message({ kind: 'batch', start: 0, events: steps(0, 3), head: { status: 'running' } });
    expect(open(live)).toEqual([3]);
    // widget.py refreshes the controls (status done, still busy) just before it sends the last batch
    feed.setControls({ status: 'done', busy: true, buttons: [] });
    expect(live.root.querySelector('.memfit-live-status')!.getAttribute('data-status')).toBe('done');
    feed.message({ kind: 'batch', start: 4, events: steps(4, 6), head: { status: 'done' } });
    feed.setControls({ status: 'done', busy: false, buttons: [] });
    expect(live.run.block(6)).toBeDefined();
    expect(open(live)).toEqual([3]); // the row the person may be working in stays open
    live.dispose();
  });

  it('keeps a row the person opened or closed as they left it when the next iteration comes', () => {
    const feed = new KernelFeed('w3');
    const live = new LiveRunView(feed);
    feed.message({ kind: 'batch', start: 0, events: steps(0, 1), head: { status: 'running' } });
    const summary = () => live.run.block(1)!.querySelector(':scope > summary') as HTMLElement;
    summary().click(); // closed by the person...
    summary().click(); // ...and opened again: theirs now
    expect(open(live)).toEqual([1]);
    feed.message({ kind: 'batch', start: 2, events: steps(2, 2), head: { status: 'running' } });
    expect(open(live)).toEqual([1, 2]);
    // a later event of the person's row redraws it open
    feed.message({ kind: 'batch', start: 3, events: [{ type: 'note', iteration: 1, ts: 9, text: 'late' }], head: { status: 'running' } });
    feed.message({ kind: 'batch', start: 4, events: steps(3, 3), head: { status: 'running' } });
    expect(open(live)).toEqual([1, 3]);
    live.dispose();
  });
});

describe('the X-ray of the next prompt', () => {
  it('diffs a changed system prompt line by line, the injected section highlighted', () => {
    const feed = new KernelFeed('x1');
    const live = new LiveRunView(feed);
    const system = 'You are an agent.\nTools:\n- shell(command)\nWorking directory: /w';
    const first = [{ role: 'system', content: system }, { role: 'user', content: 'Task: add up data.txt' }];
    feed.setControls({ status: 'paused', buttons: ['step'], prompt: first });
    expect(live.root.querySelector('.memfit-xray summary')!.textContent).toBe('X-ray: the next prompt · 1 new message since the last step');
    const reflected = `${system}\n\n## Your recent self-reflections (most recent last)\n- iteration 1, CRITICAL: FAILED (exit code 1).`;
    const second = [{ role: 'system', content: reflected }, first[1], { role: 'assistant', content: '{"tool": "shell"}' }, { role: 'user', content: 'Observation (shell) FAILED: exit code 1' }];
    feed.setControls({ status: 'paused', buttons: ['step'], prompt: second });
    const xray = live.root.querySelector('.memfit-xray')!;
    expect(xray.querySelector('summary')!.textContent).toBe('X-ray: the next prompt · 2 new messages and 1 changed since the last step · 1 guidance');
    const added = Array.from(xray.querySelectorAll(':scope > .memfit-message-changed .memfit-line-added')).map(n => n.textContent);
    expect(added).toEqual(['+ ', '+ ## Your recent self-reflections (most recent last)', '+ - iteration 1, CRITICAL: FAILED (exit code 1).']);
    expect(xray.querySelector('.memfit-line-added.memfit-guidance')!.textContent).toContain('CRITICAL');
    expect(xray.querySelectorAll('.memfit-line-added.memfit-guidance').length).toBe(1);
    // the tool list is context, not a change; the first lines fold
    expect(xray.querySelector('.memfit-line-skipped')!.textContent).toContain('2 unchanged lines');
    // a controls redraw with the same prompt keeps the diff against the step before
    feed.setControls({ status: 'paused', buttons: ['step', 'continue'], prompt: second });
    expect(live.root.querySelector('.memfit-xray summary')!.textContent).toContain('1 changed');
    // a line that left the prompt is struck through
    const third = [{ role: 'system', content: reflected.replace('- iteration 1, CRITICAL: FAILED (exit code 1).', '- iteration 2, MINIMAL: succeeded.') }, ...second.slice(1)];
    feed.setControls({ status: 'paused', buttons: ['step'], prompt: third });
    expect(live.root.querySelector('.memfit-line-removed')!.textContent).toBe('− - iteration 1, CRITICAL: FAILED (exit code 1).');
    expect(live.root.querySelector('.memfit-xray summary')!.textContent).toBe('X-ray: the next prompt · 0 new messages and 1 changed since the last step · 1 guidance');
    // a spin warning in the timeline is guidance too
    const fourth = [...third, { role: 'user', content: '⚠️ [SPIN DETECTED] The AI agent is stuck in a loop' }];
    feed.setControls({ status: 'paused', buttons: ['step'], prompt: fourth });
    expect(live.root.querySelector('.memfit-xray summary')!.textContent).toBe('X-ray: the next prompt · 1 new message since the last step · 1 guidance');
    // a reflection the loop appends to an observation: the observation stays plain, the reflection is highlighted
    const observed = 'Observation (shell) FAILED: exit code 1\ncat: summary.txt: No such file\n\n\n✗ [CRITICAL REFLECTION] Action \'read\' FAILED\nError: exit code 1';
    feed.setControls({ status: 'paused', buttons: ['step'], prompt: [...fourth, { role: 'assistant', content: '{}' }, { role: 'user', content: observed }] });
    expect(live.root.querySelector('.memfit-xray summary')!.textContent).toBe('X-ray: the next prompt · 2 new messages since the last step · 1 guidance');
    const highlighted = live.root.querySelector('.memfit-xray > .memfit-guidance .memfit-guidance-text')!;
    expect(highlighted.textContent).toBe("✗ [CRITICAL REFLECTION] Action 'read' FAILED\nError: exit code 1");
    expect(live.root.querySelector('.memfit-xray > .memfit-guidance pre')!.textContent).toBe(observed);
    // a redacted secret is no guidance
    feed.setControls({ status: 'paused', buttons: ['step'], prompt: [{ role: 'user', content: 'x' }, { role: 'user', content: '[REDACTED] key' }] });
    expect(live.root.querySelector('.memfit-xray summary')!.textContent).not.toContain('guidance');
    live.dispose();
  });
});
