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
