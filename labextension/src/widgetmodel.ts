/**
 * The live run as a Jupyter widget: the kernel (memfit_jupyter/jupyter/widget.py)
 * sends batches of serialized events as custom messages and the controls as
 * synced state, never HTML.  The model keeps the events, so a view drawn
 * later (or the run renderer of the cell's saved output) shows the whole run.
 *
 * Messages from the kernel: `{kind: "batch", start, events, head}`.  A batch
 * that starts past the events held means some were missed (a page reload):
 * the model asks for the rest with `{action: "sync", have}`.  `{kind: "delta",
 * event}` is a piece of a reply streaming in (a `model_delta`): held as
 * `streaming` until the call's `model_call` event arrives, never as an event.
 */

import { DOMWidgetModel, DOMWidgetView } from '@jupyter-widgets/base';

import { LiveRunView } from './live';
import { Controls, LiveChange, LiveSource, registerLive, unregisterLive } from './liveregistry';
import { MemfitEvent } from './payload';
import { LiveState } from './livestate';
import { Streaming } from './stream';
import { MODULE_NAME, MODULE_VERSION } from './version';

/** Kernel states after which a run it held is no longer there to steer. */
const GONE = new Set(['dead', 'restarting', 'autorestarting', 'terminating']);

/** A Lumino signal, as far as the model uses one. */
interface SignalLike<T> {
  connect(slot: (sender: unknown, value: T) => void): boolean;
  disconnect(slot: (sender: unknown, value: T) => void): boolean;
}

/** What the model uses of the widget manager's kernel connection (@jupyterlab/services). */
interface KernelLike {
  status?: string;
  statusChanged?: SignalLike<string>;
  disposed?: SignalLike<void>;
}

export class MemfitRunModel extends DOMWidgetModel implements LiveSource {
  defaults(): any {
    return {
      ...super.defaults(),
      _model_name: 'MemfitRunModel',
      _model_module: MODULE_NAME,
      _model_module_version: MODULE_VERSION,
      _view_name: 'MemfitRunView',
      _view_module: MODULE_NAME,
      _view_module_version: MODULE_VERSION,
      controls: {}
    };
  }

  /**
   * Backbone calls this from its constructor, before the fields of a subclass exist: what the
   * model holds is set up here, not in field initializers (they would run after, and wipe it).
   */
  initialize(attributes: any, options: any): void {
    this._state = new LiveState();
    this._listeners = new Set();
    this._ended = false;
    super.initialize(attributes, options);
    this.on('msg:custom', (content: any) => this._onMessage(content));
    this.on('change:controls', () => this._emit({ kind: 'controls' }));
    this.on('destroy', () => this._close());
    this.on('comm:close', () => this._close());
    if (!this.comm_live) {
      // Restored from a notebook's saved widget state: a record of a past kernel, not a run
      // that moves.  The run's own output (the saved trace) draws it; nothing listens here.
      this._ended = true;
      return;
    }
    registerLive(this);
    this._watchKernel();
    const have = (this.get('controls') as Controls)?.count ?? 0;
    if (have > 0) {
      this.act({ action: 'sync', have: 0 }); // a model restored from the kernel: fetch its events
    }
  }

  /**
   * A kernel shut down, restarted or lost does not close its comms: the widget manager only marks
   * its models not live on a restart, and not at all when the kernel is shut down.  Either way the
   * run this model streamed is gone, so the view must not offer Step or Abort to nobody: the
   * model closes, and the run's saved trace (as the kernel last wrote it) draws it instead.
   */
  private _watchKernel(): void {
    this.on('comm_live_update', () => {
      if (!this.comm_live) {
        this._close();
      }
    });
    const kernel = (this.widget_manager as unknown as { kernel?: KernelLike }).kernel;
    if (!kernel) {
      return;
    }
    const onStatus = (_: unknown, status: string): void => {
      if (GONE.has(status)) {
        this._close();
      }
    };
    kernel.statusChanged?.connect(onStatus);
    kernel.disposed?.connect(() => this._close());
    this.on('comm:close destroy', () => kernel.statusChanged?.disconnect(onStatus));
    if (GONE.has(kernel.status ?? '')) {
      this._close();
    }
  }

  get liveId(): string {
    return this.model_id;
  }

  get controls(): Controls {
    return (this.get('controls') as Controls) ?? {};
  }

  get closed(): boolean {
    return this._ended;
  }

  listen(callback: (change: LiveChange) => void): () => void {
    this._listeners.add(callback);
    return () => this._listeners.delete(callback);
  }

  act(action: Record<string, unknown>): void {
    if (!this._ended) {
      this.send(action as any, {});
    }
  }

  private _onMessage(content: any): void {
    const { changes, sync } = this._state.take(content);
    if (sync !== undefined) {
      this.act({ action: 'sync', have: sync });
    }
    changes.forEach(change => this._emit(change));
  }

  private _emit(change: LiveChange): void {
    for (const listener of [...this._listeners]) {
      try {
        listener(change);
      } catch (err) {
        console.warn('memfit: a live view failed to update', err);
      }
    }
  }

  private _close(): void {
    if (this._ended) {
      return;
    }
    this._ended = true;
    unregisterLive(this.model_id);
    this._emit({ kind: 'closed' });
  }

  get head(): Record<string, unknown> {
    return this._state.head;
  }

  get events(): MemfitEvent[] {
    return this._state.events;
  }

  get streaming(): Streaming | null {
    return this._state.streaming;
  }

  // Set in initialize(); declared without initializers, which would run after it (see there).
  private _state!: LiveState;
  private _listeners!: Set<(change: LiveChange) => void>;
  private _ended!: boolean;
}

/** The view, for `display(widget)`: the same live view the run renderer draws. */
export class MemfitRunView extends DOMWidgetView {
  render(): void {
    this.el.classList.add('jp-MemfitRenderer');
    this._live = new LiveRunView(this.model as unknown as MemfitRunModel);
    this.el.appendChild(this._live.root);
  }

  remove(): any {
    this._live?.dispose();
    return super.remove();
  }

  private _live: LiveRunView | null = null;
}
