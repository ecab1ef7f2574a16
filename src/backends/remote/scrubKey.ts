// An engine's API key must never reach a task error, an event or a log, in any spelling an engine might echo it
// in: as is, URL-encoded, JSON-escaped, in hex (either case), in base64 (standard or URL-safe, also as the `:key` of
// a Basic header), and cut short (a prefix or any other stretch of at least MIN_RUN characters of one of those
// forms). Every run of the text covered by a MIN_RUN-character piece of some form is replaced, whole, by `[key]`.
// Generated text is scrubbed as it streams (KeyTextScrubber): each piece is read with the end of the pieces before
// it, so a key split across pieces is caught; what a piece already sent cannot be taken back, so at most
// MIN_RUN − 1 characters of a key split that way go out (below the length that counts as the key, see MIN_RUN).

/** Shortest stretch of a key form that counts as the key (random keys share no 8-character run with text by chance). */
export const MIN_RUN = 8;

function forms(key: string): string[] {
  const b64 = (s: string) => Buffer.from(s, 'utf8').toString('base64');
  const b64url = (s: string) => Buffer.from(s, 'utf8').toString('base64url');
  const hex = Buffer.from(key, 'utf8').toString('hex');
  const all = [
    key,
    encodeURIComponent(key),
    JSON.stringify(key).slice(1, -1),
    hex,
    hex.toUpperCase(),
    b64(key),
    b64url(key),
    b64(`:${key}`),
    b64url(`:${key}`),
  ];
  // Base64 of a form also drops its '=' padding in many echoes; the runs below cover that anyway.
  return [...new Set(all)].filter((f) => f.length > 0);
}

/** The MIN_RUN-character pieces of every form of `key`, and that run length (shorter for a shorter key). */
function keyGrams(key: string): { grams: Set<string>; run: number } {
  const run = Math.min(MIN_RUN, key.length);
  const grams = new Set<string>();
  for (const f of forms(key)) for (let i = 0; i + run <= f.length; i++) grams.add(f.slice(i, i + run));
  return { grams, run };
}

/** `text` from `from` on, with each run covered by a gram replaced by `[key]`; `replaced` tells whether any was. */
function replaceCovered(text: string, from: number, grams: Set<string>, run: number): { text: string; replaced: boolean } {
  const covered = new Uint8Array(text.length);
  let any = false;
  for (let i = 0; i + run <= text.length; i++) {
    if (i + run <= from || !grams.has(text.slice(i, i + run))) continue;
    covered.fill(1, i, i + run);
    any = true;
  }
  if (!any) return { text: text.slice(from), replaced: false };
  let out = '';
  for (let i = from; i < text.length;) {
    if (!covered[i]) {
      out += text[i++];
      continue;
    }
    while (i < text.length && covered[i]) i++;
    out += '[key]';
  }
  return { text: out, replaced: true };
}

/** `text` with every spelling of `key` (see the header) replaced by `[key]`. */
export function scrubKey(text: string, key: string | undefined): string {
  if (!key) return text;
  const { grams, run } = keyGrams(key);
  return replaceCovered(text, 0, grams, run).text;
}

/** Scrubs streamed text piece by piece, per stream (a channel of the output), each piece read after its stream's tail. */
export class KeyTextScrubber {
  private readonly grams: Set<string>;
  private readonly run: number;
  private readonly tails = new Map<string, string>();

  constructor(key: string) {
    ({ grams: this.grams, run: this.run } = keyGrams(key));
  }

  /** The piece as it may be sent; `replaced` when a spelling of the key was taken out. */
  scrub(piece: string, stream = ''): { text: string; replaced: boolean } {
    const tail = this.tails.get(stream) ?? '';
    const whole = tail + piece;
    this.tails.set(stream, this.run > 1 ? whole.slice(-(this.run - 1)) : '');
    return replaceCovered(whole, tail.length, this.grams, this.run);
  }
}
