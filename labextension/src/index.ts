/**
 * memfit-jupyter's JupyterLab extension: renderers for saved runs
 * (`application/vnd.memfit.run+json`) and memory rankings
 * (`application/vnd.memfit.memory+json`).  They need no kernel, and rank 0
 * puts them above `text/html` (rank 50), the fallback the same bundle carries.
 */

import { IRenderMime } from '@jupyterlab/rendermime-interfaces';

import { MEMORY_MIME, RUN_MIME } from './payload';
import { MemfitRenderer } from './widget';

export { renderRun } from './run';
export { renderMemory } from './memory';
export { MEMORY_MIME, RUN_MIME } from './payload';

/** Lower ranks win; JupyterLab's HTML renderer has rank 50. */
export const RANK = 0;

function factory(mimeType: string): IRenderMime.IRendererFactory {
  return {
    // Safe: every payload string reaches the page as text, never as HTML, so
    // untrusted notebooks render too.
    safe: true,
    mimeTypes: [mimeType],
    createRenderer: options => new MemfitRenderer(options)
  };
}

const extensions: IRenderMime.IExtension[] = [
  {
    id: 'memfit-jupyter:run',
    rendererFactory: factory(RUN_MIME),
    rank: RANK,
    dataType: 'json'
  },
  {
    id: 'memfit-jupyter:memory',
    rendererFactory: factory(MEMORY_MIME),
    rank: RANK,
    dataType: 'json'
  }
];

export default extensions;
