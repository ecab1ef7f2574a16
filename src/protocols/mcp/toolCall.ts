// tools/call: task-support negotiation (the -32601 rules the SDK's McpServer gets wrong), argument validation,
// task creation on the runtime, and the synchronous path of an `optional` tool.
import type { CallToolResult, CreateTaskResult, ProgressToken } from '@modelcontextprotocol/sdk/types.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import type { CallerContext, McpContext } from './context';
import type { CreateTaskParams } from '../../runtime/api';
import { isRuntimeError, RuntimeError } from '../../runtime/errors';
import type { TaskRecord } from '../../runtime/task';
import { invalidParams, methodNotFound, toMcpError } from './errors';
import type { SendNotification } from './notifier';
import { getTaskText, listModels } from './readTools';
import { waitTerminal, taskView } from './taskMethods';
import { toolOutcome } from './taskView';
import { argumentOf, describeIssues, TOOLS_BY_NAME, toResponseRequest, type GenerationArgs } from './tools';

export interface ToolCallParams {
  name: string;
  arguments?: Record<string, unknown>;
  task?: { ttl?: number };
  _meta?: { progressToken?: ProgressToken };
}

export interface ToolCallChannel {
  /** Sends on the tools/call response stream (progress of a synchronous call). */
  sendOnRequest: SendNotification;
  /** Sends on the session's standalone stream (updates after CreateTaskResult); dropped when none is open. */
  sendOnSession: SendNotification;
  /** Runs `cleanup` when the session ends; returns a function that forgets it (the task ended first). */
  onSessionClose(cleanup: () => void): () => void;
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
  // Checked before anything runs, so a misuse has no side effect.
  if (spec.taskSupport === 'required' && !asTask) {
    throw methodNotFound(`Tool '${spec.name}' requires task augmentation (execution.taskSupport 'required'): add params.task`);
  }
  if (spec.taskSupport === 'forbidden' && asTask) {
    throw methodNotFound(`Tool '${spec.name}' does not support task augmentation (execution.taskSupport 'forbidden'): drop params.task`);
  }
  const parsed = spec.args.safeParse(params.arguments ?? {});
  if (!parsed.success) throw invalidParams(`Invalid arguments for tool '${spec.name}': ${describeIssues(parsed.error)}`);

  if (spec.name === 'get_task_text') return getTaskText(ctx.runtime, caller.principal, parsed.data as { taskId: string });
  if (spec.name === 'list_models') return listModels(ctx.runtime);

  const args = parsed.data as GenerationArgs;
  const input = toResponseRequest(args, spec.defaultMaxTokens ?? 512);
  const task = createToolTask(ctx, caller, {
    input,
    ttlMs: effectiveTtl(ctx, params.task?.ttl),
    meta: { tool: spec.name, arguments: params.arguments ?? {}, asTask },
  });
  const progressToken = params._meta?.progressToken;
  const total = input.max_output_tokens;
  ctx.log(`mcp: ${caller.principal} created ${task.id} via ${spec.name}${asTask ? ' (task)' : ''}`);

  if (asTask) {
    let forget = () => {};
    const unwatch = ctx.notifier.watch(task.id, channel.sendOnSession, {
      statusUpdates: true,
      progressToken,
      total,
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

  // Synchronous `optional` call: still a durable runtime task, answered directly.
  const unwatch =
    progressToken !== undefined
      ? ctx.notifier.watch(task.id, channel.sendOnRequest, { statusUpdates: false, progressToken, total })
      : () => {};
  try {
    return await answerWhenDone(ctx, caller, task);
  } finally {
    unwatch();
  }
}

/**
 * The runtime task behind a tools/call in either era: the caller is admitted by the creation guard (limits per
 * principal), the task is created as MCP's (`on_restart: fail` unless given), and runtime errors become MCP errors.
 */
export function createToolTask(
  ctx: McpContext,
  caller: CallerContext,
  params: Pick<CreateTaskParams, 'input' | 'ttlMs' | 'meta' | 'onRestart'>,
): TaskRecord {
  ctx.guard.admit(caller.principal);
  try {
    return ctx.runtime.createTask({ origin: 'mcp', principal: caller.principal, ...params, onRestart: params.onRestart ?? 'fail' }).task;
  } catch (e) {
    // A refusal names the request field; the caller knows it as a tool argument (output_schema.properties.x…).
    if (isRuntimeError(e) && e.param) throw toMcpError(new RuntimeError(e.code, e.message, argumentOf(e.param), e.limit));
    throw toMcpError(e);
  }
}

/**
 * A synchronous tools/call in either era: waits for the runtime task and answers with its tool result (or the
 * JSON-RPC error it ended in). A caller that goes away cancels the generation instead of burning the model on it.
 */
export async function answerWhenDone(ctx: McpContext, caller: CallerContext, task: TaskRecord): Promise<CallToolResult> {
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
  }
}
