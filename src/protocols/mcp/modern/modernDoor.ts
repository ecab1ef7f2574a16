// The 2026-07-28 half of /mcp: a thin stateless JSON-RPC layer on our own listener (no SDK transport, no session),
// reached only for bodies that carry the `_meta` envelope (era.ts). Every request is validated on its own
// (wire.ts), answered as plain application/json — except a synchronous generation that carries a progressToken,
// answered as an SSE stream of notifications/progress ending with the result (the request's own response stream,
// where 2026-07-28 keeps progress) — every result carries `resultType` and `serverInfo`, every error echoes the
// request id. Chosen over @modelcontextprotocol/server 2.x: that package has no tasks runtime in either
// era, its legacy fallback cannot carry our sessions, and the whole layer here is ~0.2 ms and a few KB of bundle
// (figures in docs/mcp.md).
// Besides our own tools it serves the `extraTools` its creator hands it (listed first, called through the same
// envelope checks); the shipped roots hand it none, so nothing but our tools is reachable from the product.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { McpError, type ServerNotification, type Tool } from '@modelcontextprotocol/sdk/types.js';
import { isJsonContentType } from '../../http/body';
import { SseWriter } from '../../http/sse';
import type { RequestContext } from '../../http/types';
import type { CallerContext, McpContext } from '../context';
import { toMcpError } from '../errors';
import { SERVER_INFO } from '../server';
import { sendJson } from '../httpBody';
import type { SendNotification } from '../notifier';
import { listTools, TOOLS_BY_NAME } from '../tools';
import { RequestStateSealer } from './mrtr';
import { callToolModern, cancelTaskModern, getTaskModern, updateTaskModern } from './modernTasks';
import {
  declaresTasks,
  httpStatusOf,
  LIST_TTL_MS,
  META_SERVER_INFO,
  missingTasksExtension,
  MODERN_VERSIONS,
  TASKS_EXTENSION,
  validateModernRequest,
  type Envelope,
  type ModernRequest,
} from './wire';

/** Declared exactly: the extension's value is `{}` (clients test for an empty object) and there is no `tasks`. */
export const MODERN_CAPABILITIES = { tools: {}, extensions: { [TASKS_EXTENSION]: {} } };

/** Methods that existed in 2025-11-25 and are gone in this era: 404 + -32601 like any unknown method. */
const REMOVED: ReadonlyMap<string, string> = new Map(
  Object.entries({
    'tasks/result': 'tasks/result is removed in 2026-07-28 (tasks extension): the result is inlined in tasks/get',
    'tasks/list': 'tasks/list is removed in 2026-07-28 (tasks extension): keep the task ids you were given',
    initialize: 'initialize does not exist in 2026-07-28: send the _meta envelope on every request (server/discover)',
    ping: 'ping is removed in 2026-07-28',
    'logging/setLevel': 'logging/setLevel is removed in 2026-07-28: use _meta["io.modelcontextprotocol/logLevel"]',
  }),
);

function modernInstructions(ctx: McpContext): string {
  const l = ctx.runtime.limits;
  const g = ctx.guard.limits;
  return (
    'Local-model generation (MCP 2026-07-28; tasks via the io.modelcontextprotocol/tasks extension). Declare the ' +
    'extension on a request to let long calls become tasks: generate_long always runs as a task, generate becomes ' +
    'one when max_output_tokens is 256 or more. Poll tasks/get; the result is inlined when completed. Without the ' +
    'extension every tool answers inside its tools/call (generate_long too), with notifications/progress on the ' +
    'response stream when the call carries a progressToken; closing that stream cancels the generation. Task ids are bound to your credentials and are the same ids the ' +
    `2025-11-25 endpoint, LMSP and the editor show. Task TTL: default ${l.defaultTtlMs} ms, counted from createdAt. ` +
    `At most ${g.maxActiveTasksPerPrincipal} unfinished tasks per client; creation is rate-limited to ` +
    `${g.createPerSecond}/s (burst ${g.createBurst}); over the limit answers error -32029. Tasks interrupted by a ` +
    'server restart complete with an isError result; re-issue them.'
  );
}

function errorObject(e: McpError): Record<string, unknown> {
  const error: Record<string, unknown> = { code: e.code, message: e.message.replace(/^MCP error -?\d+: /, '') };
  if (e.data !== undefined) error['data'] = e.data;
  return error;
}

function sendError(res: ServerResponse, id: string | number | null, e: McpError): void {
  sendJson(res, httpStatusOf(e.code), { jsonrpc: '2.0', id, error: errorObject(e) });
}

/** The JSON-RPC answer as the stream's last event, then the end of the response. */
function endStream(stream: SseWriter, answer: Record<string, unknown>): void {
  stream.send({ event: 'message', data: JSON.stringify(answer) });
  stream.close();
}

function acceptsSse(req: IncomingMessage): boolean {
  const accept = req.headers['accept'];
  return typeof accept === 'string' && /(^|,)\s*text\/event-stream\s*(;|,|$)/i.test(accept);
}

export interface ModernHandler {
  /** Serves one POSTed modern message (the caller has read and parsed the body and classified it). */
  handle(req: IncomingMessage, res: ServerResponse, rc: RequestContext, body: unknown): Promise<void>;
}

/** What a tools/call of an extra tool is given besides its params. */
export interface ModernToolCall {
  envelope: Envelope;
  /** The request declared the tasks extension. */
  tasks: boolean;
  /** The door's MRTR requestState sealer (a key of this process), made on first use. */
  sealer(): RequestStateSealer;
}

/** A tool served on the 2026-07-28 era beside ours. */
export interface ModernTool {
  /** As tools/list shows it (the 2026-07-28 Tool: no `execution`). */
  readonly definition: Tool;
  /** The tools/call result (`resultType` included), or throws an McpError. */
  call(ctx: McpContext, caller: CallerContext, params: Record<string, unknown>, call: ModernToolCall): Promise<Record<string, unknown>>;
}

export interface ModernOptions {
  /** More tools, listed before ours; a name of ours is refused. */
  extraTools?: readonly ModernTool[];
}

export function createModernHandler(ctx: McpContext, options: ModernOptions = {}): ModernHandler {
  const instructions = modernInstructions(ctx);
  const serverMeta = { [META_SERVER_INFO]: SERVER_INFO };
  const extra = new Map<string, ModernTool>();
  for (const t of options.extraTools ?? []) {
    const name = t.definition.name;
    if (extra.has(name) || TOOLS_BY_NAME.has(name)) throw new Error(`MCP tool "${name}" is defined twice`);
    extra.set(name, t);
  }
  // Built at the first tools/list, not at start-up: our tools' JSON Schemas come from zod (9–13 ms on the loaded
  // 2-core machine, a block of the editor's start-up). The 2026-07-28 Tool has no `execution`: whether a call
  // becomes a task is decided per request, and so is the description (a request without the extension is told
  // how the tool runs without tasks).
  const listed = new Map<boolean, Record<string, unknown>[]>();
  const listedTools = (tasks: boolean) => {
    let tools = listed.get(tasks);
    if (!tools) {
      tools = [...[...extra.values()].map((t) => t.definition), ...listTools(tasks).map(({ execution: _execution, ...tool }) => tool)];
      listed.set(tasks, tools);
    }
    return tools;
  };
  // Only MRTR tools seal requestState, and none of ours is one: the key is made when an extra tool first asks.
  let sealer: RequestStateSealer | undefined;
  const sealerOnce = () => (sealer ??= new RequestStateSealer());

  async function dispatch(r: ModernRequest, caller: CallerContext, openStream?: () => SendNotification): Promise<Record<string, unknown>> {
    const tasks = declaresTasks(r.envelope);
    switch (r.method) {
      case 'server/discover':
        return {
          resultType: 'complete',
          supportedVersions: [...MODERN_VERSIONS],
          capabilities: MODERN_CAPABILITIES,
          instructions,
          ttlMs: LIST_TTL_MS,
          cacheScope: 'private',
        };
      case 'tools/list': {
        const cursor = r.params['cursor'];
        if (cursor !== undefined) throw new McpError(-32602, 'Invalid params: unknown cursor (the tool list has one page)');
        return { resultType: 'complete', tools: listedTools(tasks), ttlMs: LIST_TTL_MS, cacheScope: 'private' };
      }
      case 'tools/call': {
        const name = r.params['name'];
        const tool = typeof name === 'string' ? extra.get(name) : undefined;
        if (tool) return tool.call(ctx, caller, r.params, { envelope: r.envelope, tasks, sealer: sealerOnce });
        return callToolModern(ctx, caller, r.params, { tasks, openStream });
      }
      case 'tasks/get':
      case 'tasks/update':
      case 'tasks/cancel': {
        if (!tasks) throw missingTasksExtension(r.method);
        if (r.method === 'tasks/get') return getTaskModern(ctx, caller, r.params, r.envelope);
        if (r.method === 'tasks/update') return updateTaskModern(ctx, caller, r.params);
        return cancelTaskModern(ctx, caller, r.params);
      }
      default:
        throw new McpError(-32601, REMOVED.get(r.method) ?? `Method not found: ${r.method.slice(0, 200)}`);
    }
  }

  return {
    async handle(req, res, rc, body) {
      const msg = body as { jsonrpc?: unknown; id?: unknown; method?: unknown; params?: unknown };
      const id = typeof msg.id === 'string' || typeof msg.id === 'number' ? msg.id : null;
      if (msg.jsonrpc !== '2.0' || typeof msg.method !== 'string' || (msg.id !== undefined && id === null)) {
        return sendError(
          res,
          id,
          new McpError(-32600, 'Invalid Request: expected a JSON-RPC 2.0 request with a string method and a string or number id'),
        );
      }
      if (!isJsonContentType(req.headers['content-type'])) {
        return sendError(res, id, new McpError(-32600, 'Invalid Request: Content-Type must be application/json'));
      }
      if (id === null) {
        // Client-to-server notifications do not exist on 2026-07-28 Streamable HTTP; accepted and ignored.
        res.writeHead(202).end();
        return;
      }
      // Opened only by a synchronous generation with a progressToken, once its task exists (a refusal before that
      // still answers with its own HTTP status); the client must take SSE (its Accept says so).
      let stream: SseWriter | undefined;
      const openStream = acceptsSse(req)
        ? () => {
            stream ??= new SseWriter(res, { signal: rc.signal });
            const sse = stream;
            return async (n: ServerNotification) => sse.send({ event: 'message', data: JSON.stringify({ jsonrpc: '2.0', ...n }) });
          }
        : undefined;
      try {
        const r = validateModernRequest(req, { id, method: msg.method, params: msg.params });
        const result = await dispatch(r, { principal: rc.principal, signal: rc.signal }, openStream);
        const meta = result['_meta'] && typeof result['_meta'] === 'object' ? (result['_meta'] as Record<string, unknown>) : {};
        const answer = { jsonrpc: '2.0', id, result: { ...result, _meta: { ...meta, ...serverMeta } } };
        if (stream) endStream(stream, answer);
        else sendJson(res, 200, answer);
      } catch (e) {
        const err = toMcpError(e);
        if (err.code === -32603) ctx.log(`mcp (2026-07-28): ${msg.method} failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
        if (res.writableEnded || res.destroyed) return;
        if (stream) endStream(stream, { jsonrpc: '2.0', id, error: errorObject(err) });
        else sendError(res, id, err);
      }
    },
  };
}
