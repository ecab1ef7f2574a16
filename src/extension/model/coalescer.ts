// Collects keys of changed things and hands them over in batches: at most one flush per interval, and a short
// settle delay so a burst of synchronous changes lands in one flush.

export interface Timers {
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export const realTimers: Timers = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (h) => clearTimeout(h as ReturnType<typeof setTimeout>),
};

export class ChangeCoalescer<K> {
  private pending = new Set<K>();
  private timer: unknown;
  private lastFlush = -Infinity;
  private disposed = false;

  constructor(
    private readonly flush: (keys: Set<K>) => void,
    private readonly intervalMs = 250,
    private readonly settleMs = 16,
    private readonly timers: Timers = realTimers,
  ) {}

  add(key: K): void {
    if (this.disposed) return;
    this.pending.add(key);
    if (this.timer !== undefined) return;
    const wait = Math.max(this.settleMs, this.lastFlush + this.intervalMs - this.timers.now());
    this.timer = this.timers.setTimeout(() => this.run(), wait);
  }

  /** Flushes now (e.g. a test or a user-triggered refresh). */
  flushNow(): void {
    if (this.timer !== undefined) this.timers.clearTimeout(this.timer);
    this.run();
  }

  get pendingCount(): number {
    return this.pending.size;
  }

  private run(): void {
    this.timer = undefined;
    if (!this.pending.size) return;
    const keys = this.pending;
    this.pending = new Set();
    this.lastFlush = this.timers.now();
    this.flush(keys);
  }

  dispose(): void {
    this.disposed = true;
    if (this.timer !== undefined) this.timers.clearTimeout(this.timer);
    this.timer = undefined;
    this.pending.clear();
  }
}
