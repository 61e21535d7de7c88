// jsdom has no DragEvent; @lumino/dragdrop subclasses it at import time.
if (typeof globalThis.DragEvent === 'undefined') {
  globalThis.DragEvent = class DragEvent extends MouseEvent {};
}
