/**
 * The payloads this extension renders, and how a bad one is read.
 *
 * `application/vnd.memfit.run+json` is exactly `Run.trace()`; its shape is the
 * generated `Trace` of trace-types.ts (from memfit_jupyter/schema.py, so it
 * cannot drift from the Python event classes).  A payload is read leniently
 * (it may come from another version): see `MemfitEvent` and `checkRun`.
 *
 * `application/vnd.memfit.memory+json` is a memory ranking:
 *   {version: 1, query,
 *    results [{id, content, tags [str], score,
 *              breakdown {r, c, t, a, p, o, e, keyword_bonus, semantic, final}}]}
 * Optional: bytes, bytes_limit, and per row rank and further breakdown keys
 * (core, lexical, relevance), which are shown only where named here.
 * r..e are the C.O.R.E. P.A.C.T. dimensions (0..1), keyword_bonus the bonus
 * from keyword matching, semantic the vector similarity, final the ranking
 * score (`score` repeats it).  The same result rows appear in `memory` events.
 */

import { num, obj } from './dom';
import { MemoryEvent, Trace, TraceEvent } from './trace-types';

export const RUN_MIME = 'application/vnd.memfit.run+json';
export const MEMORY_MIME = 'application/vnd.memfit.memory+json';
export const COMPARE_MIME = 'application/vnd.memfit.compare+json';
export const SUPPORTED_VERSION: Trace['version'] = 1;

/** Beyond this many rows a memory ranking is cut, with a notice. */
export const MAX_RESULTS = 200;

/** The type of an event this version knows (the generated catalogue). */
export type EventType = TraceEvent['type'];

/**
 * An event as read from a payload: the generated event's common fields, checked (`ts` may be
 * missing in an old trace); its other fields are read where they are drawn, each checked, since a
 * trace of another version may hold any type (`type` is then a string this version does not know).
 */
export type MemfitEvent = {
  type: EventType | (string & Record<never, never>);
  iteration: TraceEvent['iteration'];
  ts: TraceEvent['ts'] | null;
  [field: string]: unknown;
};

/** `e` is a known event of type `type`: its generated fields typed (trusting the writer's schema). */
export function isEvent<T extends EventType>(e: MemfitEvent, type: T): e is MemfitEvent & Extract<TraceEvent, { type: T }> {
  return e.type === type;
}

/** What a renderer needs to know about a payload before drawing it. */
export interface Checked<T> {
  /** The payload, read as far as possible, or null when it is not readable at all. */
  value: T | null;
  /** Readable sentences about what is wrong; shown above the rendering. */
  problems: string[];
}

export interface RunTrace {
  /** `Trace['version']` when the payload is of this version; anything else is reported. */
  version: Trace['version'] | unknown;
  /** The payload's fields as they came: `Trace`'s names, each unchecked until it is drawn. */
  raw: { [K in keyof Omit<Trace, 'events'>]?: unknown } & Record<string, unknown>;
  events: MemfitEvent[];
}

function describe(value: unknown): string {
  if (value === null) {
    return 'null';
  }
  if (Array.isArray(value)) {
    return 'a list';
  }
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}

function checkVersion(kind: string, version: unknown, problems: string[]): void {
  if (version === undefined) {
    problems.push(`This ${kind} has no version field; it is read as version ${SUPPORTED_VERSION}.`);
  } else if (version !== SUPPORTED_VERSION) {
    problems.push(
      `This ${kind} is version ${JSON.stringify(version)}, but this extension reads ` +
        `version ${SUPPORTED_VERSION}; showing what it can. Upgrading memfit-jupyter may help.`
    );
  }
}

/** Fields a run is not complete without (named from the generated `Trace`: a rename fails to compile). */
const RUN_FIELDS: (keyof Trace)[] = ['run_id', 'task', 'status', 'totals', 'events'];

/** Read a run trace; never throws. */
export function checkRun(data: unknown): Checked<RunTrace> {
  const raw = obj(data);
  if (!raw) {
    return {
      value: null,
      problems: [`This output is not a memfit run: expected a JSON object, got ${describe(data)}.`]
    };
  }
  const problems: string[] = [];
  checkVersion('memfit run', raw.version, problems);
  const missing = RUN_FIELDS.filter(key => raw[key] === undefined);
  if (missing.length) {
    problems.push(`This memfit run is missing fields: ${missing.join(', ')}.`);
  }
  const events: MemfitEvent[] = [];
  let skipped = 0;
  if (raw.events !== undefined && !Array.isArray(raw.events)) {
    problems.push(`The run's events should be a list, got ${describe(raw.events)}.`);
  } else if (Array.isArray(raw.events)) {
    for (const item of raw.events) {
      const e = obj(item);
      if (!e || typeof e.type !== 'string') {
        skipped += 1;
        continue;
      }
      events.push({
        ...e,
        type: e.type,
        iteration: num(e.iteration) ?? 0,
        ts: num(e.ts)
      });
    }
  }
  if (skipped) {
    problems.push(`${skipped} event(s) without a type were skipped.`);
  }
  return { value: { version: raw.version, raw, events }, problems };
}

export interface MemoryRow {
  id: string;
  content: string;
  tags: string[];
  final: number | null;
  breakdown: Record<string, unknown>;
}

export interface MemoryRanking {
  query: string;
  rows: MemoryRow[];
  total: number;
  /** Bytes of content in the ranking and the limit it was cut to, when the payload says. */
  bytes: number | null;
  bytesLimit: number | null;
}

/** Read memory result rows (from a ranking payload or a `memory` event's `results`). */
export function readRows(results: MemoryEvent['results'] | unknown[]): MemoryRow[] {
  const rows: MemoryRow[] = [];
  for (const item of results.slice(0, MAX_RESULTS)) {
    const r = obj(item);
    if (!r) {
      continue;
    }
    const breakdown = obj(r.breakdown) ?? {};
    rows.push({
      id: r.id === undefined || r.id === null ? '' : String(r.id),
      content: typeof r.content === 'string' ? r.content : JSON.stringify(r.content ?? ''),
      tags: Array.isArray(r.tags) ? r.tags.map(t => String(t)) : [],
      final: num(breakdown.final) ?? num(r.score),
      breakdown
    });
  }
  return rows;
}

/** Read a memory ranking; never throws. */
export function checkMemory(data: unknown): Checked<MemoryRanking> {
  const raw = obj(data);
  if (!raw) {
    return {
      value: null,
      problems: [
        `This output is not a memfit memory ranking: expected a JSON object, got ${describe(data)}.`
      ]
    };
  }
  const problems: string[] = [];
  checkVersion('memory ranking', raw.version, problems);
  let results: unknown[] = [];
  if (!Array.isArray(raw.results)) {
    problems.push(
      raw.results === undefined
        ? 'This memory ranking is missing fields: results.'
        : `The ranking's results should be a list, got ${describe(raw.results)}.`
    );
  } else {
    results = raw.results;
  }
  if (results.length > MAX_RESULTS) {
    problems.push(`Showing the first ${MAX_RESULTS} of ${results.length} results.`);
  }
  const rows = readRows(results);
  const dropped = Math.min(results.length, MAX_RESULTS) - rows.length;
  if (dropped > 0) {
    problems.push(`${dropped} result(s) that are not objects were skipped.`);
  }
  return {
    value: {
      query: typeof raw.query === 'string' ? raw.query : '',
      rows,
      total: results.length,
      bytes: num(raw.bytes),
      bytesLimit: num(raw.bytes_limit)
    },
    problems
  };
}
