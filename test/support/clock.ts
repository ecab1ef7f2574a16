// A clock tests move by hand, for the runtime's `now` option: ttl, retention and idempotency windows are reached
// by advancing it, not by sleeping past them.
export class ManualClock {
  constructor(private ms = Date.now()) {}
  /** Pass as RuntimeOptions.now. */
  readonly now = (): number => this.ms;
  advance(ms: number): void {
    this.ms += ms;
  }
}

/**
 * Timers on a ManualClock: a wait set through `timer` runs when `advance` moves the clock to or past its time (the
 * webhook worker's `timer` option). Nothing runs on real time.
 */
export class ManualTimers {
  private readonly waits = new Set<{ at: number; run: () => void }>();
  constructor(readonly clock: ManualClock) {}
  readonly timer = (run: () => void, ms: number): { cancel(): void } => {
    const w = { at: this.clock.now() + ms, run };
    this.waits.add(w);
    return { cancel: () => void this.waits.delete(w) };
  };
  /** Moves the clock and runs every wait that is due, oldest first. */
  advance(ms: number): void {
    this.clock.advance(ms);
    const due = [...this.waits].filter((w) => w.at <= this.clock.now()).sort((a, b) => a.at - b.at);
    for (const w of due) {
      this.waits.delete(w);
      w.run();
    }
  }
  /** Time of the earliest wait, or undefined. */
  get next(): number | undefined {
    let at: number | undefined;
    for (const w of this.waits) at = at === undefined ? w.at : Math.min(at, w.at);
    return at;
  }
}
