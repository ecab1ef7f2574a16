// Batches streamed text into durable delta events, so that a fast model does not turn into one durable write per
// token (the measured rates are in docs/store.md).
//
// The first piece is written at once (time to first text). After a write, pieces wait until `window` has passed
// since it; the window starts at `minWindowMs` (the runtime's `deltaFlushMs`, 16 ms) and follows the cost of a
// write: about 20× the recent write time, at most `maxWindowMs` (100 ms), so that on a slow disk writes stay a
// small share of generation time. (The runtime defers a run's writes after its first — their syncs run on libuv's
// pool, generation.ts — so the time measured there is the write's own work on the loop, not the disk's.) A snapshot is written together with the text it covers (flush(snapshot)).
// What is batched are output steps (outputItems.ts): consecutive deltas of the answer text, or of one item, join
// into one; an item opened or closed is kept in its place among them.
import type { GenerationSnapshot } from './backend';
import type { OutputStep } from './outputItems';

export const MAX_DELTA_WINDOW_MS = 100;

export interface DeltaBatcherOptions {
  /** The shortest window between two writes, ms. */
  minWindowMs: number;
  /** The longest, however slow writes are (default MAX_DELTA_WINDOW_MS). */
  maxWindowMs?: number;
  /** Monotonic ms clock for windows and write times (the runtime passes performance.now). */
  now: () => number;
  /** Persists `steps` (may be empty when only a snapshot is due) and the snapshot, in one durable write. */
  write(steps: OutputStep[], snapshot?: GenerationSnapshot): void;
  /** A write threw: told once; the batcher writes nothing after that. */
  onError(err: Error): void;
}

export class DeltaBatcher {
  private pending: OutputStep[] = [];
  private lastWrite = Number.NEGATIVE_INFINITY;
  private writeMs = 0;
  private windowMs: number;
  private timer: NodeJS.Timeout | undefined;
  private failed = false;

  constructor(private readonly o: DeltaBatcherOptions) {
    this.windowMs = o.minWindowMs;
  }

  /** Adds output steps: written now when the window since the last write has passed, else when it has. */
  add(steps: readonly OutputStep[]): void {
    if (this.failed || steps.length === 0) return;
    for (const step of steps) this.merge(step);
    if (this.o.now() - this.lastWrite >= this.windowMs) this.flush();
    else this.timer ??= setTimeout(() => this.flush(), this.windowMs);
  }

  /** Writes what is pending now, with `snapshot` when given (even without text). Nothing pending: no write. */
  flush(snapshot?: GenerationSnapshot): void {
    this.clearTimer();
    if (this.failed || (this.pending.length === 0 && !snapshot)) return;
    const steps = this.pending;
    this.pending = [];
    const started = this.o.now();
    this.lastWrite = started;
    try {
      this.o.write(steps, snapshot);
    } catch (e) {
      this.failed = true;
      this.o.onError(e instanceof Error ? e : new Error(String(e)));
      return;
    }
    this.writeMs = this.writeMs * 0.8 + (this.o.now() - started) * 0.2;
    this.windowMs = Math.min(this.o.maxWindowMs ?? MAX_DELTA_WINDOW_MS, Math.max(this.o.minWindowMs, this.writeMs * 20));
  }

  private merge(step: OutputStep): void {
    const last = this.pending[this.pending.length - 1];
    if (last?.kind === 'text' && step.kind === 'text') {
      const logprobs = last.logprobs || step.logprobs ? [...(last.logprobs ?? []), ...(step.logprobs ?? [])] : undefined;
      this.pending[this.pending.length - 1] = { kind: 'text', delta: last.delta + step.delta, ...(logprobs ? { logprobs } : {}) };
    } else if (last?.kind === 'delta' && step.kind === 'delta' && last.index === step.index) {
      this.pending[this.pending.length - 1] = { ...step, delta: last.delta + step.delta };
    } else {
      this.pending.push(step);
    }
  }

  /** Stops the timer. Steps still pending are dropped: flush() first. */
  close(): void {
    this.clearTimer();
  }

  private clearTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }
}
