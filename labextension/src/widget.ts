/** The Lumino widget JupyterLab places in an output area for our MIME types. */

import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Widget } from '@lumino/widgets';

import { renderMemory } from './memory';
import { MEMORY_MIME } from './payload';
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
    const view = this._mimeType === MEMORY_MIME ? renderMemory(data) : renderRun(data);
    this.node.replaceChildren(view);
    return Promise.resolve();
  }

  private _mimeType: string;
}
