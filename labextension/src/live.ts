/**
 * The live view of a run: the same `RunView` as a saved run, fed by the
 * kernel's batches of events, with the controls in one fixed place above it
 * (status with a spinner and a ticking clock, the reply streaming in, the
 * expected cost of an iteration, the buttons, the approval question, the
 * choices of a diverse synthesis, the override, the escalation) and, in step
 * mode, the X-ray of the next prompt.
 */

import { diffLines } from 'diff';

import { h, seconds, str, num, obj, clip, money } from './dom';
import { Controls, CostEstimate, LiveChange, LiveSource } from './liveregistry';
import { ENDED, RunView, STATUS_KIND } from './run';

const BUTTONS: Record<string, [string, string, string]> = {
  step: ['Step', 'primary', 'run one iteration'],
  continue: ['Continue', 'good', 'run to the end'],
  abort: ['Abort', 'bad', 'end the run (status cancelled)'],
  approve: ['Approve', 'good', 'run this tool call'],
  reject: ['Reject', 'bad', 'do not run it; the agent sees the rejection'],
  override: ['Override limits…', 'warn', 'continue past the limits (asks for confirmation)'],
  more_trials: ['More trials', 'warn', 'raise max_trials and go on with the lessons learned so far'],
  open_diary: ['Open the diary', 'primary', 'show the lessons'],
  stop: ['Stop', 'muted', 'leave the run escalated']
};

/**
 * A line of guidance the loop puts into the timeline: a bracketed tag, after a mark maybe
 * ("[SYSTEM] ...", "⚠️ [SPIN DETECTED] ...", "✗ [CRITICAL REFLECTION] ..." after an observation).
 */
const GUIDANCE = /^[^\p{L}\p{N}[]*\[(?!REDACTED\])[A-Z][A-Z _]+\]/u;
/** In the system prompt, what the mechanisms add comes in sections of their own ("## Your recent self-reflections"). */
const SECTION = /^## /;

type Message = { role: string; content: string };

export class LiveRunView {
  readonly root: HTMLElement;
  readonly run: RunView;

  constructor(source: LiveSource) {
    this._source = source;
    this.run = new RunView();
    this._controls = h('div', { class: 'memfit-controls', role: 'toolbar' });
    this._xray = h('div', { class: 'memfit-xray-slot' });
    this.root = h('div', { class: 'memfit-live' }, this._controls, this._xray, this.run.root);
    // A row the person opens or closes is theirs: following the run no longer closes it.
    this.run.root.addEventListener('click', e => {
      const row = (e.target as Element).closest('.memfit-iteration > summary')?.parentElement;
      if (row && this._followed !== null && row === this.run.block(this._followed)) {
        this._autoOpened = false;
      }
    });
    this.run.update(source.head, source.events);
    this.run.setStreaming(source.streaming ?? null);
    this._drawControls();
    this._syncBadge();
    this._stop = source.listen(change => this._onChange(change));
  }

  dispose(): void {
    this._stop();
    window.clearInterval(this._ticker);
  }

  private _onChange(change: LiveChange): void {
    if (change.kind === 'batch') {
      this._headAt = Date.now();
      this.run.update(this._source.head, change.events);
      this._syncBadge();
      this._followNewest();
      this._drawStatus();
    } else if (change.kind === 'delta') {
      this.run.setStreaming(this._source.streaming ?? null);
      this._followNewest();
      this._drawStatus();
    } else if (change.kind === 'reset') {
      this.run.reset();
      this.run.update(this._source.head, this._source.events);
      this._syncBadge();
    } else {
      this._drawControls();
      this._syncBadge();
    }
  }

  /**
   * What the run is doing, in one word, the same in the header's badge and the status line: the
   * kernel's word for it (paused, waiting for approval...) while the run goes on; once it has
   * ended, the trace's (what the saved view says).
   */
  status(): string {
    const ended = str(this._source.head.status);
    if (ended && ended !== 'running' && ended !== 'pending') {
      return ended;
    }
    return str(this._source.controls.status) || ended || 'pending';
  }

  /** The header's badge says what the status line says (the trace says "running" while paused). */
  private _syncBadge(): void {
    const badge = this.run.root.querySelector('.memfit-header .memfit-status');
    const word = this.status();
    if (!badge || badge.textContent === word) {
      return;
    }
    badge.textContent = word;
    badge.setAttribute('data-status', word);
    badge.className = `memfit-badge memfit-badge-${STATUS_KIND[word] ?? 'muted'} memfit-status`;
  }

  /**
   * While the run goes on, its newest iteration is open and in view; the one the view opened
   * before closes.  Once the kernel says the run has ended (it says so just before it sends the
   * last events), rows stay as the person sees them: one seen open must not close under a click.
   */
  private _followNewest(): void {
    const events = this.run.events;
    const last = events.length ? events[events.length - 1].iteration : null;
    const streamed = this.run.streaming?.iteration ?? null;
    const newest = streamed !== null && (last === null || streamed > last) ? streamed : last;
    if (newest === null || newest === this._followed || !this._running() || ENDED.has(str(this._source.controls.status))) {
      return;
    }
    const previous = this._followed === null ? undefined : this.run.block(this._followed);
    if (previous && this._autoOpened) {
      previous.removeAttribute('open');
    }
    const block = this.run.block(newest);
    this._followed = newest;
    this._autoOpened = false;
    if (block && !block.hasAttribute('open')) {
      block.setAttribute('open', '');
      block.dispatchEvent(new Event('toggle'));
      this._autoOpened = true;
    }
    if (block && typeof block.scrollIntoView === 'function' && this._inView()) {
      block.scrollIntoView({ block: 'nearest' });
    }
  }

  private _inView(): boolean {
    const r = this.root.getBoundingClientRect();
    return r.bottom > 0 && r.top < (window.innerHeight || 0);
  }

  private _running(): boolean {
    const c = this._source.controls;
    return !!c.busy || c.status === 'running';
  }

  private _drawStatus(): void {
    const line = this._controls.querySelector('.memfit-live-status');
    if (line) {
      line.replaceWith(this._status());
    }
  }

  private _status(): HTMLElement {
    const c = this._source.controls;
    const running = this._running();
    const clock = h('span', { class: 'memfit-clock memfit-muted' }, this._clockText());
    window.clearInterval(this._ticker);
    if (running) {
      this._ticker = window.setInterval(() => {
        clock.textContent = this._clockText();
      }, 1000);
    }
    const stream = this._source.streaming;
    return h(
      'div',
      { class: 'memfit-live-status', 'data-status': str(c.status) },
      running ? h('span', { class: 'memfit-spinner', 'aria-label': 'working' }) : null,
      h('span', { class: 'memfit-live-label' }, this.status()),
      ' ',
      clock,
      c.note ? h('span', { class: 'memfit-live-note' }, c.note) : null,
      stream
        ? h('span', { class: 'memfit-streaming-note', 'data-purpose': stream.purpose }, `streaming the ${stream.purpose || 'reply'} · ${stream.chars} characters`)
        : null,
      estimateLine(c.estimate ?? null)
    );
  }

  private _clockText(): string {
    const totals = obj(this._source.head.totals) ?? {};
    let s = num(totals.duration_s) ?? 0;
    if (this._running()) {
      s += (Date.now() - this._headAt) / 1000;
    }
    return seconds(s);
  }

  private _button(action: string, label?: string, extra: Record<string, unknown> = {}): HTMLElement {
    const [text, kind, tip] = BUTTONS[action] ?? [action, 'muted', ''];
    const b = h('button', { type: 'button', class: `memfit-button memfit-button-${kind}`, 'data-action': action, title: tip }, label ?? text) as HTMLButtonElement;
    b.disabled = !!this._source.controls.busy || this._source.closed;
    b.addEventListener('click', () => {
      if (b.disabled) {
        return;
      }
      // Until the kernel answers, nothing else may be clicked.
      for (const other of Array.from(this._controls.querySelectorAll('button'))) {
        (other as HTMLButtonElement).disabled = true;
      }
      this._source.act({ action, ...extra });
    });
    return b;
  }

  private _drawControls(): void {
    const c: Controls = this._source.controls;
    this.run.setMaxRows(num(c.max_cards) ?? 0);
    const buttons = (c.buttons ?? []).filter(a => a !== 'override' || !this._confirming);
    const parts: (HTMLElement | null)[] = [this._status()];
    if (c.approval) {
      const params = c.approval.params === undefined ? '' : clip(JSON.stringify(c.approval.params) ?? '', 300);
      parts.push(
        h(
          'div',
          { class: 'memfit-approval' },
          'Approve the call ',
          h('code', null, `${str(c.approval.tool)}(${params})`),
          '?'
        )
      );
    }
    if ((c.buttons ?? []).includes('more_trials')) {
      parts.push(
        h(
          'div',
          { class: 'memfit-escalation' },
          'The oracle still fails after the last trial. What now? More trials go on with the lessons ' +
            'learned so far; the diary shows them; Stop leaves the run escalated.'
        )
      );
    }
    const row = h('div', { class: 'memfit-buttons' });
    for (const action of buttons) {
      const label = action === 'more_trials' ? `Try ${num(c.extra_trials) ?? 2} more trials` : undefined;
      if (action === 'override') {
        row.append(this._overrideButton());
        continue;
      }
      row.append(this._button(action, label));
    }
    if (this._confirming && (c.buttons ?? []).includes('override')) {
      row.append(...this._confirmRow(c));
    }
    if (row.childNodes.length) {
      parts.push(row);
    }
    if (c.choices && c.choices.length) {
      parts.push(
        h(
          'div',
          { class: 'memfit-choices' },
          h('span', { class: 'memfit-label' }, 'Choose an alternative: '),
          ...c.choices.map(choice => this._button('choose', `${choice.index}: ${clip(str(choice.answer), 60)}`, { index: choice.index }))
        )
      );
    }
    if (c.diary) {
      const lessons = c.diary.lessons ?? [];
      const past = c.diary.past ?? [];
      parts.push(
        h(
          'div',
          { class: 'memfit-diary' },
          h('div', { class: 'memfit-section-title' }, 'Lessons from this run'),
          lessons.length ? h('ul', { class: 'memfit-list' }, ...lessons.map(l => h('li', null, l))) : h('div', { class: 'memfit-muted' }, 'none yet'),
          past.length ? h('div', { class: 'memfit-section-title' }, 'From earlier runs') : null,
          past.length ? h('ul', { class: 'memfit-list' }, ...past.map(l => h('li', null, l))) : null
        )
      );
    }
    this._controls.replaceChildren(...parts.filter((p): p is HTMLElement => p !== null));
    this._drawXray(c.prompt ?? null);
  }

  private _overrideButton(): HTMLElement {
    const [text, kind, tip] = BUTTONS.override;
    const b = h('button', { type: 'button', class: `memfit-button memfit-button-${kind}`, 'data-action': 'override', title: tip }, text) as HTMLButtonElement;
    b.disabled = !!this._source.controls.busy || this._source.closed;
    b.addEventListener('click', () => {
      this._confirming = true;
      this._drawControls();
    });
    return b;
  }

  private _confirmRow(c: Controls): HTMLElement[] {
    const input = h('input', { type: 'number', class: 'memfit-override-cost', min: '0', step: '0.01', 'aria-label': 'new cost limit in US dollars' }) as HTMLInputElement;
    input.value = String(num(c.override_cost) ?? 2);
    const confirm = h('button', { type: 'button', class: 'memfit-button memfit-button-bad', 'data-action': 'confirm_override' }, 'Confirm override') as HTMLButtonElement;
    confirm.disabled = !!this._source.controls.busy || this._source.closed;
    confirm.addEventListener('click', () => {
      if (confirm.disabled) {
        return;
      }
      this._confirming = false;
      confirm.disabled = true;
      this._source.act({ action: 'override', max_cost_usd: Number(input.value) });
    });
    const cancel = h('button', { type: 'button', class: 'memfit-button memfit-button-muted', 'data-action': 'cancel_override' }, 'Cancel');
    cancel.addEventListener('click', () => {
      this._confirming = false;
      this._drawControls();
    });
    return [h('label', { class: 'memfit-label' }, 'max $ ', input), confirm, cancel];
  }

  /**
   * What changed in the prompt since the last step: new messages, and in the messages that were
   * there before (the system prompt, mostly) the lines added and removed; the guidance the
   * mechanisms injected is highlighted.  The full prompt is one click away.
   */
  private _drawXray(prompt: Message[] | null): void {
    if (!prompt || !prompt.length) {
      this._xray.replaceChildren();
      return;
    }
    if (this._shown && !samePrompt(this._shown, prompt)) {
      this._base = this._shown;
    }
    this._shown = prompt;
    const base = this._base;
    const parts: HTMLElement[] = [];
    let added = 0;
    let changed = 0;
    let guidance = 0;
    prompt.forEach((m, i) => {
      const old = base ? base[i] : undefined;
      if (!base) {
        if (i > 0 || prompt.length === 1) {
          added += 1; // the first step: everything but the system prompt is new
          guidance += guidanceAt(m.content) >= 0 ? 1 : 0;
          parts.push(message(m, 'new'));
        }
      } else if (!old || old.role !== m.role) {
        added += 1;
        guidance += guidanceAt(m.content) >= 0 ? 1 : 0;
        parts.push(message(m, 'new'));
      } else if (old.content !== m.content) {
        changed += 1;
        const diff = lineDiff(old.content, m.content);
        guidance += diff.guidance;
        parts.push(diff.el);
      }
    });
    const what = [`${added} new message${added === 1 ? '' : 's'}`, changed ? `${changed} changed` : ''].filter(Boolean).join(' and ');
    const full = h(
      'details',
      { class: 'memfit-prompt-full' },
      h('summary', null, `full prompt (${prompt.length} messages)`),
      ...prompt.map(m => message(m, 'same'))
    );
    const xray = h(
      'details',
      { class: 'memfit-xray' },
      h('summary', null, `X-ray: the next prompt · ${what} since the last step${guidance ? ` · ${guidance} guidance` : ''}`),
      ...parts,
      full
    );
    // Opened once, the X-ray stays open (and its full prompt too) while the person steps.
    keepOpen(xray, this._xrayOpen, 'xray');
    keepOpen(full, this._xrayOpen, 'full');
    this._xray.replaceChildren(xray);
  }

  private _source: LiveSource;
  private _controls: HTMLElement;
  private _xray: HTMLElement;
  private _stop: () => void;
  private _ticker = 0;
  private _headAt = Date.now();
  private _followed: number | null = null;
  private _autoOpened = false;
  private _confirming = false;
  /** The prompt shown now, and the one before it (what the X-ray compares with). */
  private _shown: Message[] | null = null;
  private _base: Message[] | null = null;
  /** Whether the person has the X-ray (and its full prompt) open: kept across redraws. */
  private _xrayOpen: Record<string, boolean> = {};
}

/** Open `el` if the person had it open, and remember when they open or close it. */
function keepOpen(el: HTMLElement, state: Record<string, boolean>, key: string): void {
  if (state[key]) {
    el.setAttribute('open', '');
  }
  el.addEventListener('toggle', () => {
    state[key] = el.hasAttribute('open');
  });
}

function samePrompt(a: Message[], b: Message[]): boolean {
  return a.length === b.length && a.every((m, i) => m.role === b[i].role && m.content === b[i].content);
}

/** The index of the first line of guidance in a message (it runs to the message's end), or -1. */
function guidanceAt(content: string): number {
  return content.split('\n').findIndex(line => GUIDANCE.test(line));
}

/** A message of the prompt; guidance in it (a whole note, or a reflection after an observation) highlighted. */
function message(m: Message, kind: 'new' | 'same'): HTMLElement {
  const at = guidanceAt(m.content);
  const lines = m.content.split('\n');
  const pre = h('pre', { class: 'memfit-pre' });
  if (at < 0) {
    pre.append(clip(m.content, 12000));
  } else {
    const before = lines.slice(0, at).join('\n');
    pre.append(before ? `${clip(before, 6000)}\n` : '', h('span', { class: 'memfit-guidance-text' }, clip(lines.slice(at).join('\n'), 6000)));
  }
  return h(
    'div',
    { class: `memfit-message${kind === 'new' ? ' memfit-message-new' : ''}${at >= 0 ? ' memfit-guidance' : ''}`, 'data-role': m.role },
    h('span', { class: 'memfit-label' }, m.role),
    pre
  );
}

/** Lines of a message that sit in a section the mechanisms add ("## ..." to the end). */
function sectionLines(text: string): boolean[] {
  let inside = false;
  return text.split('\n').map(line => (inside = inside || SECTION.test(line)));
}

/**
 * A message that changed, as its changed lines: added ones marked (guidance when they are in an
 * injected section or are a guidance note), removed ones struck through, a few unchanged lines
 * around them for context.  `guidance` counts the added guidance lines (headings left out).
 */
function lineDiff(before: string, after: string): { el: HTMLElement; guidance: number } {
  const inSection = sectionLines(after);
  const rows: HTMLElement[] = [];
  let line = 0; // index into `after`'s lines
  let guidance = 0;
  const chunks = diffLines(`${before}\n`, `${after}\n`); // a last line without its newline is still the same line
  chunks.forEach((chunk, n) => {
    const lines = chunk.value.replace(/\n$/, '').split('\n');
    if (chunk.added) {
      for (const text of lines) {
        const guided = (inSection[line] && !SECTION.test(text) && text.trim() !== '') || GUIDANCE.test(text);
        guidance += guided ? 1 : 0;
        rows.push(h('div', { class: `memfit-line memfit-line-added${guided ? ' memfit-guidance' : ''}` }, `+ ${text}`));
        line += 1;
      }
    } else if (chunk.removed) {
      rows.push(...lines.map(text => h('div', { class: 'memfit-line memfit-line-removed' }, `− ${text}`)));
    } else {
      // unchanged: two lines of context next to a change, the rest folded
      const near = (k: number) => (n > 0 && k < 2) || (n < chunks.length - 1 && k >= lines.length - 2);
      let skipped = 0;
      lines.forEach((text, k) => {
        if (near(k)) {
          if (skipped) {
            rows.push(h('div', { class: 'memfit-line memfit-line-skipped memfit-muted' }, `  … ${skipped} unchanged line${skipped === 1 ? '' : 's'}`));
            skipped = 0;
          }
          rows.push(h('div', { class: 'memfit-line' }, `  ${text}`));
        } else {
          skipped += 1;
        }
      });
      if (skipped) {
        rows.push(h('div', { class: 'memfit-line memfit-line-skipped memfit-muted' }, `  … ${skipped} unchanged line${skipped === 1 ? '' : 's'}`));
      }
      line += lines.length;
    }
  });
  return { el: h('div', { class: 'memfit-message memfit-message-changed' }, h('span', { class: 'memfit-label' }, 'changed'), h('div', { class: 'memfit-pre memfit-diff' }, ...rows)), guidance };
}

/** The expected cost of the next iteration (`run.estimate()`); says so when no price is known. */
export function estimateLine(e: CostEstimate | null): HTMLElement | null {
  if (!e) {
    return null;
  }
  if (e.error) {
    return h('span', { class: 'memfit-estimate memfit-muted', 'data-priced': 'unknown', title: e.error }, 'cost per iteration: could not be estimated');
  }
  if (!e.priced) {
    return h('span', { class: 'memfit-estimate memfit-muted', 'data-priced': 'false' }, `cost per iteration: no price known for ${e.model || 'this model'}`);
  }
  const calls = num(e.calls_per_iteration);
  const affordable = num(e.iterations_affordable);
  const detail = [
    calls !== null ? `${calls} call${calls === 1 ? '' : 's'}` : '',
    num(e.prompt_tokens) !== null ? `~${num(e.prompt_tokens)?.toLocaleString('en-US')} prompt tokens` : '',
    num(e.iteration_worst_case_usd) !== null ? `at most ${money(e.iteration_worst_case_usd)}` : '',
    affordable !== null ? `the budget left pays for ~${affordable.toLocaleString('en-US')}` : ''
  ].filter(Boolean);
  return h(
    'span',
    {
      class: 'memfit-estimate',
      'data-priced': 'true',
      title: `expected cost of the next iteration of ${e.model || 'the model'}, from its prices and the prompt it would send`
    },
    `≈ ${money(e.iteration_cost_usd)} per iteration`,
    detail.length ? h('span', { class: 'memfit-muted' }, ` (${detail.join(', ')})`) : null
  );
}
