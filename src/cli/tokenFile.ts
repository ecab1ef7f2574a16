// The bearer-token file of the headless server: created with mode 0600 when missing. Each non-empty line that
// is not a # comment is either `TOKEN` or `PRINCIPAL TOKEN`; a bare token's principal is derived from its hash,
// so it stays the same across restarts without writing the token anywhere else.
import { createHash, randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { UsageError } from './args';

export function generateToken(): string {
  return randomBytes(32).toString('base64url');
}

export function principalOfToken(token: string): string {
  return 'tok_' + createHash('sha256').update(token).digest('hex').slice(0, 16);
}

/** Reads the token file, creating it with one fresh token when it does not exist. */
export function loadOrCreateTokens(file: string): Map<string, string> {
  if (!fs.existsSync(file)) {
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, generateToken() + '\n', { mode: 0o600, flag: 'wx' });
  }
  const stat = fs.statSync(file);
  if (!stat.isFile()) throw new UsageError(`Token file ${file} is not a regular file.`);
  // Like ssh with a private key: a token others can read is a token others may have used. Refused, not warned.
  if (process.platform !== 'win32' && (stat.mode & 0o077) !== 0) {
    throw new UsageError(`Token file ${file} is readable or writable by other users (mode ${(stat.mode & 0o777).toString(8)}); run chmod 600 on it.`);
  }
  return parseTokens(fs.readFileSync(file, 'utf8'), file);
}

export function parseTokens(text: string, file: string): Map<string, string> {
  const tokens = new Map<string, string>();
  /** The line that gave each token its principal (1-based), to name both lines of a conflict. */
  const lineOf = new Map<string, number>();
  for (const [index, raw] of text.split(/\r?\n/).entries()) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const parts = line.split(/\s+/);
    if (parts.length > 2) throw new UsageError(`Token file ${file}: a line must be "TOKEN" or "PRINCIPAL TOKEN".`);
    const [principal, token] = parts.length === 2 ? parts : [principalOfToken(parts[0]), parts[0]];
    if (!/^[A-Za-z0-9\-._~+/]{16,}=*$/.test(token)) {
      throw new UsageError(`Token file ${file}: tokens must be at least 16 characters of A-Z a-z 0-9 - . _ ~ + /.`);
    }
    const earlier = tokens.get(token);
    if (earlier !== undefined && earlier !== principal) {
      // One token, two principals: whoever holds it would be either. Named by line, never by the token.
      throw new UsageError(
        `Token file ${file}: lines ${lineOf.get(token)} and ${index + 1} give the same token to two principals ("${earlier}" and "${principal}").`,
      );
    }
    tokens.set(token, principal);
    lineOf.set(token, index + 1);
  }
  if (tokens.size === 0) throw new UsageError(`Token file ${file} holds no token.`);
  return tokens;
}
