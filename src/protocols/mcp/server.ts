// One low-level SDK `Server` per MCP session, with our own handlers for tools/* and tasks/* (no SDK TaskStore:
// its built-ins poll once a second, mis-handle taskSupport and know only sessions, not principals).
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { RequestId, ServerNotification } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import type { CallerContext, McpContext } from './context';
import { toMcpError } from './errors';
import { cancelTask, getTask, getTaskResult, listTasks } from './taskMethods';
import { callTool, type ToolCallParams } from './toolCall';
import { listTools } from './tools';

export const SERVER_INFO = { name: 'task-runtime', title: 'Task Runtime (local models)', version: '0.1.0' };

/** Declared exactly; `list` only because every task is bound to the authenticated principal. */
export const SERVER_CAPABILITIES = {
  tools: {},
  tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } },
};

export interface SessionHooks {
  principal: string;
  /** The HTTP request that carried a JSON-RPC request, as an abort signal (client disconnect). */
  httpSignal(requestId: RequestId): AbortSignal | undefined;
  /** Registers cleanup to run when the session closes; the returned function unregisters it. */
  onClose(cleanup: () => void): () => void;
}

// Loose request schemas: params are validated in the handlers so bad input answers -32602, not -32603.
function method<M extends string>(name: M) {
  return z.object({ method: z.literal(name), params: z.unknown().optional() }).passthrough();
}

function instructions(ctx: McpContext): string {
  const l = ctx.runtime.limits;
  const g = ctx.guard.limits;
  return (
    'Local-model generation as MCP tasks (spec 2025-11-25). Task ids are bound to your credentials, not to this ' +
    `session: reconnect and they are still yours. Task TTL: default ${l.defaultTtlMs} ms, maximum ${l.maxTtlMs} ms, ` +
    `counted from createdAt. At most ${g.maxActiveTasksPerPrincipal} unfinished tasks per client; creation is ` +
    `rate-limited to ${g.createPerSecond}/s (burst ${g.createBurst}); over the limit answers error -32029. ` +
    'Suggested poll interval is in every task. tasks/result on a cancelled task returns an isError result with ' +
    'the partial text. Tasks interrupted by a server restart end failed; re-issue them. A client that declares no ' +
    'tasks capability gets every tool answered inside its tools/call (generate_long too), with ' +
    'notifications/progress when the call carries a progressToken; cancelling the call cancels the generation.'
  );
}

export function createSessionServer(ctx: McpContext, hooks: SessionHooks): Server {
  const server = new Server(SERVER_INFO, { capabilities: SERVER_CAPABILITIES, instructions: instructions(ctx) });

  const caller = (extra: { signal: AbortSignal; requestId: RequestId }): CallerContext => {
    const http = hooks.httpSignal(extra.requestId);
    return { principal: hooks.principal, signal: http ? AbortSignal.any([extra.signal, http]) : extra.signal };
  };
  // Every handler error leaves as a proper JSON-RPC error, never a bare exception (→ -32603 with a stack).
  const guarded =
    <T>(fn: (params: unknown, extra: { signal: AbortSignal; requestId: RequestId }) => T | Promise<T>) =>
    async (request: { params?: unknown }, extra: { signal: AbortSignal; requestId: RequestId }) => {
      try {
        return await fn(request.params, extra);
      } catch (e) {
        throw toMcpError(e);
      }
    };

  const sendOnSession = async (n: ServerNotification) => {
    if (server.transport) await server.notification(n);
  };

  // Each tool as this session's client can use it: one that declared no `capabilities.tasks` at initialize (Claude
  // Code) never sends params.task, so it is shown task-only tools as `optional` and they run inside its tools/call.
  server.setRequestHandler(method('tools/list'), guarded(() => ({ tools: listTools(server.getClientCapabilities()?.tasks !== undefined) })) as never);
  server.setRequestHandler(
    method('tools/call'),
    guarded((params, extra) =>
      callTool(ctx, caller(extra), params as ToolCallParams, {
        sendOnRequest: async (n) => {
          if (server.transport) await server.notification(n, { relatedRequestId: extra.requestId });
        },
        sendOnSession,
        onSessionClose: (cleanup) => hooks.onClose(cleanup),
        shownRequired: server.getClientCapabilities()?.tasks !== undefined,
      }),
    ) as never,
  );
  server.setRequestHandler(method('tasks/get'), guarded((p, extra) => getTask(ctx, caller(extra), p)) as never);
  server.setRequestHandler(method('tasks/result'), guarded((p, extra) => getTaskResult(ctx, caller(extra), p)) as never);
  server.setRequestHandler(method('tasks/list'), guarded((p, extra) => listTasks(ctx, caller(extra), p)) as never);
  server.setRequestHandler(method('tasks/cancel'), guarded((p, extra) => cancelTask(ctx, caller(extra), p)) as never);
  server.onerror = (e) => ctx.log(`mcp: ${e.message}`);
  return server;
}
