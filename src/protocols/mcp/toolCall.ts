// tools/call: task-support negotiation (the -32601 rule the SDK's McpServer gets wrong), argument validation,
// task creation on the runtime, and the synchronous path — of an `optional` tool, and of a task-only tool called by
// a client without tasks (Claude Code declares none and never sends params.task: docs/anthropic.md).
import type { CallToolResult, CreateTaskResult, ProgressToken } from '@modelcontextprotocol/sdk/types.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import type { CallerContext, McpContext } from './context';
import type { CreateTaskParams } from '../../runtime/api';
import { isRuntimeError, RuntimeError } from '../../runtime/errors';
import { checkPriority } from '../../runtime/queue';
import type { TaskRecord } from '../../runtime/task';
import { invalidParams, methodNotFound, toMcpError } from './errors';
import type { SendNotification } from './notifier';
import { cancelTasks, embed, getTaskText, listModels } from './readTools';
import { SEARCH_WORKSPACE, searchWorkspace, type SearchWorkspaceArgs } from './searchWorkspaceTool';
import { waitTerminal, taskView } from './taskMethods';
import { toolOutcome } from './mcpTaskView';
import { argumentOf, describeIssues, TOOLS_BY_NAME, toResponseRequest, type EmbedArgs, type GenerationArgs, type ToolSpec } from './tools';

/** Claude Code's `_meta` key on tools/call: the id of the model's tool_use block the call answers. */
export const CLAUDE_CODE_TOOL_USE_ID = 'claudecode/toolUseId';
/**
 * `_meta` key of tools/call (either era) that sets the task's priority among the caller's own queued tasks: an
 * integer from -10 to 10, default 0 (runtime/queue.ts).
 */
export const PRIORITY_META = 'task-runtime/priority';
/** Task meta key the client's tool-use id is kept under (the editor and LMSP readers find the call by it). */
export const TOOL_USE_ID_META = 'mcp_tool_use_id';
const MAX_TOOL_USE_ID_CHARS = 256;

export interface ToolCallParams {
  name: string;
  arguments?: Record<string, unknown>;
  task?: { ttl?: number };
  _meta?: { progressToken?: ProgressToken; [CLAUDE_CODE_TOOL_USE_ID]?: unknown };
}

/**
 * The meta a generation tool's runtime task is created with, in either era: the tool and its arguments (what makes
 * it an MCP task), whether it was created as an MCP task, and the client's tool-use id when it gave a usable one
 * (anything else is ignored: it is a hint, never a reason to refuse the call).
 */
export function toolTaskMeta(
  spec: ToolSpec,
  args: Record<string, unknown>,
  asTask: boolean,
  requestMeta: unknown,
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  const meta: Record<string, unknown> = { tool: spec.name, arguments: args, asTask, ...extra };
  const useId = requestMeta && typeof requestMeta === 'object' ? (requestMeta as Record<string, unknown>)[CLAUDE_CODE_TOOL_USE_ID] : undefined;
  if (typeof useId === 'string' && useId.length > 0 && useId.length <= MAX_TOOL_USE_ID_CHARS) meta[TOOL_USE_ID_META] = useId;
  return meta;
}

/** The progress channel of a synchronous tools/call: the caller's token and the call's own response stream. */
export interface CallProgress {
  token: ProgressToken;
  send: SendNotification;
}

export interface ToolCallChannel {
  /** Sends on the tools/call response stream (progress of a synchronous call). */
  sendOnRequest: SendNotification;
  /** Sends on the session's standalone stream (updates after CreateTaskResult); dropped when none is open. */
  sendOnSession: SendNotification;
  /** Runs `cleanup` when the session ends; returns a function that forgets it (the task ended first). */
  onSessionClose(cleanup: () => void): () => void;
  /**
   * The client was shown the task-only tools as `required` (a 2025-11-25 session that declared tasks): a plain call
   * of one is refused as the spec says (-32601), since that client can make it a task.
   */
  shownRequired?: boolean;
}

/** Every MCP task gets a TTL counted from createdAt: the client's request, else the default, capped at the max. */
export function effectiveTtl(ctx: McpContext, requested: number | undefined): number {
  const { defaultTtlMs, maxTtlMs } = ctx.runtime.limits;
  const ttl = requested === undefined || !Number.isFinite(requested) ? defaultTtlMs : Math.round(requested);
  return Math.min(maxTtlMs, Math.max(1000, ttl));
}

export async function callTool(
  ctx: McpContext,
  caller: CallerContext,
  params: ToolCallParams,
  channel: ToolCallChannel,
): Promise<CallToolResult | CreateTaskResult> {
  const spec = TOOLS_BY_NAME.get(params.name);
  if (!spec) throw invalidParams(`Unknown tool: ${params.name}`);
  const asTask = params.task !== undefined;
  // Checked before anything runs, so a misuse has no side effect. A `required` tool is refused without params.task
  // only to a client that was shown it as `required`; a client without tasks is shown it as `optional` (tools.ts
  // taskSupportFor) and its call runs to completion here.
  if (spec.taskSupport === 'required' && !asTask && channel.shownRequired) {
    throw methodNotFound(`Tool '${spec.name}' requires task augmentation (execution.taskSupport 'required'): add params.task`);
  }
  if (spec.taskSupport === 'forbidden' && asTask) {
    throw methodNotFound(`Tool '${spec.name}' does not support task augmentation (execution.taskSupport 'forbidden'): drop params.task`);
  }
  const parsed = spec.args.safeParse(params.arguments ?? {});
  if (!parsed.success) throw invalidParams(`Invalid arguments for tool '${spec.name}': ${describeIssues(parsed.error)}`);

  if (spec.name === 'get_task_text') return getTaskText(ctx.runtime, caller.principal, parsed.data as { taskId: string });
  if (spec.name === 'list_models') return listModels(ctx.runtime);
  if (spec.name === 'cancel_tasks') return cancelTasks(ctx.runtime, caller.principal, parsed.data as { status?: Array<'queued' | 'running'> });
  if (spec.name === 'embed') return embed(ctx.runtime, caller.principal, caller.signal, parsed.data as EmbedArgs);
  if (spec.name === SEARCH_WORKSPACE) return searchWorkspace(ctx, caller, parsed.data as SearchWorkspaceArgs);

  const args = parsed.data as GenerationArgs;
  const input = toResponseRequest(args, spec.defaultMaxTokens ?? 512);
  const task = createToolTask(
    ctx,
    caller,
    {
      input,
      ttlMs: effectiveTtl(ctx, params.task?.ttl),
      meta: toolTaskMeta(spec, params.arguments ?? {}, asTask, params._meta),
    },
    params._meta,
  );
  const progressToken = params._meta?.progressToken;
  ctx.log(`mcp: ${caller.principal} created ${task.id} via ${spec.name}${asTask ? ' (task)' : ''}`);

  if (asTask) {
    let forget = () => {};
    const unwatch = ctx.notifier.watch(task.id, channel.sendOnSession, {
      statusUpdates: true,
      progressToken,
      total: input.max_output_tokens,
      onEnd: () => forget(),
    });
    forget = channel.onSessionClose(unwatch);
    return {
      task: taskView(ctx, task),
      _meta: {
        'io.modelcontextprotocol/model-immediate-response': `Started local generation as task ${task.id}; the text follows when it completes.`,
      },
    };
  }

  // Synchronous call: still a durable runtime task, answered directly, with progress on the call's SSE stream.
  return answerWhenDone(ctx, caller, task, progressToken === undefined ? undefined : { token: progressToken, send: channel.sendOnRequest });
}

/**
 * The runtime task behind a tools/call in either era: the caller is admitted by the creation guard (limits per
 * principal), the task is created as MCP's (`on_restart: fail` unless given), and runtime errors become MCP errors.
 */
export function createToolTask(
  ctx: McpContext,
  caller: CallerContext,
  params: Pick<CreateTaskParams, 'input' | 'ttlMs' | 'meta' | 'onRestart'>,
  requestMeta?: unknown,
): TaskRecord {
  const priority = priorityOf(requestMeta);
  ctx.guard.admit(caller.principal);
  try {
    const onRestart = params.onRestart ?? 'fail';
    return ctx.runtime.createTask({ origin: 'mcp', principal: caller.principal, ...params, onRestart, priority }).task;
  } catch (e) {
    // A refusal names the request field; the caller knows it as a tool argument (output_schema.properties.x…).
    if (isRuntimeError(e) && e.param) throw toMcpError(new RuntimeError(e.code, e.message, argumentOf(e.param), e.limit));
    throw toMcpError(e);
  }
}

/** The priority a tools/call's `_meta` asks for (PRIORITY_META), checked; invalid params when it is not one. */
function priorityOf(requestMeta: unknown): number | undefined {
  const value = requestMeta && typeof requestMeta === 'object' ? (requestMeta as Record<string, unknown>)[PRIORITY_META] : undefined;
  if (value === undefined) return undefined;
  try {
    return checkPriority(value, `_meta["${PRIORITY_META}"]`);
  } catch (e) {
    throw invalidParams((e as Error).message);
  }
}

/**
 * A synchronous tools/call in either era: waits for the runtime task and answers with its tool result (or the
 * JSON-RPC error it ended in) — the same outcome a task-augmented client reads from tasks/result. Meanwhile, with a
 * progress channel, notifications/progress (notifier.ts: the phase at once, then the output tokens, at most every
 * 250 ms). A caller that goes away (notifications/cancelled, or its connection closed) cancels the generation instead
 * of burning the model on it.
 */
export async function answerWhenDone(ctx: McpContext, caller: CallerContext, task: TaskRecord, progress?: CallProgress): Promise<CallToolResult> {
  const unwatch = progress
    ? ctx.notifier.watch(task.id, progress.send, {
        statusUpdates: false,
        progressToken: progress.token,
        total: task.request.max_output_tokens,
        announce: task,
      })
    : () => {};
  try {
    const final = await waitTerminal(ctx, caller, task);
    const outcome = toolOutcome(final);
    if (!outcome) throw new McpError(-32603, `Task ${task.id} ended in unexpected state ${final.status}`);
    if ('error' in outcome) throw new McpError(outcome.error.code, outcome.error.message, outcome.error.data);
    return outcome.result;
  } catch (e) {
    if (caller.signal.aborted) {
      try {
        ctx.runtime.cancelTask(task.id, caller.principal, 'the synchronous tools/call was abandoned by the client');
      } catch {
        /* already terminal */
      }
    }
    throw e;
  } finally {
    unwatch();
  }
}
