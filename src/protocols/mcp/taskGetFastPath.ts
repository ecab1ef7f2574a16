// tasks/get on a 2025-11-25 session, answered before the SDK transport (every poller's hot path).
//
// Through the SDK a poll costs a Web Request/Response conversion (Hono), zod parses of the message, a ReadableStream for
// the SSE answer and the Protocol's bookkeeping; here it is a few property checks, a Map lookup for a finished task
// (TaskStore's cache) and its view's JSON text kept per record. What goes on the wire must not change:
//  - `acceptsFastTaskGet` lets through only requests the SDK transport would accept and hand to our tasks/get
//    handler unchanged (its Accept, Content-Type and protocol-version checks, its strict JSON-RPC request schema, no
//    `_meta` or `task` in params, no batch); everything else falls through to the SDK path, so every refusal and
//    every odd case is the SDK's own answer;
//  - the JSON-RPC message is byte for byte the one the SDK path sends: `{"result":…,"jsonrpc":"2.0","id":…}` (the
//    SDK Protocol's key order) with the same handler result, and errors as the Protocol builds them;
//  - framing: plain `application/json` with `mcp-session-id`, which is what the SDK transport itself sends in its
//    JSON-response mode; our sessions' transports use SSE mode, where the same message travels as one `event: message`.
//    The spec says servers SHOULD NOT upgrade tasks/get to SSE, and VS Code's client takes either.
//    Written by httpBody.ts's sendJsonText like every JSON answer of the door (no measurable cost: docs/mcp.md).
// test/protocol/mcp/taskGetFastPath.test.ts compares both paths byte for byte on the same sessions.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { isJsonContentType } from '@modelcontextprotocol/sdk/shared/mediaType.js';
import { SUPPORTED_PROTOCOL_VERSIONS } from '@modelcontextprotocol/sdk/types.js';
import type { McpContext } from './context';
import { toMcpError } from './errors';
import { sendJsonText } from './httpBody';
import { getTaskJson } from './taskMethods';

/**
 * The request id when `msg` is a single tasks/get that the SDK transport would accept and pass to our handler as it
 * is; undefined otherwise (the caller then takes the SDK path).
 */
export function acceptsFastTaskGet(req: IncomingMessage, msg: unknown): string | number | undefined {
  if (!msg || typeof msg !== 'object' || Array.isArray(msg)) return undefined;
  const m = msg as Record<string, unknown>;
  if (m.method !== 'tasks/get' || m.jsonrpc !== '2.0') return undefined;
  const id = m.id;
  if (typeof id !== 'string' && !(typeof id === 'number' && Number.isSafeInteger(id))) return undefined;
  // The SDK's JSONRPCRequestSchema is strict: no other keys.
  for (const k in m) if (k !== 'jsonrpc' && k !== 'id' && k !== 'method' && k !== 'params') return undefined;
  const params = m.params;
  if (params !== undefined) {
    if (!params || typeof params !== 'object' || Array.isArray(params)) return undefined;
    // `_meta` is parsed (and may be refused) by the SDK, `task` is checked against the capabilities first.
    if ('_meta' in params || 'task' in params) return undefined;
  }
  // The transport's header checks, in its order (406, 415, then the protocol version after the session).
  const accept = req.headers.accept;
  if (typeof accept !== 'string' || !accept.includes('application/json') || !accept.includes('text/event-stream')) return undefined;
  if (!isJsonContentType(req.headers['content-type'])) return undefined;
  const version = req.headers['mcp-protocol-version'];
  if (version !== undefined && (typeof version !== 'string' || !SUPPORTED_PROTOCOL_VERSIONS.includes(version))) return undefined;
  return id;
}

/** Writes the answer the SDK path would write for this tasks/get, as JSON. */
export function answerFastTaskGet(
  ctx: McpContext,
  res: ServerResponse,
  id: string | number,
  params: unknown,
  principal: string,
  sessionId: string,
): void {
  let body: string;
  try {
    body = `{"result":${getTaskJson(ctx, { principal }, params)},"jsonrpc":"2.0","id":${JSON.stringify(id)}}`;
  } catch (e) {
    // As the SDK Protocol answers a handler's error (shared/protocol.js, _onrequest).
    const err = toMcpError(e) as Error & { code?: unknown; data?: unknown };
    body = JSON.stringify({
      jsonrpc: '2.0',
      id,
      error: {
        code: Number.isSafeInteger(err.code) ? err.code : -32603,
        message: err.message ?? 'Internal error',
        ...(err.data !== undefined && { data: err.data }),
      },
    });
  }
  sendJsonText(res, 200, body, { 'mcp-session-id': sessionId });
}
