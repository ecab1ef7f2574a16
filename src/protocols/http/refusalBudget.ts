// How many large requests a principal may have refused before its next large one is refused unread. A refused
// request still cost the server its body: receiving it, JSON.parse and the checks of a 4 MB body hold the event
// loop for tens of milliseconds, which every other principal waits out (measured: bench/hostile.ts). So each
// principal has a small budget of such refusals (a token bucket: BURST, one back every REFILL_MS); with it spent,
// a request whose declared body is LARGE_BODY_BYTES or more is answered 429 with Retry-After before a byte of its
// body is read, and its connection closed. Small requests (polls, cancels, small creates) are never held back.

/** A body this large is "large": one that costs a measurable share of the event loop to receive and parse. */
export const LARGE_BODY_BYTES = 256 * 1024;
export const REFUSAL_BURST = 4;
export const REFUSAL_REFILL_MS = 2_000;

export class RefusalBudget {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();

  constructor(
    private readonly now: () => number = Date.now,
    private readonly burst = REFUSAL_BURST,
    private readonly refillMs = REFUSAL_REFILL_MS,
  ) {}

  /** Ms until `principal` may send a large request again; 0 when it may now. */
  waitMs(principal: string): number {
    const b = this.refill(principal);
    if (!b || b.tokens >= 1) return 0;
    return Math.ceil((1 - b.tokens) * this.refillMs);
  }

  /** A large request of `principal` was refused. */
  charge(principal: string): void {
    const b = this.refill(principal) ?? { tokens: this.burst, at: this.now() };
    b.tokens = Math.max(0, b.tokens - 1);
    this.buckets.set(principal, b);
  }

  private refill(principal: string): { tokens: number; at: number } | undefined {
    const b = this.buckets.get(principal);
    if (!b) return undefined;
    const t = this.now();
    b.tokens = Math.min(this.burst, b.tokens + (t - b.at) / this.refillMs);
    b.at = t;
    // A full bucket is the same as none: forget it, so the map holds only principals refused lately.
    if (b.tokens >= this.burst) {
      this.buckets.delete(principal);
      return undefined;
    }
    return b;
  }
}
