// The MCP 2026-07-28 ("modern") wire as this server speaks it: the per-request `_meta` envelope, the SEP-2243
// routing headers, the renumbered error codes and their HTTP statuses, and the `resultType` / `serverInfo` result
// decoration. Validation order follows the conformance suite's own reference server (0.2.0-alpha.12):
// MCP-Protocol-Version header present → required `_meta` keys → header = body version → version supported →
// Mcp-Method = method → Mcp-Name = name/taskId. Shapes: docs/mcp.md
import type { IncomingMessage } from 'node:http';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';

export const MODERN_VERSION = '2026-07-28';
/** Versions served through the per-request envelope (legacy versions are negotiated by `initialize` instead). */
export const MODERN_VERSIONS: readonly string[] = [MODERN_VERSION];

export const META_PROTOCOL_VERSION = 'io.modelcontextprotocol/protocolVersion';
export const META_CLIENT_CAPABILITIES = 'io.modelcontextprotocol/clientCapabilities';
export const META_CLIENT_INFO = 'io.modelcontextprotocol/clientInfo';
export const META_LOG_LEVEL = 'io.modelcontextprotocol/logLevel';
export const META_SERVER_INFO = 'io.modelcontextprotocol/serverInfo';
export const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks';

/** Spec-reserved codes of 2026-07-28 (-32020…-32099 are the spec's). */
export const HEADER_MISMATCH = -32020;
export const MISSING_CLIENT_CAPABILITY = -32021;
export const UNSUPPORTED_PROTOCOL_VERSION = -32022;

/** Cache hints of server/discover and tools/list: the tool set is fixed for the life of the process. */
export const LIST_TTL_MS = 300_000;

export function headerMismatch(message: string): McpError {
  return new McpError(HEADER_MISMATCH, message);
}

export function missingTasksExtension(what: string): McpError {
  return new McpError(
    MISSING_CLIENT_CAPABILITY,
    `Missing required client capability: ${what} needs the ${TASKS_EXTENSION} extension in _meta["${META_CLIENT_CAPABILITIES}"].extensions`,
    {
      requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } },
    },
  );
}

/** HTTP status of a modern error answer: validation errors 400, unknown methods 404 (transport spec), else 200. */
export function httpStatusOf(code: number): number {
  switch (code) {
    case -32700:
    case -32600:
    case -32602:
    case HEADER_MISMATCH:
    case MISSING_CLIENT_CAPABILITY:
    case UNSUPPORTED_PROTOCOL_VERSION:
      return 400;
    case -32601:
      return 404;
    case -32603:
      return 500;
    default:
      return 200;
  }
}

const LOG_LEVELS = ['debug', 'info', 'notice', 'warning', 'error', 'critical', 'alert', 'emergency'] as const;

const envelopeSchema = z
  .object({
    [META_PROTOCOL_VERSION]: z.string().min(1).max(64),
    [META_CLIENT_CAPABILITIES]: z.record(z.string(), z.unknown()),
    [META_CLIENT_INFO]: z
      .object({ name: z.string().max(256), version: z.string().max(256) })
      .passthrough()
      .optional(),
    [META_LOG_LEVEL]: z.enum(LOG_LEVELS).optional(),
  })
  .passthrough();

export interface Envelope {
  version: string;
  capabilities: Record<string, unknown>;
  clientInfo?: { name: string; version: string };
}

export interface ModernRequest {
  id: string | number;
  method: string;
  params: Record<string, unknown>;
  envelope: Envelope;
}

/** True when a body claims the modern era: a JSON-RPC message whose params._meta names a protocol version. */
export function hasEnvelope(body: unknown): boolean {
  const meta = (body as { params?: { _meta?: unknown } } | null)?.params?._meta;
  return !!meta && typeof meta === 'object' && !Array.isArray(meta) && META_PROTOCOL_VERSION in meta;
}

export function header(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  const first = Array.isArray(v) ? v[0] : v;
  return first === undefined || first === '' ? undefined : first;
}

/** SEP-2243: values outside visible ASCII travel as `=?base64?<base64 of UTF-8>?=`; decoded before comparing. */
export function decodeHeaderValue(value: string): string {
  const m = /^=\?base64\?([A-Za-z0-9+/]*={0,2})\?=$/.exec(value.trim());
  return m ? Buffer.from(m[1], 'base64').toString('utf8') : value.trim();
}

/** The body field a method's Mcp-Name header mirrors, or undefined when the method has none. */
function nameField(method: string, params: Record<string, unknown>): { field: string; value: unknown } | undefined {
  switch (method) {
    case 'tools/call':
    case 'prompts/get':
      return { field: 'params.name', value: params['name'] };
    case 'resources/read':
      return { field: 'params.uri', value: params['uri'] };
    case 'tasks/get':
    case 'tasks/update':
    case 'tasks/cancel':
      return { field: 'params.taskId', value: params['taskId'] };
    default:
      return undefined;
  }
}

/**
 * Checks one modern JSON-RPC request (already known to be a request: object, id, method) against the envelope and
 * header rules; throws the McpError to answer, or returns the parsed request.
 */
export function validateModernRequest(req: IncomingMessage, msg: { id: string | number; method: string; params?: unknown }): ModernRequest {
  if (msg.params !== undefined && (typeof msg.params !== 'object' || msg.params === null || Array.isArray(msg.params))) {
    throw new McpError(-32602, 'Invalid params: params must be an object');
  }
  const params = (msg.params ?? {}) as Record<string, unknown>;
  const headerVersion = header(req, 'mcp-protocol-version');
  if (headerVersion === undefined)
    throw headerMismatch('Missing MCP-Protocol-Version header (it must equal _meta["io.modelcontextprotocol/protocolVersion"])');
  const meta = params['_meta'];
  const metaObj = meta && typeof meta === 'object' && !Array.isArray(meta) ? (meta as Record<string, unknown>) : {};
  const missing = [META_PROTOCOL_VERSION, META_CLIENT_CAPABILITIES].filter((k) => metaObj[k] === undefined);
  if (missing.length) throw new McpError(-32602, `Invalid params: missing _meta keys: ${missing.join(', ')}`);
  const parsed = envelopeSchema.safeParse(metaObj);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new McpError(
      -32602,
      `Invalid params: _meta["${String(issue.path[0])}"]${issue.path.length > 1 ? '.' + issue.path.slice(1).join('.') : ''}: ${issue.message}`,
    );
  }
  const version = parsed.data[META_PROTOCOL_VERSION];
  if (decodeHeaderValue(headerVersion) !== version) {
    throw headerMismatch(`MCP-Protocol-Version header "${headerVersion}" does not match _meta["${META_PROTOCOL_VERSION}"] "${version}"`);
  }
  if (!MODERN_VERSIONS.includes(version)) {
    throw new McpError(UNSUPPORTED_PROTOCOL_VERSION, `Unsupported protocol version: ${version}`, {
      supported: [...MODERN_VERSIONS],
      requested: version,
    });
  }
  const methodHeader = header(req, 'mcp-method');
  if (methodHeader === undefined) throw headerMismatch(`Missing Mcp-Method header (it must equal the body method "${msg.method}")`);
  if (decodeHeaderValue(methodHeader) !== msg.method) {
    throw headerMismatch(`Mcp-Method header "${methodHeader}" does not match the body method "${msg.method}"`);
  }
  const named = nameField(msg.method, params);
  // A missing or non-string body field is a params error, reported by the method handler.
  if (named && typeof named.value === 'string') {
    const nameHeader = header(req, 'mcp-name');
    if (nameHeader === undefined) throw headerMismatch(`Missing Mcp-Name header (it must equal ${named.field})`);
    if (decodeHeaderValue(nameHeader) !== named.value) throw headerMismatch(`Mcp-Name header does not match ${named.field}`);
  }
  const capabilities = parsed.data[META_CLIENT_CAPABILITIES];
  const clientInfo = parsed.data[META_CLIENT_INFO];
  return {
    id: msg.id,
    method: msg.method,
    params,
    envelope: { version, capabilities, ...(clientInfo && { clientInfo: { name: clientInfo.name, version: clientInfo.version } }) },
  };
}

/** Whether this request declared the tasks extension (per request: there is no session to remember it). */
export function declaresTasks(envelope: Envelope): boolean {
  const ext = (envelope.capabilities['extensions'] as Record<string, unknown> | undefined)?.[TASKS_EXTENSION];
  return !!ext && typeof ext === 'object' && !Array.isArray(ext);
}
