/**
 * The plugin half of the extension: registers the live run widget with the
 * Jupyter widget manager.  The renderers are the MIME half (index.ts); both
 * halves come from one build and share the live registry (liveregistry.ts).
 */

import { IJupyterWidgetRegistry } from '@jupyter-widgets/base';
import type { IPlugin } from '@lumino/coreutils';

import { MODULE_NAME, MODULE_VERSION } from './version';

const plugin: IPlugin<any, void> = {
  id: 'memfit-jupyter:live-widget',
  description: 'The live memfit run widget.',
  requires: [IJupyterWidgetRegistry],
  autoStart: true,
  activate: (_app: unknown, registry: IJupyterWidgetRegistry) => {
    registry.registerWidget({
      name: MODULE_NAME,
      version: MODULE_VERSION,
      exports: async () => {
        const { MemfitRunModel, MemfitRunView } = await import('./widgetmodel');
        return { MemfitRunModel, MemfitRunView } as any;
      }
    });
  }
};

export default plugin;
