/**
 * Small DOM and formatting helpers.
 *
 * Payloads come from notebooks, which may be untrusted, so every string goes
 * into the page through `textContent` (never `innerHTML`).
 */

export type Child = Node | string | number | null | undefined | false;

/** Longest text shown for one field before it is clipped. */
export const MAX_TEXT = 2000;

/** Create an element with attributes and children (strings become text nodes). */
export function h(
  tag: string,
  attrs: Record<string, string> | null,
  ...children: Child[]
): HTMLElement {
  const node = document.createElement(tag);
  if (attrs) {
    for (const [key, value] of Object.entries(attrs)) {
      node.setAttribute(key, value);
    }
  }
  for (const child of children) {
    if (child === null || child === undefined || child === false) {
      continue;
    }
    node.append(typeof child === 'number' ? String(child) : child);
  }
  return node;
}

/** Clip long text, saying how much was left out. */
export function clip(text: string, max: number = MAX_TEXT): string {
  if (text.length <= max) {
    return text;
  }
  return `${text.slice(0, max)}… (${text.length - max} more characters)`;
}

/** Any value as display text: strings as they are, the rest as compact JSON. */
export function str(value: unknown, max: number = MAX_TEXT): string {
  if (value === null || value === undefined) {
    return '';
  }
  if (typeof value === 'string') {
    return clip(value, max);
  }
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = String(value);
  }
  return clip(text, max);
}

/** Pretty JSON for parameters and data blocks, clipped. */
export function pretty(value: unknown, max: number = MAX_TEXT): string {
  try {
    return clip(JSON.stringify(value, null, 2) ?? String(value), max);
  } catch {
    return clip(String(value), max);
  }
}

/**
 * The value with the keys of every object in sorted order.  A notebook saved by JupyterLab
 * has its JSON keys sorted, so a run drawn from the kernel's events and the same run drawn
 * from the saved notebook agree only when neither depends on key order.
 */
export function canonical<T>(value: T): T {
  if (Array.isArray(value)) {
    return value.map(canonical) as unknown as T;
  }
  if (typeof value === 'object' && value !== null) {
    const out: Record<string, unknown> = {};
    for (const key of Object.keys(value as Record<string, unknown>).sort()) {
      out[key] = canonical((value as Record<string, unknown>)[key]);
    }
    return out as T;
  }
  return value;
}

/** The model tiers in the order a person reads them. */
export const TIER_ORDER = ['primary', 'fast', 'fallback'];

/** `[tier, model]` pairs: primary, fast, fallback, then any other tier by name. */
export function tierEntries(tiers: Record<string, unknown>): [string, unknown][] {
  const rank = (t: string) => (TIER_ORDER.includes(t) ? TIER_ORDER.indexOf(t) : TIER_ORDER.length);
  return Object.entries(tiers).sort((a, b) => rank(a[0]) - rank(b[0]) || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
}

/** A finite number or null. */
export function num(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}

/** A plain object or null. */
export function obj(value: unknown): Record<string, unknown> | null {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : null;
}

/** An array of strings (other items are shown as text). */
export function strings(value: unknown): string[] {
  return Array.isArray(value) ? value.map(v => str(v, 500)) : [];
}

export function money(value: unknown): string {
  const n = num(value);
  if (n === null) {
    return '—';
  }
  return n >= 1 ? `$${n.toFixed(2)}` : `$${n.toFixed(4)}`;
}

export function seconds(value: unknown): string {
  const n = num(value);
  if (n === null) {
    return '—';
  }
  return n >= 10 ? `${n.toFixed(0)} s` : `${n.toFixed(2)} s`;
}

export function count(value: unknown): string {
  const n = num(value);
  return n === null ? '—' : n.toLocaleString('en-US');
}

export function percent(fraction: number): string {
  return `${(fraction * 100).toFixed(fraction < 0.1 ? 1 : 0)}%`;
}

/**
 * A horizontal bar filled to `fraction` (clamped to 0..1).  The fill takes a
 * warning or over class at the given watermarks.
 */
export function bar(fraction: number, label: string, warnAt = 0.7, overAt = 1.0): HTMLElement {
  const f = Number.isFinite(fraction) ? Math.max(0, fraction) : 0;
  const level = f >= overAt ? 'over' : f >= warnAt ? 'warn' : 'ok';
  const fill = h('div', { class: `memfit-bar-fill memfit-${level}` });
  fill.style.width = `${Math.min(1, f) * 100}%`;
  return h(
    'div',
    { class: 'memfit-bar', title: label, 'data-level': level },
    h('div', { class: 'memfit-bar-track' }, fill),
    h('span', { class: 'memfit-bar-label' }, label)
  );
}

/** A small pill of text. */
export function badge(text: string, kind: string): HTMLElement {
  return h('span', { class: `memfit-badge memfit-badge-${kind}` }, text);
}

/** A labelled row: `label value`. */
export function field(label: string, value: Child): HTMLElement {
  return h(
    'div',
    { class: 'memfit-field' },
    h('span', { class: 'memfit-label' }, label),
    ' ',
    h('span', { class: 'memfit-value' }, value)
  );
}

/** A bulleted list of strings, or nothing when empty. */
export function list(items: string[], cls = 'memfit-list'): HTMLElement | null {
  if (items.length === 0) {
    return null;
  }
  return h('ul', { class: cls }, ...items.map(item => h('li', null, item)));
}

/** A collapsed block of preformatted text. */
export function details(summary: string, text: string): HTMLElement {
  return h(
    'details',
    { class: 'memfit-details' },
    h('summary', null, summary),
    h('pre', null, text)
  );
}
