/**
 * "Fork from here" and the tree of forks of a run view.
 *
 * Each iteration row of a run gets a "Fork from here" button.  While the kernel holds the run (its
 * live widget is on the page) the button opens a form (guidance, an action instead of the model's,
 * an observation instead of the tool's, a few settings) whose "Fork and run" sends
 * `{action: "fork", fork: ForkRequest}` (memfit_jupyter/jupyter/widget.py); the child then runs
 * live in a view of its own under the run.  With no kernel holding the run, the same form writes
 * the line of code that makes the fork (`%memfit fork RUN --at K ...` and `run.fork(...)`), to copy.
 *
 * Under the run, the tree: each fork with the step it forked at, its changes, its outcome and cost.
 * A click opens `compare(run, fork)` with the first divergence marked.  The forks come from the
 * live controls (`Controls.forks`) and from the saved output's metadata (`RunOutputMeta.forks`,
 * each with its trace), so the tree and the children's views reopen with the notebook.
 */

import { renderCompare } from './compare';
import { badge, count, h, money, num, obj, str } from './dom';
import { forkChanges } from './events';
import { findLive, LiveSource } from './liveregistry';
import { ForkEntry, ForkRequest, SavedFork } from './protocol-types';
import { renderRun, RunView, STATUS_KIND } from './run';

/** Draws a run into `host`: live from widget `id` while the kernel streams it, `saved()` otherwise (widget.ts's LiveSlot). */
export interface RunSlot {
  place(host: HTMLElement, id: string, saved: () => HTMLElement): void;
  dispose(): void;
}

/** The reflection levels a fork may switch to (memfit_jupyter/records.py's ReflectionLevel). */
export const REFLECTION_LEVELS = ['none', 'minimal', 'standard', 'deep', 'critical'];

/** A fork as the tree draws it: the kernel's entry, and its trace once an output saved one. */
type Fork = ForkEntry & { trace?: Record<string, unknown> };

/**
 * Text as one word of a magic line, or null when it cannot be one.  IPython splits a magic's
 * options as words in quotes with no escapes: text with no quote of one kind goes in that kind.
 */
function magicWord(text: string): string | null {
  if (/^[\w@%+=:,./-]+$/.test(text)) {
    return text;
  }
  if (/[\r\n]/.test(text)) {
    return null; // a line break would end the magic line, and what follows would run as Python
  }
  if (!text.includes("'")) {
    return `'${text}'`;
  }
  return text.includes('"') ? null : `"${text}"`;
}

/** A JSON value written as Python. */
function python(value: unknown): string {
  if (value === null || value === undefined) {
    return 'None';
  }
  if (typeof value === 'boolean') {
    return value ? 'True' : 'False';
  }
  if (typeof value === 'string' || typeof value === 'number') {
    return JSON.stringify(value);
  }
  if (Array.isArray(value)) {
    return `[${value.map(python).join(', ')}]`;
  }
  return `{${Object.entries(value as Record<string, unknown>)
    .map(([k, v]) => `${JSON.stringify(k)}: ${python(v)}`)
    .join(', ')}}`;
}

/** The action a request names, with its parameters read (or left as typed when they are not JSON). */
function requestAction(req: ForkRequest): { tool: string; params: unknown } | null {
  if (!req.tool) {
    return null;
  }
  let params: unknown = {};
  if (req.params) {
    try {
      params = JSON.parse(req.params);
    } catch {
      params = req.params;
    }
  }
  return { tool: req.tool, params };
}

/**
 * The `%memfit fork` line that makes the fork a request asks for (`run` names the run); a comment
 * saying to use the `run.fork` call when a text holds both kinds of quote (no magic line can).
 */
export function forkLine(run: string, req: ForkRequest): string {
  // The run's id comes from the saved trace, a file from anywhere: only an id, never code.
  const parts = [`%memfit fork ${/^[\w.-]+$/.test(run) ? run : 'RUN'} --at ${req.at ?? 1}`];
  let impossible = '';
  const option = (name: string, value: unknown) => {
    if (value !== undefined && value !== null && value !== '') {
      const word = magicWord(typeof value === 'string' ? value : JSON.stringify(value));
      if (word === null) {
        impossible = impossible || name;
      }
      parts.push(`--${name} ${word}`);
    }
  };
  option('guidance', req.guidance);
  const action = requestAction(req);
  if (action) {
    option('action', JSON.stringify(action));
  }
  option('observation', req.observation);
  option('model', req.model);
  option('reflection', req.reflection);
  option('spin-threshold', req.spin_threshold);
  option('max-iterations', req.max_iterations);
  if (impossible) {
    return `# --${impossible} holds a line break, or both ' and ", which a %memfit line cannot quote: run the run.fork call below`;
  }
  return parts.join(' ');
}

/** The `run.fork(...)` call that makes the fork a request asks for. */
export function forkCall(req: ForkRequest, variable = 'run'): string {
  const args = [`at=${req.at ?? 1}`];
  for (const key of ['guidance', 'observation', 'model', 'reflection', 'spin_threshold', 'max_iterations'] as const) {
    const value = req[key];
    if (value !== undefined && value !== '') {
      args.push(`${key}=${python(value)}`);
    }
  }
  const action = requestAction(req);
  if (action) {
    args.push(`action=${python(action)}`);
  }
  return `child = ${variable}.fork(${args.join(', ')})\nchild.run()`;
}

/** What a fork changed, in a few words. */
export const changesText = forkChanges;

function forksOf(value: unknown): Fork[] {
  if (!Array.isArray(value)) {
    return [];
  }
  return value
    .map(obj)
    .filter((f): f is Record<string, unknown> => f !== null && typeof f.run === 'string')
    .map(f => f as unknown as Fork);
}

function field(label: string, input: HTMLElement, hint = ''): HTMLElement {
  return h('label', { class: 'memfit-fork-field' }, h('span', { class: 'memfit-label' }, label), input, hint ? h('span', { class: 'memfit-muted memfit-fork-hint' }, hint) : null);
}

function copyButton(text: () => string): HTMLElement {
  const b = h('button', { type: 'button', class: 'memfit-tool-button memfit-fork-copy' }, 'copy') as HTMLButtonElement;
  b.addEventListener('click', () => {
    const done = () => {
      b.textContent = 'copied';
      window.setTimeout(() => (b.textContent = 'copy'), 1500);
    };
    const clipboard = typeof navigator !== 'undefined' ? navigator.clipboard : undefined;
    if (clipboard && typeof clipboard.writeText === 'function') {
      clipboard.writeText(text()).then(done, () => (b.textContent = 'select the line to copy it'));
    } else {
      b.textContent = 'select the line to copy it';
    }
  });
  return b;
}

/** Which steps of a fork at `at` come from the recording, in words. */
function prefixText(at: number): string {
  if (at <= 1) {
    return 'nothing comes from the recording';
  }
  const steps = at === 2 ? 'step 1 comes' : `steps 1–${at - 1} come`;
  return `${steps} from the recording (no model call, no tool run)`;
}

/** The "Fork from here" form of one step. */
class ForkForm {
  readonly root: HTMLElement;

  constructor(
    readonly at: number,
    private _panel: ForkPanel
  ) {
    const model = h('input', { type: 'text', name: 'model', class: 'memfit-fork-input', placeholder: _panel.model() || 'the run’s model' });
    const reflection = h('select', { name: 'reflection', class: 'memfit-fork-input' }, h('option', { value: '' }, 'as the run'), ...REFLECTION_LEVELS.map(l => h('option', { value: l }, l)));
    const spin = h('input', { type: 'number', name: 'spin_threshold', min: '1', step: '1', class: 'memfit-fork-input memfit-fork-number', placeholder: 'as the run' });
    const limit = h('input', { type: 'number', name: 'max_iterations', min: '1', step: '1', class: 'memfit-fork-input memfit-fork-number', placeholder: 'as the run' });
    const tool = h('select', { name: 'tool', class: 'memfit-fork-input' }, h('option', { value: '' }, 'the model chooses'), ..._panel.tools().map(t => h('option', { value: t }, t)));
    this._error = h('div', { class: 'memfit-fork-error memfit-error', role: 'status' });
    this._out = h('div', { class: 'memfit-fork-out' });
    this.root = h(
      'form',
      { class: 'memfit-fork-form', 'data-at': String(at) },
      h('div', { class: 'memfit-fork-form-title' }, `Fork at step ${at}: `, h('span', { class: 'memfit-muted' }, `${prefixText(at)}; from step ${at} the fork runs live with what you change here.`)),
      field('guidance', h('textarea', { name: 'guidance', rows: '2', class: 'memfit-fork-input', placeholder: `what step ${at}’s prompt says where a reflection’s guidance goes` })),
      h('div', { class: 'memfit-fork-line' }, field('action', tool), field('params (JSON)', h('textarea', { name: 'params', rows: '1', class: 'memfit-fork-input memfit-code-input', placeholder: '{"path": "data.txt"}' }))),
      field('observation', h('textarea', { name: 'observation', rows: '2', class: 'memfit-fork-input', placeholder: `what step ${at}’s tool gives back (it does not run)` })),
      h('div', { class: 'memfit-fork-line' }, field('model', model), field('reflection', reflection), field('spin threshold', spin), field('max iterations', limit)),
      this._out,
      this._error
    );
    this.root.addEventListener('submit', e => e.preventDefault());
    this.root.addEventListener('input', () => this.redraw());
    this.root.addEventListener('change', () => this.redraw());
    this.redraw();
  }

  /** What the form asks for (the fields left empty left out). */
  request(): ForkRequest {
    const req: ForkRequest = { at: this.at };
    const value = (name: string) => ((this.root.querySelector(`[name=${name}]`) as HTMLInputElement | null)?.value ?? '').trim();
    for (const key of ['guidance', 'observation', 'tool', 'params', 'model', 'reflection'] as const) {
      if (value(key)) {
        req[key] = value(key);
      }
    }
    for (const key of ['spin_threshold', 'max_iterations'] as const) {
      if (value(key)) {
        req[key] = Number(value(key));
      }
    }
    return req;
  }

  /** Show why the kernel made no fork (one line), or nothing. */
  setError(text: string | null): void {
    this._error.textContent = text ?? '';
    this._waiting = false;
    this.redraw();
  }

  /**
   * Draw the part that depends on the kernel: "Fork and run" with one, the code lines without.
   * Elements are kept and updated, not replaced: typing (and the change event of leaving a field
   * for the button) must not swap the button out from under a click.
   */
  redraw(): void {
    const live = this._panel.source() !== null;
    if (live !== this._liveMode || !this._out.firstChild) {
      this._liveMode = live;
      this._out.replaceChildren(live ? this._liveControls() : this._codeLines());
    }
    if (live) {
      const executing = this._panel.executing();
      this._run.disabled = executing || this._waiting;
      this._run.textContent = this._waiting ? 'Forking…' : 'Fork and run';
      this._busy.textContent = executing && !this._waiting ? 'the run is executing: fork it once it has stopped' : '';
      return;
    }
    const req = this.request();
    this._magic.textContent = forkLine(this._panel.runId(), req);
    this._call.textContent = forkCall(req);
  }

  private _liveControls(): HTMLElement {
    this._run = h('button', { type: 'submit', class: 'memfit-button memfit-button-primary', 'data-action': 'fork' }, 'Fork and run') as HTMLButtonElement;
    this._run.addEventListener('click', () => {
      if (this._run.disabled) {
        return;
      }
      this._waiting = true;
      this._error.textContent = '';
      this._panel.submit(this);
      this.redraw();
    });
    const cancel = h('button', { type: 'button', class: 'memfit-button memfit-button-muted', 'data-action': 'fork_cancel' }, 'Cancel');
    cancel.addEventListener('click', () => this._panel.closeForm());
    this._busy = h('span', { class: 'memfit-muted memfit-fork-busy' });
    return h('div', { class: 'memfit-buttons' }, this._run, cancel, this._busy);
  }

  private _codeLines(): HTMLElement {
    this._magic = h('pre', { class: 'memfit-pre memfit-fork-magic' });
    this._call = h('pre', { class: 'memfit-pre memfit-fork-call' });
    return h(
      'div',
      { class: 'memfit-fork-code' },
      h('div', { class: 'memfit-muted' }, 'No kernel holds this run: run one of these in a cell to fork it (RUN is the run’s variable, its id while the kernel holds it, or its saved trace file).'),
      h('div', { class: 'memfit-fork-code-line' }, this._magic, copyButton(() => this._magic.textContent ?? '')),
      h('div', { class: 'memfit-fork-code-line' }, this._call, copyButton(() => this._call.textContent ?? ''))
    );
  }

  private _error: HTMLElement;
  private _out: HTMLElement;
  private _waiting = false;
  private _liveMode = false;
  private _run = h('button', null) as HTMLButtonElement;
  private _busy = h('span', null);
  private _magic = h('pre', null);
  private _call = h('pre', null);
}

/** The forks of one run output: the buttons in its rows, the tree, the comparison, the children. */
export class ForkPanel {
  readonly root: HTMLElement;

  constructor(private _slot: () => RunSlot) {
    this._tree = h('div', { class: 'memfit-fork-tree' });
    this._compare = h('div', { class: 'memfit-fork-compare' });
    this._kids = h('div', { class: 'memfit-fork-children' });
    this.root = h('div', { class: 'memfit-forks memfit-forks-empty' }, this._tree, this._compare, this._kids);
  }

  /** Put "Fork from here" in `view`'s rows; `source` is the kernel's live run (null: no kernel holds it). */
  attach(view: RunView, source: LiveSource | null, trace: () => Record<string, unknown>): void {
    this._stop();
    this._stop = () => undefined;
    this._live = source;
    this._trace = trace;
    this._form = null;
    if (source) {
      this._stop = source.listen(change => {
        if (change.kind === 'controls' || change.kind === 'closed') {
          this._onControls();
        }
      });
    }
    view.setRowTools(iteration => this._rowTools(iteration));
    this._draw();
  }

  /** The forks the saved output lists, each with its trace. */
  setSaved(forks: unknown): void {
    this._saved = forksOf(forks) as SavedFork[];
    this._draw();
  }

  dispose(): void {
    this._stop();
    this._children.forEach(c => c.slot.dispose());
    this._children.clear();
  }

  /** The kernel's live run, while it is on the page. */
  source(): LiveSource | null {
    return this._live && !this._live.closed ? this._live : null;
  }

  executing(): boolean {
    const c = this.source()?.controls;
    return !!c && (!!c.busy || c.status === 'running');
  }

  runId(): string {
    return str(this._trace().run_id);
  }

  model(): string {
    return str(this._trace().model);
  }

  /** The run's tools (its run_start event lists them). */
  tools(): string[] {
    const events = Array.isArray(this._trace().events) ? (this._trace().events as unknown[]) : [];
    const start = events.map(obj).find(e => e?.type === 'run_start');
    return Array.isArray(start?.tools) ? start.tools.map(String) : [];
  }

  submit(form: ForkForm): void {
    this._asked = new Set(this.forks().map(f => f.run));
    this.source()?.act({ action: 'fork', fork: form.request() });
  }

  closeForm(): void {
    this._form?.root.closest('.memfit-fork-row')?.querySelector('.memfit-fork-open')?.setAttribute('aria-expanded', 'false');
    this._form?.root.remove();
    this._form = null;
    this._asked = null;
  }

  /** Every fork: the kernel's entries while it holds the run, with the saved traces, then the saved ones it does not list. */
  forks(): Fork[] {
    const saved = new Map(this._saved.map(f => [f.run, f]));
    const live = forksOf(this.source()?.controls.forks);
    const out: Fork[] = live.map(f => ({ ...f, trace: saved.get(f.run)?.trace }));
    const seen = new Set(out.map(f => f.run));
    return out.concat(this._saved.filter(f => !seen.has(f.run)));
  }

  private _rowTools(iteration: number): HTMLElement | null {
    if (iteration < 1) {
      return null;
    }
    const open = h('button', { type: 'button', class: 'memfit-tool-button memfit-fork-open', 'data-at': String(iteration), 'aria-expanded': 'false', title: 'run this step again with a change, and on from there' }, 'Fork from here');
    const row = h('div', { class: 'memfit-fork-row', 'data-at': String(iteration) }, open);
    open.addEventListener('click', () => {
      const same = this._form?.at === iteration && this._form.root.isConnected;
      this.closeForm();
      if (same) {
        return;
      }
      this._form = new ForkForm(iteration, this);
      row.append(this._form.root);
      open.setAttribute('aria-expanded', 'true');
    });
    return row;
  }

  private _onControls(): void {
    const form = this._form;
    if (form && this._asked) {
      const c = this.source()?.controls;
      const made = this.forks().some(f => !this._asked?.has(f.run));
      if (made) {
        this.closeForm();
      } else if (c?.fork_error) {
        this._asked = null;
        form.setError(c.fork_error);
      }
    }
    this._form?.redraw();
    this._draw();
  }

  /** The child's trace: from its live widget while the kernel streams it, else the saved one. */
  private _childTrace(fork: Fork): Record<string, unknown> | null {
    const live = fork.live_widget ? findLive(fork.live_widget) : undefined;
    if (live && live.events.length) {
      return { ...live.head, events: live.events };
    }
    return fork.trace ?? null;
  }

  private _draw(): void {
    const forks = this.forks();
    this.root.classList.toggle('memfit-forks-empty', !forks.length);
    if (!forks.length) {
      this._tree.replaceChildren();
    } else {
      const tree = h(
        'ul',
        { class: 'memfit-fork-list' },
        ...forks.map(f => {
          const node = h(
            'button',
            { type: 'button', class: 'memfit-fork-node-button', title: 'compare this fork with the run' },
            badge(`step ${count(f.at)}`, 'primary'),
            h('span', { class: 'memfit-fork-changes' }, changesText(obj(f.changes) ?? {})),
            ' → ',
            h('span', { class: `memfit-badge memfit-badge-${STATUS_KIND[str(f.status)] ?? 'muted'} memfit-fork-status`, 'data-status': str(f.status) }, str(f.status) || '?'),
            h('span', { class: 'memfit-fork-cost' }, money(f.cost_usd)),
            h('span', { class: 'memfit-muted' }, `${count(f.iterations)} iteration${num(f.iterations) === 1 ? '' : 's'}`),
            f.exact === false ? badge('workspace not exact', 'warn') : null,
            h('span', { class: 'memfit-fork-compare-hint' }, this._compared === f.run ? 'hide the comparison' : 'compare')
          );
          node.addEventListener('click', () => this._toggleCompare(f.run));
          return h('li', { class: 'memfit-fork-node', 'data-run': f.run, 'data-at': String(f.at), 'data-status': str(f.status) }, h('span', { class: 'memfit-fork-branch', 'aria-hidden': 'true' }, '└─'), node);
        })
      );
      this._tree.replaceChildren(
        h('div', { class: 'memfit-section-title' }, `Forks of this run (${forks.length})`),
        h('div', { class: 'memfit-fork-root memfit-muted' }, `run ${this.runId()}`),
        tree
      );
    }
    this._drawChildren(forks);
  }

  private _toggleCompare(run: string): void {
    this._compared = this._compared === run ? null : run;
    this._compare.replaceChildren();
    const fork = this.forks().find(f => f.run === run);
    if (this._compared && fork) {
      const child = this._childTrace(fork);
      const cmp = obj(fork.compare);
      if (!child) {
        this._compare.append(h('div', { class: 'memfit-muted' }, 'This fork’s trace is not on the page: it was made in another output.'));
      } else {
        const close = h('button', { type: 'button', class: 'memfit-tool-button' }, 'close');
        close.addEventListener('click', () => this._toggleCompare(run));
        this._compare.append(
          h('div', { class: 'memfit-fork-compare-head' }, h('span', { class: 'memfit-section-title' }, `This run vs the fork at step ${count(fork.at)}`), close),
          renderCompare({
            version: 1,
            labels: Array.isArray(cmp?.labels) ? cmp?.labels : ['this run', `fork at step ${fork.at}`],
            runs: [this._trace(), child],
            rows: Array.isArray(cmp?.rows) ? cmp?.rows : [],
            diverged: cmp?.diverged ?? null
          })
        );
        // Both runs open at the step where they parted (their rows before it are the same).
        for (const row of Array.from(this._compare.querySelectorAll('.memfit-diverged-row'))) {
          row.setAttribute('open', '');
          row.dispatchEvent(new Event('toggle'));
        }
        this._compare.scrollIntoView?.({ block: 'nearest' });
      }
    }
    this._draw();
  }

  /** One view per fork under the run: live while the kernel streams it, its saved trace otherwise. */
  private _drawChildren(forks: Fork[]): void {
    for (const f of forks) {
      const liveId = f.live_widget ?? '';
      const key = `${liveId}|${f.trace ? (Array.isArray(f.trace.events) ? f.trace.events.length : 0) : -1}`;
      let child = this._children.get(f.run);
      if (!child) {
        // A fork made from this view is shown open; one made in code (a later cell, blame) folded.
        const host = h('div', { class: 'memfit-fork-child-run' });
        const el = h('details', { class: 'memfit-fork-child', 'data-run': f.run }, h('summary', { class: 'memfit-section-title' }, `Fork at step ${count(f.at)} · run ${f.run}`), host);
        if (liveId) {
          el.setAttribute('open', '');
        }
        this._kids.append(el);
        child = { el, host, key: '', slot: this._slot() };
        this._children.set(f.run, child);
        const made = child;
        el.addEventListener('toggle', () => el.hasAttribute('open') && made.key === '' && this._drawChildren(this.forks()));
      }
      if (child.key !== key && child.el.hasAttribute('open')) {
        child.key = key;
        const trace = f.trace;
        child.slot.place(child.host, liveId, () =>
          trace ? renderRun(trace) : h('div', { class: 'memfit-muted' }, 'The fork’s trace is saved with this output once it has settled.')
        );
      }
    }
  }

  private _tree: HTMLElement;
  private _compare: HTMLElement;
  private _kids: HTMLElement;
  private _live: LiveSource | null = null;
  private _trace: () => Record<string, unknown> = () => ({});
  private _saved: SavedFork[] = [];
  private _form: ForkForm | null = null;
  private _asked: Set<string> | null = null;
  private _compared: string | null = null;
  private _children = new Map<string, { el: HTMLElement; host: HTMLElement; key: string; slot: RunSlot }>();
  private _stop: () => void = () => undefined;
}
