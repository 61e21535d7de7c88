/** Readable boxes for bad payloads: a list of problems, or a last-resort raw view. */

import { clip, h } from './dom';

/** A warning box listing what is wrong with a payload, or null when nothing is. */
export function problemBox(problems: string[]): HTMLElement | null {
  if (problems.length === 0) {
    return null;
  }
  return h(
    'div',
    { class: 'memfit-problems', role: 'alert' },
    ...problems.map(p => h('div', { class: 'memfit-problem' }, p))
  );
}

/**
 * Shown when a payload cannot be drawn at all: the reason and the start of the
 * raw JSON, so the output is never blank.
 */
export function failureBox(err: unknown, data: unknown): HTMLElement {
  let raw: string;
  try {
    raw = JSON.stringify(data, null, 1) ?? String(data);
  } catch {
    raw = String(data);
  }
  const reason = err instanceof Error ? `: ${err.message}` : '';
  return h(
    'div',
    { class: 'memfit-failure', role: 'alert' },
    h('div', { class: 'memfit-problem' }, `memfit could not render this output${reason}.`),
    h('pre', { class: 'memfit-raw' }, clip(raw, 3000))
  );
}
