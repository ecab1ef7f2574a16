// Batches streamed text into durable delta events, so that a fast model does not turn into one durable write per
// token (1,000–2,000 tokens/s on the tiny model against 0.1–0.4 ms per synced write here, ARCHITECTURE.md).
//
// The first piece is written at once (time to first text). After a write, pieces wait until `window` has passed
// since it; the window starts at `minWindowMs` (the runtime's `deltaFlushMs`, 16 ms) and follows the cost of a
// write: about 20× the recent write time, at most `maxWindowMs` (100 ms), so that on a slow disk writes stay a
// small share of generation time. A snapshot is written together with the text it covers (flush(snapshot)).
import type { GenerationSnapshot, TokenLogprob } from './backend';

export const MAX_DELTA_WINDOW_MS = 100;

export interface DeltaBatcherOptions {
  /** The shortest window between two writes, ms. */
  minWindowMs: number;
  /** The longest, however slow writes are (default MAX_DELTA_WINDOW_MS). */
  maxWindowMs?: number;
  /** Monotonic ms clock for windows and write times (the runtime passes performance.now). */
  now: () => number;
  /**
   * Persists `text` (may be empty when only a snapshot is due), the log-probabilities of its tokens (when the pieces
   * came with them) and the snapshot, in one durable write.
   */
  write(text: string, snapshot?: GenerationSnapshot, logprobs?: TokenLogprob[]): void;
  /** A write threw: told once; the batcher writes nothing after that. */
  onError(err: Error): void;
}

export class DeltaBatcher {
  private pending = '';
  private pendingLogprobs: TokenLogprob[] | undefined;
  private lastWrite = Number.NEGATIVE_INFINITY;
  private writeMs = 0;
  private windowMs: number;
  private timer: NodeJS.Timeout | undefined;
  private failed = false;

  constructor(private readonly o: DeltaBatcherOptions) {
    this.windowMs = o.minWindowMs;
  }

  /** Adds a piece of text (and its tokens' log-probabilities): written now when the window since the last write has passed, else when it has. */
  add(text: string, logprobs?: TokenLogprob[]): void {
    if (this.failed) return;
    this.pending += text;
    if (logprobs?.length) (this.pendingLogprobs ??= []).push(...logprobs);
    if (this.o.now() - this.lastWrite >= this.windowMs) this.flush();
    else this.timer ??= setTimeout(() => this.flush(), this.windowMs);
  }

  /** Writes what is pending now, with `snapshot` when given (even without text). Nothing pending: no write. */
  flush(snapshot?: GenerationSnapshot): void {
    this.clearTimer();
    if (this.failed || (!this.pending && !snapshot)) return;
    const text = this.pending;
    const logprobs = this.pendingLogprobs;
    this.pending = '';
    this.pendingLogprobs = undefined;
    const started = this.o.now();
    this.lastWrite = started;
    try {
      this.o.write(text, snapshot, logprobs);
    } catch (e) {
      this.failed = true;
      this.o.onError(e instanceof Error ? e : new Error(String(e)));
      return;
    }
    this.writeMs = this.writeMs * 0.8 + (this.o.now() - started) * 0.2;
    this.windowMs = Math.min(this.o.maxWindowMs ?? MAX_DELTA_WINDOW_MS, Math.max(this.o.minWindowMs, this.writeMs * 20));
  }

  /** Stops the timer. Text still pending is dropped: flush() first. */
  close(): void {
    this.clearTimer();
  }

  private clearTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }
}
