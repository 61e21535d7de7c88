/**
 * A reply as it streams in (live only; `model_delta` events never enter the trace).
 *
 * The kernel sends the pieces of a streamed call (the action call, mostly) as
 * `{kind: "delta", event}` messages, throttled; the view shows the thought so
 * far in the iteration's row, marked "streaming", until the call's
 * `model_call` event arrives and the parsed action takes its place.
 */

import { badge, details, h } from './dom';
import { MemfitEvent } from './payload';
import { ModelDeltaEvent } from './trace-types';

/** The reply of one call so far. */
export interface Streaming {
  iteration: number;
  purpose: string;
  model: string;
  text: string;
  /** Characters of the reply so far, as the kernel counts them. */
  chars: number;
  /** Some pieces never arrived (the page was reloaded mid-call): the text starts later. */
  gap: boolean;
}

/** The reply with one more piece (a new call starts afresh). */
export function addDelta(before: Streaming | null, e: ModelDeltaEvent): Streaming {
  const text = typeof e.text === 'string' ? e.text : '';
  const chars = typeof e.chars === 'number' ? e.chars : (before?.chars ?? 0) + text.length;
  const same = before !== null && before.iteration === e.iteration && before.purpose === e.purpose;
  const had = same ? before.text : '';
  const expected = (same ? before.chars : 0) + text.length;
  return {
    iteration: e.iteration,
    purpose: String(e.purpose ?? ''),
    model: String(e.model ?? ''),
    text: had + text,
    chars,
    gap: (same && before.gap) || chars > expected
  };
}

/** Whether `e` ends the streamed call: its model_call (ok or not), or the end of the run. */
export function endsStream(s: Streaming | null, e: MemfitEvent): boolean {
  if (!s) {
    return false;
  }
  if (e.type === 'run_end') {
    return true;
  }
  return e.type === 'model_call' && e.iteration === s.iteration && e.purpose === s.purpose;
}

/**
 * What a person wants to read of a partial reply: the thought as it is written.  The action
 * reply is a JSON object (`{"thought": "...", "tool": ...}`), cut anywhere; its `thought`
 * string is decoded as far as it goes.  A reply that is not JSON (prose) is shown as it is.
 */
export function thoughtOf(text: string): string {
  const key = /"thought"\s*:\s*"/.exec(text);
  if (!key) {
    return /^\s*[{[]/.test(text) ? '' : text.trim();
  }
  let out = '';
  for (let i = key.index + key[0].length; i < text.length; i++) {
    const c = text[i];
    if (c === '"') {
      break;
    }
    if (c !== '\\') {
      out += c;
      continue;
    }
    const next = text[i + 1];
    if (next === undefined) {
      break; // an escape cut in two: the next piece completes it
    }
    if (next === 'u') {
      const hex = text.slice(i + 2, i + 6);
      if (!/^[0-9a-fA-F]{4}$/.test(hex)) {
        break;
      }
      out += String.fromCharCode(parseInt(hex, 16));
      i += 5;
      continue;
    }
    out += ({ n: '\n', t: '\t', r: '', b: '', f: '' } as Record<string, string>)[next] ?? next;
    i += 1;
  }
  return out;
}

/** Characters of the thought shown in the one-line row (the body card shows all of it). */
const ROW_CHARS = 160;

/** The decoration of the iteration's one-line row: a "streaming" badge and the thought's tail. */
export function streamRow(s: Streaming): HTMLElement {
  const thought = thoughtOf(s.text);
  const tail = thought.length > ROW_CHARS ? `…${thought.slice(-ROW_CHARS)}` : thought;
  return h(
    'span',
    { class: 'memfit-stream-row', 'data-purpose': s.purpose },
    badge('streaming', 'stream'),
    h('span', { class: 'memfit-stream-text' }, tail || `${s.purpose || 'reply'}: ${s.chars} characters`)
  );
}

/** The card in the iteration's body: the whole thought so far, and the raw reply behind a toggle. */
export function streamCard(s: Streaming): HTMLElement {
  const thought = thoughtOf(s.text);
  return h(
    'div',
    { class: 'memfit-event memfit-stream', 'data-purpose': s.purpose, 'aria-live': 'polite' },
    h(
      'div',
      { class: 'memfit-event-title' },
      `${s.purpose === 'action' ? 'Thinking' : `Streaming the ${s.purpose || 'reply'}`} `,
      h('span', { class: 'memfit-muted' }, `· ${s.model} · ${s.chars} characters so far`)
    ),
    h('div', { class: 'memfit-thought memfit-stream-thought' }, `${s.gap ? '… ' : ''}${thought}`),
    details('reply so far', s.text)
  );
}
