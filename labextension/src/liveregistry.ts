/**
 * Live runs on this page, by widget model id.  The widget model (widgetmodel.ts)
 * registers here when the kernel opens it; the run renderer (widget.ts) looks
 * its run up here to draw it live.  This module imports nothing from the
 * widget packages, so the renderer also works where they are absent.
 */

import { MemfitEvent } from './payload';
import { Streaming } from './stream';
import { Estimate, ForkEntry } from './protocol-types';

/** What the kernel says about the controls of a live run (see memfit_jupyter/jupyter/widget.py). */
export interface Controls {
  /** What the run is doing, in words: running, paused, waiting for approval, done... */
  status?: string;
  /** What the run is waiting for now, when it is not the model (e.g. "loading the model client"). */
  note?: string | null;
  /** A button's action is running in the kernel: every button waits. */
  busy?: boolean;
  /** The buttons to show, by action name. */
  buttons?: string[];
  /** The tool call waiting for approval. */
  approval?: { tool?: string; params?: unknown; thought?: string } | null;
  /** Alternatives of a diverse synthesis waiting for the person's choice. */
  choices?: { index: number; answer: string }[];
  /** The cost limit an override proposes. */
  override_cost?: number;
  /** How many trials "more trials" adds. */
  extra_trials?: number;
  /** The lessons of the failure diary, once asked for. */
  diary?: { lessons?: string[]; past?: string[] } | null;
  /** The messages the next action call will send (step mode). */
  prompt?: { role: string; content: string }[] | null;
  /** Events the kernel has sent so far. */
  count?: number;
  /** Iteration rows the live view keeps in the page; older ones fold into one line (0: all). */
  max_cards?: number;
  /** What the next iteration is expected to cost (`run.estimate()`), or why that is unknown. */
  estimate?: CostEstimate | null;
  /** The forks of the run made in this kernel (fork.ts draws them as a tree). */
  forks?: ForkEntry[];
  /** Why the last "Fork from here" made nothing (one line), or null. */
  fork_error?: string | null;
}

/** The figures of `run.estimate()` the view shows: the generated protocol's `Estimate`. */
export type CostEstimate = Estimate;

export type LiveChange =
  | { kind: 'batch'; events: MemfitEvent[] }
  | { kind: 'reset' }
  | { kind: 'controls' }
  | { kind: 'delta' }
  | { kind: 'closed' };

/** A run as the kernel streams it. */
export interface LiveSource {
  readonly liveId: string;
  readonly head: Record<string, unknown>;
  readonly events: MemfitEvent[];
  readonly controls: Controls;
  readonly closed: boolean;
  /** The reply streaming in now, if any (live only: never part of the events). */
  readonly streaming?: Streaming | null;
  /** Be told about every change; returns the function that stops it. */
  listen(callback: (change: LiveChange) => void): () => void;
  /** Ask the kernel to do something (a button). */
  act(action: Record<string, unknown>): void;
}

const sources = new Map<string, LiveSource>();
const waiting = new Map<string, Set<(source: LiveSource) => void>>();

export function registerLive(source: LiveSource): void {
  sources.set(source.liveId, source);
  for (const callback of waiting.get(source.liveId) ?? []) {
    callback(source);
  }
  waiting.delete(source.liveId);
}

export function unregisterLive(id: string): void {
  sources.delete(id);
}

export function findLive(id: string): LiveSource | undefined {
  const source = sources.get(id);
  return source && !source.closed ? source : undefined;
}

/** Call back once the live run `id` registers; returns the function that stops waiting. */
export function whenLive(id: string, callback: (source: LiveSource) => void): () => void {
  let set = waiting.get(id);
  if (!set) {
    set = new Set();
    waiting.set(id, set);
  }
  set.add(callback);
  return () => {
    set?.delete(callback);
  };
}
