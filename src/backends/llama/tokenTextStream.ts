// Turns a stream of tokens into text pieces that never split a UTF-8 character.
//
// A token may carry only part of a character (byte tokens such as <0xE6>). Decoding such a prefix ends in U+FFFD;
// only that last U+FFFD can still change when more bytes arrive, everything before it is final. So the tokens
// since the last point where the decoded text ended in a complete character (a "clean" boundary, where the UTF-8
// decoder is back in its initial state) are decoded together, and the text is released up to a trailing U+FFFD.

export type Detokenize = (tokens: number[], lastTokens: number[]) => string;

export interface TextPiece {
  text: string;
  /** Tokens this piece covers (tokens held back earlier are counted in the piece that releases them). */
  tokens: number;
}

const REPLACEMENT = '\uFFFD';
/** Tokens kept before the window so the detokenizer can decide about leading spaces. */
const CONTEXT_TOKENS = 8;
/** A genuine run of invalid bytes could otherwise grow the window forever. */
const MAX_WINDOW = 32;

export class TokenTextStream {
  private window: number[] = [];
  private emittedInWindow = 0;
  private uncounted = 0;
  private context: number[];

  constructor(
    private readonly detokenize: Detokenize,
    precedingTokens: readonly number[] = [],
  ) {
    this.context = precedingTokens.slice(-CONTEXT_TOKENS);
  }

  /** True when no token is held back: everything pushed so far has been released. */
  get clean(): boolean {
    return this.window.length === 0 && this.uncounted === 0;
  }

  /** Adds one token; returns the piece it releases, or undefined while a character is incomplete. */
  push(token: number): TextPiece | undefined {
    this.window.push(token);
    this.uncounted++;
    const text = this.detokenize(this.window, this.context);
    const complete = !text.endsWith(REPLACEMENT) || this.window.length >= MAX_WINDOW;
    const stable = complete ? text : text.slice(0, -1);
    const piece = stable.slice(this.emittedInWindow);
    if (complete) {
      this.context = [...this.context, ...this.window].slice(-CONTEXT_TOKENS);
      this.window = [];
      this.emittedInWindow = 0;
      return this.release(piece);
    }
    this.emittedInWindow = stable.length;
    return piece ? this.release(piece) : undefined;
  }

  /** Releases whatever is held back (the generation ended, possibly mid-character). */
  flush(): TextPiece | undefined {
    if (this.clean) return undefined;
    const text = this.window.length ? this.detokenize(this.window, this.context).slice(this.emittedInWindow) : '';
    this.context = [...this.context, ...this.window].slice(-CONTEXT_TOKENS);
    this.window = [];
    this.emittedInWindow = 0;
    return this.release(text);
  }

  private release(text: string): TextPiece {
    const piece = { text, tokens: this.uncounted };
    this.uncounted = 0;
    return piece;
  }
}
