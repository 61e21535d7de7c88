/**
 * What the front end holds of a live run, and how each kernel message changes
 * it: the widget model (widgetmodel.ts) keeps one, so the rules are in one
 * place and testable without a kernel.
 *
 * Messages (memfit_jupyter/jupyter/widget.py): `{kind: "batch", start, events,
 * head?, reset?}`, the trace's events from `start` on; `{kind: "delta",
 * event}`, a piece of a reply streaming in (a `model_delta`, never an event of
 * the trace).
 */

import { LiveChange } from './liveregistry';
import { MemfitEvent } from './payload';
import { addDelta, endsStream, Streaming } from './stream';
import { ModelDeltaEvent } from './trace-types';

export class LiveState {
  head: Record<string, unknown> = {};
  events: MemfitEvent[] = [];
  /** The reply streaming in now, until its call's `model_call` event arrives. */
  streaming: Streaming | null = null;

  /**
   * Take one message.  Returns the changes to tell the views about, and `sync` (the number of
   * events held) when events were missed and the kernel must send them again.
   */
  take(content: any): { changes: LiveChange[]; sync?: number } {
    if (content && content.kind === 'delta' && content.event && typeof content.event === 'object') {
      this.streaming = addDelta(this.streaming, content.event as ModelDeltaEvent);
      return { changes: [{ kind: 'delta' }] };
    }
    if (!content || content.kind !== 'batch' || !Array.isArray(content.events)) {
      return { changes: [] };
    }
    const start = typeof content.start === 'number' ? content.start : 0;
    if (content.head && typeof content.head === 'object') {
      this.head = content.head;
    }
    if (start > this.events.length) {
      return { changes: [], sync: this.events.length };
    }
    const changes: LiveChange[] = [];
    if (start === 0 && content.reset) {
      this.events = [];
      this.streaming = null;
      changes.push({ kind: 'reset' });
    }
    const fresh = (content.events as MemfitEvent[]).slice(this.events.length - start);
    this.events.push(...fresh);
    if (fresh.some(e => endsStream(this.streaming, e))) {
      this.streaming = null;
    }
    changes.push({ kind: 'batch', events: fresh });
    return { changes };
  }
}
