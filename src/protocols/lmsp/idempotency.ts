// Idempotency-Key handling shared by the two creating routes (profile §9.2): the runtime stores the key with the
// task in one transaction; the door supplies scope and the fingerprint of the canonical body.
import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { HEADERS } from './lmspConstants';
import { canonicalJson, parseIdempotencyKey } from './schemas';

export function idempotencyOf(req: IncomingMessage, scope: string, body: unknown): { scope: string; key: string; fingerprint: string } | undefined {
  const key = parseIdempotencyKey(req.headers[HEADERS.idempotencyKey]);
  if (key === undefined) return undefined;
  const fingerprint = createHash('sha256').update(canonicalJson(body)).digest('hex');
  return { scope, key, fingerprint };
}
