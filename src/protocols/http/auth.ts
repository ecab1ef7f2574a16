// Token authentication with a constant-time comparison against every known token. The token comes as
// `Authorization: Bearer T` (every client) or `x-api-key: T` (the Anthropic SDK's `apiKey`; docs/anthropic.md).
import * as crypto from 'node:crypto';
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';

export const WWW_AUTHENTICATE = 'Bearer realm="lmsp"';

export class TokenTable {
  // Compared as SHA-256 digests so every comparison has the same length and cost.
  private entries: Array<{ digest: Buffer; principal: string }> = [];

  constructor(tokens: Map<string, string>) {
    this.set(tokens);
  }

  set(tokens: Map<string, string>): void {
    this.entries = [...tokens].map(([token, principal]) => ({ digest: digest(token), principal }));
  }

  /** The principal of a token, or undefined; looks at every entry whatever matches. */
  lookup(token: string): string | undefined {
    const d = digest(token);
    let found: string | undefined;
    for (const e of this.entries) {
      if (timingSafeEqual(d, e.digest) && found === undefined) found = e.principal;
    }
    return found;
  }
}

// One-shot crypto.hash (Node ≥ 20.12) costs about half of createHash().update().digest(), on every request.
const oneShot = (crypto as { hash?: (algorithm: string, data: string, encoding: 'buffer') => Buffer }).hash;

function digest(s: string): Buffer {
  return oneShot ? oneShot('sha256', s, 'buffer') : createHash('sha256').update(s, 'utf8').digest();
}

export type AuthResult = { ok: true; principal: string } | { ok: false; presented: boolean };

export function authenticate(req: IncomingMessage, table: TokenTable): AuthResult {
  const header = req.headers.authorization;
  const apiKey = req.headers['x-api-key'];
  if (typeof header !== 'string' && typeof apiKey !== 'string') return { ok: false, presented: false };
  const m = typeof header === 'string' ? /^Bearer[ ]+([A-Za-z0-9\-._~+/]+=*)[ ]*$/i.exec(header) : null;
  // Both looked up whatever the first gives, so the time taken does not tell which one matched.
  const fromBearer = m ? table.lookup(m[1]) : undefined;
  const fromKey = typeof apiKey === 'string' && apiKey !== '' ? table.lookup(apiKey.trim()) : undefined;
  const principal = fromBearer ?? fromKey;
  return principal === undefined ? { ok: false, presented: true } : { ok: true, principal };
}
