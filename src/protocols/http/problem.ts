// Error answers of the shared listener and the doors: RFC 9457 problem+json with a stable `code`, a JSON-RPC
// error body for the MCP door, or Anthropic's error envelope for the Messages door (docs/anthropic.md). Details are written for the client; they never carry stacks, paths or secrets.
import type { ServerResponse } from 'node:http';
import { STATUS_CODES } from 'node:http';
import { randomBytes } from 'node:crypto';
import { PROBLEM_TYPE_BASE } from '../../runtime/problems';

export type ProblemStyle = 'problem+json' | 'jsonrpc' | 'anthropic';

/** An error a handler throws to be answered as a problem; everything else becomes a 500 without detail. */
export class HttpProblem extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    readonly detail: string,
    readonly extra: {
      param?: string | null;
      headers?: Record<string, string>;
      title?: string;
      /** Extension members of the problem object (RFC 9457 §3.2), e.g. `limit` of a per-principal refusal. */
      members?: Record<string, unknown>;
    } = {},
  ) {
    super(detail);
    this.name = 'HttpProblem';
  }
}

/** OpenAI's error `type` for an HTTP status (docs/lmsp.md). */
function openAiErrorType(status: number): string {
  if (status === 401) return 'authentication_error';
  if (status === 403) return 'permission_error';
  if (status === 404) return 'not_found_error';
  if (status === 429) return 'rate_limit_error';
  return status >= 500 ? 'server_error' : 'invalid_request_error';
}

/**
 * The problem object, plus the extension member `error` in OpenAI's envelope (`{message, type, param, code}`):
 * Responses clients read only `body.error`, so without it the OpenAI SDK reports "400 status code (no body)" and
 * neither the code nor the param. RFC 9457 lets problem types carry extension members; problem clients ignore it.
 */
export function problemBody(p: HttpProblem, instance?: string): Record<string, unknown> {
  const param = p.extra.param ?? null;
  return {
    ...p.extra.members,
    type: PROBLEM_TYPE_BASE + p.code,
    title: p.extra.title ?? STATUS_CODES[p.status] ?? 'Error',
    status: p.status,
    detail: p.detail,
    instance,
    code: p.code,
    param,
    error: { message: p.detail, type: openAiErrorType(p.status), param, code: p.code },
  };
}

// JSON-RPC has no HTTP-status vocabulary; these are the codes MCP clients see for transport-level refusals.
const JSONRPC_CODES: Record<number, number> = { 400: -32600, 404: -32601, 413: -32600, 415: -32600 };

/** Anthropic's error `type` for an HTTP status (its SDK picks the error class by status; Claude Code reads the type). */
export function anthropicErrorType(status: number): string {
  const types: Record<number, string> = {
    401: 'authentication_error',
    402: 'billing_error',
    403: 'permission_error',
    404: 'not_found_error',
    413: 'request_too_large',
    429: 'rate_limit_error',
    503: 'overloaded_error',
    504: 'timeout_error',
    529: 'overloaded_error',
  };
  return types[status] ?? (status >= 500 ? 'api_error' : 'invalid_request_error');
}

/** The header every Anthropic answer carries (`req_…`; the SDK shows it as `_request_id`). */
export const REQUEST_ID_HEADER = 'request-id';

/** The response's request id, made and set on first use. */
export function requestIdOf(res: ServerResponse): string {
  const set = res.getHeader(REQUEST_ID_HEADER);
  if (typeof set === 'string') return set;
  const id = `req_${randomBytes(12).toString('base64url').replace(/[-_]/g, 'x')}`;
  if (!res.headersSent) res.setHeader(REQUEST_ID_HEADER, id);
  return id;
}

/** `{type:"error", error:{type, message}, request_id}`; the field a refusal is about leads the message. */
export function anthropicErrorBody(p: HttpProblem, requestId: string): Record<string, unknown> {
  const param = p.extra.param;
  const message = param && !p.detail.includes(param) ? `${param}: ${p.detail}` : p.detail;
  return { type: 'error', error: { type: anthropicErrorType(p.status), message }, request_id: requestId };
}

export function writeProblem(res: ServerResponse, p: HttpProblem, style: ProblemStyle, instance?: string): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  for (const [k, v] of Object.entries(p.extra.headers ?? {})) res.setHeader(k, v);
  res.statusCode = p.status;
  if (style === 'jsonrpc') {
    res.setHeader('Content-Type', 'application/json');
    const code = JSONRPC_CODES[p.status] ?? -32000;
    res.end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code, message: p.detail, data: { code: p.code, status: p.status } } }));
    return;
  }
  if (style === 'anthropic') {
    res.setHeader('Content-Type', 'application/json');
    res.end(JSON.stringify(anthropicErrorBody(p, requestIdOf(res))));
    return;
  }
  res.setHeader('Content-Type', 'application/problem+json');
  res.end(JSON.stringify(problemBody(p, instance)));
}
