/**
 * The Lumino widget JupyterLab places in an output area for our MIME types.
 *
 * A run's output is one bundle: the saved trace (the durable record) and, in
 * its metadata, the id of the live widget model the kernel streams the run
 * through.  While that model is on the page the run is drawn live from it;
 * otherwise (a notebook reopened with no kernel, another session) the saved
 * trace is drawn.  Both are the same `RunView`.  A comparison of two runs
 * (`%memfit_demo`) names a live model per side the same way
 * (`live_widgets: [a, b]`): each side is drawn live while its run goes.
 */

import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Widget } from '@lumino/widgets';

import { renderCompare } from './compare';
import { h } from './dom';
import { ForkPanel } from './fork';
import { LiveRunView } from './live';
import { findLive, LiveSource, whenLive } from './liveregistry';
import { renderMemory } from './memory';
import { COMPARE_MIME, MEMORY_MIME } from './payload';
import { renderRun, savedRunView } from './run';

/**
 * One run on the page: drawn live from its widget model while that is on the page (or once it
 * registers), from the saved trace otherwise and once the kernel has gone.
 */
export class LiveSlot {
  /** Draw into `host`: live from model `id` when there is one, else `saved()`. */
  place(host: HTMLElement, id: string, saved: () => HTMLElement): void {
    this._saved = saved;
    if (this._live && this._liveId === id) {
      if (this._host !== host) {
        this._host = host;
        host.replaceChildren(this._live.root); // a redrawn comparison: the live view moves over
      }
      return; // the live view is ahead of any saved copy
    }
    this._unwait();
    this._dropLive();
    this._host = host;
    this._liveId = id;
    const source = id ? findLive(id) : undefined;
    if (source) {
      this._goLive(source);
    } else {
      host.replaceChildren(saved());
      if (id) {
        this._unwait = whenLive(id, s => this._goLive(s));
      }
    }
  }

  get live(): boolean {
    return this._live !== null;
  }

  /** Told when the slot goes live or back to the saved trace. */
  onChange: (live: boolean) => void = () => undefined;

  /** Told when the slot draws a live view (and the source it follows). */
  onLive: (view: LiveRunView, source: LiveSource) => void = () => undefined;

  dispose(): void {
    this._disposed = true;
    this._unwait();
    this._dropLive();
  }

  private _goLive(source: LiveSource): void {
    if (this._disposed || !this._host) {
      return;
    }
    this._dropLive();
    const live = new LiveRunView(source);
    this._live = live;
    // When the kernel goes away the saved trace (updated by the kernel as the run settled) takes over.
    this._stopLive = source.listen(change => {
      if (change.kind === 'closed') {
        this._dropLive();
        this._host?.replaceChildren(this._saved());
      }
    });
    this._host.replaceChildren(live.root);
    this.onLive(live, source);
    this.onChange(true);
  }

  private _dropLive(): void {
    this._stopLive();
    this._stopLive = () => undefined;
    const was = this._live !== null;
    this._live?.dispose();
    this._live = null;
    if (was) {
      this.onChange(false);
    }
  }

  private _host: HTMLElement | null = null;
  private _saved: () => HTMLElement = () => h('div', null);
  private _live: LiveRunView | null = null;
  private _liveId = '';
  private _disposed = false;
  private _unwait: () => void = () => undefined;
  private _stopLive: () => void = () => undefined;
}

export class MemfitRenderer extends Widget implements IRenderMime.IRenderer {
  constructor(options: IRenderMime.IRendererOptions) {
    super();
    this._mimeType = options.mimeType;
    this.addClass('jp-MemfitRenderer');
  }

  /** Draw the payload; the render functions never throw, so the cell is never blank. */
  renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    const data = model.data[this._mimeType];
    const meta = (model.metadata?.[this._mimeType] ?? {}) as Record<string, unknown>;
    if (this._mimeType === MEMORY_MIME) {
      this.node.replaceChildren(renderMemory(data));
      return Promise.resolve();
    }
    if (this._mimeType === COMPARE_MIME) {
      const ids = Array.isArray(meta.live_widgets) ? meta.live_widgets : [];
      const root = renderCompare(data, (trace, i) => {
        const host = h('div', { class: 'memfit-side-run' });
        const id = typeof ids[i] === 'string' ? (ids[i] as string) : '';
        this._slot(i).place(host, id, () => renderRun(trace));
        return host;
      });
      this.node.replaceChildren(root);
      return Promise.resolve();
    }
    const id = typeof meta.live_widget === 'string' ? meta.live_widget : '';
    // The run, then its forks (the tree, a comparison, each child's view): fork.ts.
    const forks = this._forks ?? (this._forks = new ForkPanel(() => new LiveSlot()));
    const slot = this._slot(0);
    slot.onLive = (live, source) => forks.attach(live.run, source, () => ({ ...source.head, events: source.events }));
    forks.setSaved(meta.forks);
    slot.place(this._runHost, id, () => {
      const saved = savedRunView(data);
      if (saved.view) {
        forks.attach(saved.view, null, () => (data && typeof data === 'object' ? (data as Record<string, unknown>) : {}));
      }
      return saved.root;
    });
    if (this._runHost.parentNode !== this.node) {
      this.node.replaceChildren(this._runHost, forks.root);
    }
    return Promise.resolve();
  }

  dispose(): void {
    this._forks?.dispose();
    this._slots.forEach(slot => slot.dispose());
    super.dispose();
  }

  private _slot(i: number): LiveSlot {
    while (this._slots.length <= i) {
      const slot = new LiveSlot();
      slot.onChange = () => this.toggleClass('jp-MemfitRenderer-live', this._slots.some(s => s.live));
      this._slots.push(slot);
    }
    return this._slots[i];
  }

  private _mimeType: string;
  private _slots: LiveSlot[] = [];
  private _forks: ForkPanel | null = null;
  private _runHost = h('div', { class: 'memfit-run-host' });
}
