// Which era a POST to /mcp belongs to (docs/mcp.md; the TS SDK v2 classifier's rules, body first):
// a single JSON-RPC message whose params._meta names a protocol version is 2026-07-28 ("modern"), whatever its
// headers say (a version the envelope names that we do not serve is answered -32022 there, not sent to the legacy
// path) — except `initialize`, which is modern (→ 404/-32601, it does not exist there) only when its envelope names
// a modern version; batches, JSON-RPC responses, bodies without the envelope, and everything on GET/DELETE are
// 2025-11-25 ("legacy") and take the unchanged SDK path. One exception keeps modern clients from the legacy
// "initialize first" answer: no session, no envelope, but an MCP-Protocol-Version header naming a modern version
// → -32602 (missing _meta), as the SDK v2 classifier does.
import type { IncomingMessage } from 'node:http';
import { hasEnvelope, header, META_PROTOCOL_VERSION, MODERN_VERSIONS } from './wire';

export type Era = 'legacy' | 'modern' | 'modern-header-only';

export function classify(req: IncomingMessage, body: unknown, hasSession: boolean): Era {
  if (!body || typeof body !== 'object' || Array.isArray(body)) return 'legacy';
  const m = body as { method?: unknown };
  if (typeof m.method !== 'string') return 'legacy';
  if (hasEnvelope(body)) return m.method !== 'initialize' || MODERN_VERSIONS.includes(envelopeVersion(body)) ? 'modern' : 'legacy';
  if (m.method === 'initialize') return 'legacy';
  const version = header(req, 'mcp-protocol-version');
  if (!hasSession && version !== undefined && MODERN_VERSIONS.includes(version)) return 'modern-header-only';
  return 'legacy';
}

function envelopeVersion(body: unknown): string {
  const v = (body as { params: { _meta: Record<string, unknown> } }).params._meta[META_PROTOCOL_VERSION];
  return typeof v === 'string' ? v : '';
}
