/**
 * What the tests' stand-ins for a live run share with each other: the views' listeners, told of
 * each change, and the actions the views send to the kernel.
 */

import { LiveChange } from '../src/liveregistry';

export class FakeLink {
  closed = false;
  sent: Record<string, unknown>[] = [];

  listen(cb: (c: LiveChange) => void): () => void {
    this.listeners.add(cb);
    return () => this.listeners.delete(cb);
  }

  act(action: Record<string, unknown>): void {
    this.sent.push(action);
  }

  protected tell(change: LiveChange): void {
    this.listeners.forEach(cb => cb(change));
  }

  private listeners = new Set<(c: LiveChange) => void>();
}
