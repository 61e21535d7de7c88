/**
 * The Lumino widget JupyterLab places in an output area for our MIME types.
 *
 * A run's output is one bundle: the saved trace (the durable record) and, in
 * its metadata, the id of the live widget model the kernel streams the run
 * through.  While that model is on the page the run is drawn live from it;
 * otherwise (a notebook reopened with no kernel, another session) the saved
 * trace is drawn.  Both are the same `RunView`.
 */

import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Widget } from '@lumino/widgets';

import { renderCompare } from './compare';
import { LiveRunView } from './live';
import { findLive, LiveSource, whenLive } from './liveregistry';
import { renderMemory } from './memory';
import { COMPARE_MIME, MEMORY_MIME } from './payload';
import { renderRun } from './run';

export class MemfitRenderer extends Widget implements IRenderMime.IRenderer {
  constructor(options: IRenderMime.IRendererOptions) {
    super();
    this._mimeType = options.mimeType;
    this.addClass('jp-MemfitRenderer');
  }

  /** Draw the payload; the render functions never throw, so the cell is never blank. */
  renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    const data = model.data[this._mimeType];
    this._data = data;
    if (this._mimeType === MEMORY_MIME) {
      this.node.replaceChildren(renderMemory(data));
      return Promise.resolve();
    }
    if (this._mimeType === COMPARE_MIME) {
      this.node.replaceChildren(renderCompare(data));
      return Promise.resolve();
    }
    const meta = (model.metadata?.[this._mimeType] ?? {}) as Record<string, unknown>;
    const id = typeof meta.live_widget === 'string' ? meta.live_widget : '';
    if (this._live && this._liveId === id) {
      return Promise.resolve(); // the live view is ahead of any saved copy
    }
    this._unwait();
    const source = id ? findLive(id) : undefined;
    if (source) {
      this._goLive(source);
    } else {
      this._drawSaved();
      if (id) {
        this._unwait = whenLive(id, s => this._goLive(s));
      }
    }
    this._liveId = id;
    return Promise.resolve();
  }

  dispose(): void {
    this._unwait();
    this._dropLive();
    super.dispose();
  }

  private _goLive(source: LiveSource): void {
    if (this.isDisposed) {
      return;
    }
    this._dropLive();
    const live = new LiveRunView(source);
    this._live = live;
    // When the kernel goes away the saved trace (updated by the kernel as the run settled) takes over.
    this._stopLive = source.listen(change => {
      if (change.kind === 'closed') {
        this._dropLive();
        this._drawSaved();
      }
    });
    this.node.replaceChildren(live.root);
    this.addClass('jp-MemfitRenderer-live');
  }

  private _dropLive(): void {
    this._stopLive();
    this._stopLive = () => undefined;
    this._live?.dispose();
    this._live = null;
    this.removeClass('jp-MemfitRenderer-live');
  }

  private _drawSaved(): void {
    this.node.replaceChildren(renderRun(this._data));
  }

  private _mimeType: string;
  private _data: unknown = null;
  private _live: LiveRunView | null = null;
  private _liveId = '';
  private _unwait: () => void = () => undefined;
  private _stopLive: () => void = () => undefined;
}
