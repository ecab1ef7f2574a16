// Requests the editor has accepted that are not tasks yet. A chat request for a local model that has never loaded
// waits for the load first: the model's real context decides how the conversation is fitted (chatProvider.ts), and
// the task is made after it. While it waits, the Tasks tree shows it as a row of the running group (treeModel.ts),
// so the first request after a start is visible at once, "loading" its model, until its task replaces it.
import type { IDisposable } from '../lifecycle';

export interface PendingRequest {
  readonly id: string;
  readonly title: string;
  readonly model: string;
  /** When it arrived (ms since the epoch). */
  readonly since: number;
}

export class PendingRequests implements IDisposable {
  private readonly rows = new Map<string, PendingRequest>();
  private readonly listeners = new Set<() => void>();
  private next = 1;

  constructor(private readonly now: () => number = Date.now) {}

  /** Shows a request until the returned handle is disposed (its task exists, or it failed before one was made). */
  add(title: string, model: string): IDisposable {
    const id = `pending-${this.next++}`;
    this.rows.set(id, { id, title, model, since: this.now() });
    this.fire();
    return { dispose: () => this.rows.delete(id) && this.fire() };
  }

  /** Newest first, as the tree lists tasks. */
  list(): PendingRequest[] {
    return [...this.rows.values()].reverse();
  }

  get size(): number {
    return this.rows.size;
  }

  onDidChange(listener: () => void): IDisposable {
    this.listeners.add(listener);
    return { dispose: () => this.listeners.delete(listener) };
  }

  dispose(): void {
    this.rows.clear();
    this.listeners.clear();
  }

  private fire(): void {
    for (const l of [...this.listeners]) l();
  }
}
