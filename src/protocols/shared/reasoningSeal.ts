// Reasoning a client carries between turns without the server keeping it: Anthropic's thinking `signature` and the
// Responses API's `encrypted_content` (store: false, Codex CLI) are opaque blobs the client sends back unchanged.
// Peers emit an empty string or a random id there, so the model loses its earlier reasoning on the next turn; here the
// blob is the reasoning itself, sealed with AES-256-GCM under a key of this data directory (docs/anthropic.md, docs/codex.md),
// so a blob we made gives the text back and anything else (altered, foreign, another data directory's) reads as
// nothing: the caller drops it, never refuses the request.
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';

const VERSION = 'trs1.';
const IV_BYTES = 12;
const TAG_BYTES = 16;
export const REASONING_KEY_BYTES = 32;
/** File of the key in a data directory (mode 0600, made on first use). */
export const REASONING_KEY_FILE = 'reasoning.key';

/** What a sealed blob holds: the model that wrote the reasoning and its text. */
export interface SealedReasoning {
  model: string;
  text: string;
}

export class ReasoningSeal {
  private readonly key: Buffer;

  /** `key`: 32 bytes; absent: a key of this process only (blobs of an earlier process then read as nothing). */
  constructor(key?: Buffer) {
    if (key && key.length !== REASONING_KEY_BYTES) throw new Error(`A reasoning key has ${REASONING_KEY_BYTES} bytes.`);
    this.key = key ?? randomBytes(REASONING_KEY_BYTES);
  }

  seal(r: SealedReasoning): string {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    const body = Buffer.concat([cipher.update(JSON.stringify({ m: r.model, t: r.text }), 'utf8'), cipher.final()]);
    return VERSION + Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64url');
  }

  /** The reasoning a blob of ours holds; undefined for anything else (never throws). */
  unseal(blob: unknown): SealedReasoning | undefined {
    if (typeof blob !== 'string' || !blob.startsWith(VERSION)) return undefined;
    try {
      const raw = Buffer.from(blob.slice(VERSION.length), 'base64url');
      if (raw.length < IV_BYTES + TAG_BYTES) return undefined;
      const decipher = createDecipheriv('aes-256-gcm', this.key, raw.subarray(0, IV_BYTES));
      decipher.setAuthTag(raw.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
      const plain = Buffer.concat([decipher.update(raw.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]).toString('utf8');
      const o = JSON.parse(plain) as { m?: unknown; t?: unknown };
      return typeof o.m === 'string' && typeof o.t === 'string' ? { model: o.m, text: o.t } : undefined;
    } catch {
      return undefined;
    }
  }
}

/**
 * The key of a data directory: read from `reasoning.key`, or made and written there (0600) on first use, so that
 * sealed reasoning stays readable across restarts. A key file of the wrong size is replaced.
 */
export function loadOrCreateReasoningKey(dataDir: string): Buffer {
  const file = path.join(dataDir, REASONING_KEY_FILE);
  try {
    const key = fs.readFileSync(file);
    if (key.length === REASONING_KEY_BYTES) return key;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
  }
  const key = randomBytes(REASONING_KEY_BYTES);
  const tmp = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, key, { mode: 0o600 });
  fs.renameSync(tmp, file);
  return key;
}
