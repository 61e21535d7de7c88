/**
 * memfit-jupyter's JupyterLab extension, MIME half: renderers for runs
 * (`application/vnd.memfit.run+json`, live while the kernel streams them),
 * memory rankings (`application/vnd.memfit.memory+json`) and comparisons of
 * two runs (`application/vnd.memfit.compare+json`).  Saved outputs need no
 * kernel, and rank 0 puts them above `text/html` (rank 50), the fallback the
 * same bundle carries.  The plugin half (plugin.ts) registers the live widget.
 */

import { IRenderMime } from '@jupyterlab/rendermime-interfaces';

import { COMPARE_MIME, MEMORY_MIME, RUN_MIME } from './payload';
import { MemfitRenderer } from './widget';

export { renderRun } from './run';
export { renderMemory } from './memory';
export { renderCompare } from './compare';
export { COMPARE_MIME, MEMORY_MIME, RUN_MIME } from './payload';

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
  },
  {
    id: 'memfit-jupyter:compare',
    rendererFactory: factory(COMPARE_MIME),
    rank: RANK,
    dataType: 'json'
  }
];

export default extensions;
