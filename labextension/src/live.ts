/**
 * The live view of a run: the same `RunView` as a saved run, fed by the
 * kernel's batches of events, with the controls in one fixed place above it
 * (status with a spinner and a ticking clock, the buttons, the approval
 * question, the choices of a diverse synthesis, the override, the escalation)
 * and, in step mode, the X-ray of the next prompt.
 */

import { h, seconds, str, num, obj, clip } from './dom';
import { Controls, LiveChange, LiveSource } from './liveregistry';
import { RunView } from './run';

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

/** Guidance the loop puts into the prompt starts so (reflections, spin warnings, notes). */
const GUIDANCE = /^\s*\[(SYSTEM|GUIDANCE|REFLECTION|SPIN)/;

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
    this.run.update(source.head, source.events);
    this._drawControls();
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
      this._followNewest();
      this._drawStatus();
    } else if (change.kind === 'reset') {
      this.run.reset();
      this.run.update(this._source.head, this._source.events);
    } else {
      this._drawControls();
    }
  }

  /** While the run goes on, its newest iteration is open and in view; the one before closes. */
  private _followNewest(): void {
    const events = this.run.events;
    const newest = events.length ? events[events.length - 1].iteration : null;
    if (newest === null || newest === this._followed) {
      return;
    }
    const previous = this._followed === null ? undefined : this.run.block(this._followed);
    if (previous && this._autoOpened) {
      previous.removeAttribute('open');
    }
    const block = this.run.block(newest);
    this._followed = newest;
    this._autoOpened = false;
    if (block && this._running() && !block.hasAttribute('open')) {
      block.setAttribute('open', '');
      block.dispatchEvent(new Event('toggle'));
      this._autoOpened = true;
    }
    if (block && this._running() && typeof block.scrollIntoView === 'function' && this._inView()) {
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
    return h(
      'div',
      { class: 'memfit-live-status', 'data-status': str(c.status) },
      running ? h('span', { class: 'memfit-spinner', 'aria-label': 'working' }) : null,
      h('span', { class: 'memfit-live-label' }, str(c.status) || str(this._source.head.status) || 'pending'),
      ' ',
      clock
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

  /** What changed in the prompt since the last step, the guidance highlighted; the full prompt one click away. */
  private _drawXray(prompt: Message[] | null): void {
    if (!prompt || !prompt.length) {
      this._xray.replaceChildren();
      return;
    }
    const before = this._lastPrompt;
    let same = 0;
    if (before) {
      while (same < before.length && same < prompt.length && before[same].role === prompt[same].role && before[same].content === prompt[same].content) {
        same += 1;
      }
    }
    if (before && prompt !== before && JSON.stringify(prompt) !== JSON.stringify(before)) {
      this._newFrom = same;
    } else if (!before) {
      this._newFrom = prompt.length > 1 ? 1 : 0; // first step: all but the system prompt
    }
    this._lastPrompt = prompt;
    const fresh = prompt.slice(this._newFrom);
    const guidance = fresh.filter(m => GUIDANCE.test(m.content)).length;
    const message = (m: Message, isNew: boolean) =>
      h(
        'div',
        { class: `memfit-message${isNew ? ' memfit-message-new' : ''}${GUIDANCE.test(m.content) ? ' memfit-guidance' : ''}`, 'data-role': m.role },
        h('span', { class: 'memfit-label' }, m.role),
        h('pre', { class: 'memfit-pre' }, clip(m.content, 12000))
      );
    const full = h('details', { class: 'memfit-prompt-full' }, h('summary', null, `full prompt (${prompt.length} messages)`), ...prompt.map((m, i) => message(m, i >= this._newFrom)));
    this._xray.replaceChildren(
      h(
        'details',
        { class: 'memfit-xray' },
        h('summary', null, `X-ray: the next prompt · ${fresh.length} new message${fresh.length === 1 ? '' : 's'} since the last step${guidance ? ` · ${guidance} guidance` : ''}`),
        ...fresh.map(m => message(m, true)),
        full
      )
    );
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
  private _lastPrompt: Message[] | null = null;
  private _newFrom = 0;
}
