// An engine's API key must never reach a task error, an event or a log, in any spelling an engine might echo it
// in: as is, URL-encoded, JSON-escaped, in hex (either case), in base64 (standard or URL-safe, also as the `:key` of
// a Basic header), and cut short (a prefix or any other stretch of at least MIN_RUN characters of one of those
// forms). Every run of the text covered by a MIN_RUN-character piece of some form is replaced, whole, by `[key]`.

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

/** `text` with every spelling of `key` (see the header) replaced by `[key]`. */
export function scrubKey(text: string, key: string | undefined): string {
  if (!key) return text;
  const run = Math.min(MIN_RUN, key.length);
  const grams = new Set<string>();
  for (const f of forms(key)) for (let i = 0; i + run <= f.length; i++) grams.add(f.slice(i, i + run));
  const covered = new Uint8Array(text.length);
  let any = false;
  for (let i = 0; i + run <= text.length; i++) {
    if (!grams.has(text.slice(i, i + run))) continue;
    covered.fill(1, i, i + run);
    any = true;
  }
  if (!any) return text;
  let out = '';
  for (let i = 0; i < text.length;) {
    if (!covered[i]) {
      out += text[i++];
      continue;
    }
    while (i < text.length && covered[i]) i++;
    out += '[key]';
  }
  return out;
}
