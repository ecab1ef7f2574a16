// Ends an output at a stop string without delivering it. Pieces (text, the tokens it covers, their log-probabilities)
// pass through in order; text that might be the start of a stop string is held back until the next pieces decide.
// Invariants: no delivered text contains a stop string or ends in a prefix of one that later completed; pieces are
// released whole, so a piece's tokens and log-probabilities stay with its text; nothing is lost — `flush` releases
// what is held when the output ends for another reason. On a stop the last piece carries the text before the stop and
// every token still held (the stop string's tokens were generated and count as output), with the log-probabilities of
// the held pieces that reach into that text. After a resume, the end of the text delivered before is kept as context:
// a stop string that began there and completes now still ends the output (what was delivered stays delivered).
// `matched` names the stop string that ended the output (the earliest one in the text; of two that begin at the same
// place, the first given), so that the end can be reported as that string's (Anthropic's stop_sequence).

import type { TokenLogprob } from '../../runtime/backend';

export interface Piece {
  text: string;
  tokens: number;
  logprobs?: TokenLogprob[];
}

export class StopText {
  private held: Piece[] = [];
  private heldText = '';
  private readonly stops: string[];
  private stopped = false;
  /** The stop string that ended the output, once one did. */
  private matchedStop: string | undefined;
  /** The end of what was delivered before this generation (resume), where a stop string may have begun. */
  private carry: string;
  /** How much of the delivered text can hold the start of a stop string: the longest one less one character. */
  private readonly keep: number;

  constructor(stops: readonly string[], deliveredBefore = '') {
    this.stops = stops.filter((s) => s.length > 0);
    this.keep = Math.max(0, ...this.stops.map((s) => s.length - 1));
    this.carry = this.tail(deliveredBefore);
  }

  /** The stop string that ended the output; undefined while none has (or the output ended otherwise). */
  get matched(): string | undefined {
    return this.matchedStop;
  }

  /** True when nothing is held back. */
  get empty(): boolean {
    return this.held.length === 0;
  }

  /** Adds a piece; returns what can be delivered now and whether a stop string ended the output. */
  push(piece: Piece): { pieces: Piece[]; stopped: boolean } {
    if (this.stopped) return { pieces: [], stopped: true };
    if (this.stops.length === 0) return { pieces: [piece], stopped: false };
    this.held.push(piece);
    this.heldText += piece.text;
    const seen = this.carry + this.heldText;
    let at = -1;
    let which: string | undefined;
    for (const s of this.stops) {
      // Only occurrences that end in the held text: the carried part was delivered without completing one.
      const i = seen.indexOf(s, Math.max(0, this.carry.length - s.length + 1));
      if (i >= 0 && (at < 0 || i < at)) {
        at = i;
        which = s;
      }
    }
    if (at >= 0) {
      this.stopped = true;
      this.matchedStop = which;
      return { pieces: this.releaseUpTo(Math.max(0, at - this.carry.length), true), stopped: true };
    }
    const released = this.releaseUpTo(this.heldText.length - Math.min(this.heldText.length, this.pendingPrefix(seen)), false);
    this.carry = this.tail(this.carry + released.map((p) => p.text).join(''));
    return { pieces: released, stopped: false };
  }

  /** Releases everything held (the output ended without a stop string). */
  flush(): Piece[] {
    const out = this.held;
    this.held = [];
    this.heldText = '';
    return out;
  }

  private tail(text: string): string {
    return this.keep > 0 ? text.slice(-this.keep) : '';
  }

  /** Length of the longest end of `text` that is the start of a stop string. */
  private pendingPrefix(text: string): number {
    let best = 0;
    for (const s of this.stops) {
      for (let n = Math.min(s.length - 1, text.length); n > best; n--) {
        if (text.endsWith(s.slice(0, n))) {
          best = n;
          break;
        }
      }
    }
    return best;
  }

  /** Whole pieces that end at or before `safe`; on a stop, one more piece with the rest of the text before it. */
  private releaseUpTo(safe: number, stop: boolean): Piece[] {
    const out: Piece[] = [];
    let pos = 0;
    while (this.held.length && pos + this.held[0]!.text.length <= safe) {
      const p = this.held.shift()!;
      pos += p.text.length;
      out.push(p);
    }
    if (stop) {
      const rest = this.held;
      const text = this.heldText.slice(pos, safe);
      const logprobs: TokenLogprob[] = [];
      let start = pos;
      for (const p of rest) {
        if (start < safe && p.logprobs) logprobs.push(...p.logprobs);
        start += p.text.length;
      }
      const tokens = rest.reduce((n, p) => n + p.tokens, 0);
      if (tokens > 0 || text) out.push({ text, tokens, ...(rest.some((p) => p.logprobs) ? { logprobs } : {}) });
      this.held = [];
      this.heldText = '';
      return out;
    }
    this.heldText = this.heldText.slice(pos);
    return out;
  }
}
