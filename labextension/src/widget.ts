/** The Lumino widget JupyterLab places in an output area for our MIME types. */

import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Widget } from '@lumino/widgets';

import { renderMemory } from './memory';
import { MEMORY_MIME } from './payload';
import { renderRun } from './run';

/** How long to look for the live widget in the same cell (it renders asynchronously). */
const LIVE_WATCH_MS = 15_000;
const LIVE_WATCH_EVERY_MS = 250;

export class MemfitRenderer extends Widget implements IRenderMime.IRenderer {
  constructor(options: IRenderMime.IRendererOptions) {
    super();
    this._mimeType = options.mimeType;
    this.addClass('jp-MemfitRenderer');
  }

  /** Draw the payload; the render functions never throw, so the cell is never blank. */
  renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    const data = model.data[this._mimeType];
    const view = this._mimeType === MEMORY_MIME ? renderMemory(data) : renderRun(data);
    this.node.replaceChildren(view);
    const meta = (model.metadata?.[this._mimeType] ?? {}) as Record<string, unknown>;
    if (this._mimeType !== MEMORY_MIME && meta.live_widget) {
      this._foldUnderLiveWidget();
    }
    return Promise.resolve();
  }

  dispose(): void {
    window.clearTimeout(this._watch);
    super.dispose();
  }

  /**
   * A cell run in this session shows the live widget above this saved view, which is kept so
   * that a notebook reopened with no kernel still shows the whole run.  While the live widget is
   * on the page, the saved view folds to its header, one click away.  With no kernel the live
   * widget does not render, so the saved view stays open.
   */
  private _foldUnderLiveWidget(): void {
    window.clearTimeout(this._watch);
    const started = Date.now();
    const look = (): void => {
      const cell = this.node.closest('.jp-Cell, .jp-OutputArea');
      if (cell && cell.querySelector('.memfit-run-widget')) {
        this._fold();
      } else if (Date.now() - started < LIVE_WATCH_MS && !this.isDisposed) {
        this._watch = window.setTimeout(look, LIVE_WATCH_EVERY_MS);
      }
    };
    look();
  }

  private _fold(): void {
    if (this.hasClass('jp-MemfitRenderer-folded')) {
      return;
    }
    this.addClass('jp-MemfitRenderer-folded');
    const toggle = document.createElement('button');
    toggle.className = 'memfit-unfold';
    toggle.textContent = 'saved trace: the live widget above shows this run · show it here too';
    toggle.addEventListener('click', () => {
      this.removeClass('jp-MemfitRenderer-folded');
      toggle.remove();
    });
    this.node.appendChild(toggle);
  }

  private _mimeType: string;
  private _watch = 0;
}
