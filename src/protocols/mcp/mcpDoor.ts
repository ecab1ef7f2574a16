// The MCP door: Streamable HTTP JSON-RPC at /mcp over the shared task runtime, both eras on one endpoint.
// 2025-11-25 (legacy: `initialize`, sessions, GET/DELETE, experimental tasks) goes through the SDK transport with
// stateful sessions (for notifications on the GET stream), exactly as before; a POST whose body carries the
// 2026-07-28 `_meta` envelope goes to the stateless modern layer (modern/). Tasks are bound to the authenticated
// principal in both eras, so one runtime task is the same task to either.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { TaskRuntimeApi } from '../../runtime/api';
import type { Door } from '../door';
import type { DoorHandler, RequestContext } from '../http/types';
import type { McpContext } from './context';
import { MAX_BODY_BYTES, readJsonBody } from '../http/body';
import { HttpProblem } from '../http/problem';
import { sendJson, sendJsonRpcError } from './httpBody';
import { SseGate } from '../http/sse';
import { DEFAULT_MAX_STREAMS_PER_PRINCIPAL, tooManyStreams } from '../../runtime/shares';
import { toMcpError } from './errors';
import { REFUSALS, retryAfterHeader } from '../shared/refusals';
import { CreationGuard, DEFAULT_CREATION_LIMITS, type CreationLimits } from './limits';
import { TaskNotifier } from './notifier';
import { McpSessions, type SessionLimits } from './sessions';
import { acceptsFastTaskGet, answerFastTaskGet } from './taskGetFastPath';
import { classify } from './modern/era';
import { createModernHandler, type ModernTool } from './modern/modernDoor';
import type { WorkspaceIndexSource } from '../../workspaceIndex/reader';

export interface McpDoorOptions {
  log?: (m: string) => void;
  /** Suggested tasks/get interval reported in every unfinished task (ms). */
  pollIntervalMs?: number;
  /** tasks/list page size. */
  pageSize?: number;
  /** Largest accepted POST body (default MAX_BODY_BYTES, the same as LMSP). */
  maxBodyBytes?: number;
  limits?: Partial<CreationLimits>;
  sessions?: Partial<SessionLimits>;
  /**
   * Open GET streams (2025-11-25 sessions' notification streams) of one principal (default runtime/shares.ts
   * DEFAULT_MAX_STREAMS_PER_PRINCIPAL); beyond it a GET answers 429 with -32029 naming the limit.
   */
  maxStreamsPerPrincipal?: number;
  /** Tools served on the 2026-07-28 era beside ours (modern/modernDoor.ts); the shipped roots give none. */
  extraTools?: readonly ModernTool[];
  /** The editor's workspace index, searched by the search_workspace tool; absent: the tool says none exists. */
  workspaceIndex?: WorkspaceIndexSource;
}

export const MCP_PREFIX = '/mcp';

export interface McpDoor extends Door {
  handle: DoorHandler;
}

export const DEFAULT_POLL_INTERVAL_MS = 1000;

export function createMcpDoor(runtime: TaskRuntimeApi, options: McpDoorOptions = {}): McpDoor {
  const log = options.log ?? (() => {});
  const view = { pollIntervalMs: options.pollIntervalMs ?? DEFAULT_POLL_INTERVAL_MS };
  const notifier = new TaskNotifier(runtime, view, 250, log);
  const ctx: McpContext = {
    runtime,
    view,
    guard: new CreationGuard(runtime, { ...DEFAULT_CREATION_LIMITS, ...options.limits }),
    notifier,
    pageSize: options.pageSize ?? 50,
    log,
    workspaceIndex: options.workspaceIndex,
  };
  const modern = createModernHandler(ctx, { extraTools: options.extraTools });
  const sessions = new McpSessions(ctx, { idleMs: 30 * 60_000, maxPerPrincipal: 512, ...options.sessions });
  const maxBodyBytes = options.maxBodyBytes ?? MAX_BODY_BYTES;
  // No shared slots here (each session has at most one GET stream); only each principal's share is capped.
  const streams = new SseGate(Infinity, options.maxStreamsPerPrincipal ?? DEFAULT_MAX_STREAMS_PER_PRINCIPAL);
  let closed = false;

  async function handle(req: IncomingMessage, res: ServerResponse, rc: RequestContext): Promise<void> {
    if (closed) return sendJsonRpcError(res, 503, -32000, 'MCP server is shutting down');
    const sessionId = header(req, 'mcp-session-id');
    try {
      if (req.method === 'POST') {
        let value: unknown;
        try {
          value = await readJsonBody(req, maxBodyBytes);
        } catch (e) {
          if (!(e instanceof HttpProblem)) throw e;
          // JSON-RPC calls an unreadable body a parse error, a refused one (size, media type) an invalid request.
          const parse = e.status === 400;
          const headers: Record<string, string> = e.status === 413 ? { connection: 'close' } : {};
          return sendJsonRpcError(res, e.status, parse ? -32700 : -32600, parse ? `Parse error: ${e.detail}` : e.detail, null, headers);
        }
        // JSON numbers past 2^53 do not survive JSON.parse: such an id could only be echoed changed, so it is refused
        // as an invalid request (id null, as JSON-RPC answers one whose id it cannot read), in both eras.
        if ((Array.isArray(value) ? value : [value]).some(hasUnsafeNumericId)) {
          return sendJsonRpcError(
            res,
            400,
            -32600,
            'Invalid Request: a numeric id must be an integer within ±(2^53 − 1); send larger ids as strings',
          );
        }
        const era = classify(req, value, sessionId !== undefined);
        if (era === 'modern') return await modern.handle(req, res, rc, value);
        if (era === 'modern-header-only') {
          return sendJsonRpcError(
            res,
            400,
            -32602,
            'Invalid params: missing _meta keys: io.modelcontextprotocol/protocolVersion, io.modelcontextprotocol/clientCapabilities (the MCP-Protocol-Version header names 2026-07-28)',
            idOf(value),
          );
        }
        if (sessionId === undefined) {
          if (!isInitialize(value)) {
            return sendJsonRpcError(res, 400, -32000, 'Bad Request: Mcp-Session-Id header is required (initialize first)');
          }
          const session = await sessions.open(rc.principal);
          await session.dispatch(req, res, rc.signal, value);
          if (session.id === undefined) await session.close(); // the transport refused it: keep no half-open session
          return;
        }
        const session = sessions.get(sessionId, rc.principal);
        if (!session) return sendJsonRpcError(res, 404, -32001, 'Session not found');
        const fastId = acceptsFastTaskGet(req, value);
        if (fastId !== undefined) {
          session.lastSeen = Date.now();
          return answerFastTaskGet(ctx, res, fastId, (value as { params?: unknown }).params, rc.principal, sessionId);
        }
        return await session.dispatch(req, res, rc.signal, value);
      }
      if (req.method === 'GET' || req.method === 'DELETE') {
        if (sessionId === undefined) return sendJsonRpcError(res, 400, -32000, 'Bad Request: Mcp-Session-Id header is required');
        const session = sessions.get(sessionId, rc.principal);
        if (!session) return sendJsonRpcError(res, 404, -32001, 'Session not found');
        if (req.method === 'GET') {
          const slot = streams.tryAcquire(rc.principal);
          if (typeof slot !== 'function') {
            const e = toMcpError(tooManyStreams(streams.countOf(rc.principal), streams.maxPerPrincipal));
            return sendJson(
              res,
              429,
              { jsonrpc: '2.0', id: null, error: { code: e.code, message: e.message.replace(/^MCP error -?\d+: /, ''), data: e.data } },
              retryAfterHeader(REFUSALS.principalLimit),
            );
          }
          res.once('close', slot);
        }
        return await session.dispatch(req, res, rc.signal);
      }
      res.setHeader('allow', 'GET, POST, DELETE');
      return sendJsonRpcError(res, 405, -32000, 'Method not allowed');
    } catch (e) {
      log(`mcp: request failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
      if (!res.headersSent) sendJsonRpcError(res, 500, -32603, 'Internal error');
      else res.end();
    }
  }

  return {
    handle,
    mounts: [{ prefix: MCP_PREFIX, handler: handle, problemStyle: 'jsonrpc' }],
    async close() {
      if (closed) return;
      closed = true;
      await sessions.closeAll();
      notifier.close();
    },
  };
}

function header(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  const first = Array.isArray(v) ? v[0] : v;
  return first === '' ? undefined : first;
}

function idOf(body: unknown): string | number | null {
  const id = (body as { id?: unknown } | null)?.id;
  return typeof id === 'string' || typeof id === 'number' ? id : null;
}

function isInitialize(body: unknown): boolean {
  return !!body && typeof body === 'object' && !Array.isArray(body) && (body as { method?: unknown }).method === 'initialize';
}

/** A message whose numeric id JSON.parse could not keep exactly (an integer past 2^53, or out of range). */
function hasUnsafeNumericId(message: unknown): boolean {
  const id = message && typeof message === 'object' ? (message as { id?: unknown }).id : undefined;
  return typeof id === 'number' && (!Number.isFinite(id) || (Number.isInteger(id) && !Number.isSafeInteger(id)));
}
