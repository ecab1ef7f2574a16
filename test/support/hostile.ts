// What the attacks of issue #23 send, in one place: the protocol and unit tests that pin each defence and the
// reliability security suite (test/reliability/security.test.ts), which replays them against a real `serve`,
// build them from here, so a defence is checked with the same bytes in both.
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { testModelPath } from '../fixtures/testModel';

/** A plain TCP socket to the server that sends `send` (may be a request cut short) and reads whatever comes back. */
export function rawSocket(port: number, send: string): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1', () => {
      if (send) s.write(send);
      resolve(s);
    });
    s.on('error', () => undefined);
    s.once('error', reject);
    // Read what the server says (and so see its end): a paused socket never reaches 'close'.
    s.resume();
  });
}

export const socketClosed = (s: net.Socket): Promise<void> =>
  new Promise<void>((resolve) => (s.destroyed ? resolve() : s.once('close', () => resolve())));

/** Request heads that never finish: nothing at all, a request line and a header, and a header cut mid-value. */
export const UNFINISHED_HEADS = [
  '',
  'GET /lmsp/v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n',
  'GET /lmsp/v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ',
];

/**
 * A task-create body whose metadata is nested `levels` deep. 5 000 levels: the idempotency fingerprint, computed
 * before validation, overflowed the stack at ~3 100 (a 500) until it refused bodies deeper than 256.
 */
export function deepBody(levels = 5000, model = 'm'): string {
  return '{"type":"response","input":{"model":"' + model + '","input":"x","metadata":' + nested(levels) + '}}';
}

/** The same nesting as a bare /responses or /chat/completions body. */
export function deepRequest(levels = 5000, model = 'm'): string {
  return '{"model":"' + model + '","input":"x","messages":[{"role":"user","content":"x"}],"metadata":' + nested(levels) + '}';
}

/** `{"a":{"a":…1…}}`, `levels` objects deep. */
function nested(levels: number): string {
  return '{"a":'.repeat(levels) + '1' + '}'.repeat(levels);
}

/** Every spelling of an engine key an engine might echo: as is, URL-encoded, JSON-escaped, base64 (both alphabets, Basic auth, unpadded) and cut short. */
export function keySpellings(key: string): string[] {
  const b64 = Buffer.from(key).toString('base64');
  return [
    key,
    encodeURIComponent(key),
    JSON.stringify(key).slice(1, -1),
    b64,
    Buffer.from(key).toString('base64url'),
    Buffer.from(`:${key}`).toString('base64'),
    b64.replace(/=+$/, ''),
    key.slice(0, 12),
    key.slice(5, 20),
    b64.slice(0, 16),
  ];
}

/** The folder a model file is copied under: a user name and spaces, what a path leak would show. */
export const SECRET_DIR = ['home', 'alice smith', 'My Models'];
export const SECRET_MODEL_ID = 'secret-project';

export interface SecretModel {
  /** Temp folder holding SECRET_DIR. */
  root: string;
  /** The .gguf file (its id is SECRET_MODEL_ID). */
  file: string;
  remove(): void;
}

/** A copy of the tiny test model at <tmp>/home/alice smith/My Models/secret-project.gguf. */
export function secretModel(): SecretModel {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'lmsp-secret-'));
  const dir = path.join(root, ...SECRET_DIR);
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `${SECRET_MODEL_ID}.gguf`);
  fs.copyFileSync(testModelPath(), file);
  return { root, file, remove: () => fs.rmSync(root, { recursive: true, force: true }) };
}

/** The pieces of `secret` (and `extra`, e.g. an engine's host:port) that `text` shows, in plain, URL- and JSON-escaped form. */
export function leakedPieces(text: string, secret: SecretModel, extra: string[] = []): string[] {
  const needles = ['alice smith', 'My Models', secret.root, 'alice%20smith', 'alice\\u0020smith', ...extra];
  return needles.filter((n) => text.includes(n));
}
