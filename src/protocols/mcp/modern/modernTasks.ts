// tools/call and tasks/get|update|cancel of MCP 2026-07-28 with the tasks extension (SEP-2663), over the same
// runtime tasks as the 2025-11-25 door: same ids, same principal binding, same stored outcome (toolOutcome), only
// the wire shape differs (flat CreateTaskResult, ttlMs/pollIntervalMs, result/error inlined in tasks/get,
// isError results are `completed`, `failed` only for JSON-RPC errors). docs/mcp.md
import type { ProgressToken } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { isRuntimeError } from '../../../runtime/errors';
import { isCancellable, type TaskRecord } from '../../../runtime/task';
import type { CallerContext, McpContext } from '../context';
import { invalidParams, toMcpError } from '../errors';
import { cancelTasks, embed, getTaskText, listModels } from '../readTools';
import type { SendNotification } from '../notifier';
import { answerWhenDone, createToolTask, effectiveTtl, toolTaskMeta } from '../toolCall';
import { visibleTask } from '../taskMethods';
import { mcpStatus, statusMessage, toolOutcome, type McpTaskStatus } from '../mcpTaskView';
import { describeIssues, TOOLS_BY_NAME, toResponseRequest, type EmbedArgs, type GenerationArgs, type ToolSpec } from '../tools';
import { SEARCH_WORKSPACE, searchWorkspace, type SearchWorkspaceArgs } from '../searchWorkspaceTool';
import { answerable, invalidAnswer } from './mrtr';
import type { Envelope } from './wire';

/**
 * Which tools/call becomes a task for a client that declared the extension (the 2026 Tool has no taskSupport;
 * the server decides per request): `generate_long` always; `generate` when its effective max_output_tokens is at
 * least this many. Without the extension no call becomes a task (MUST NOT): each runs to completion inside its
 * tools/call, with progress on the call's SSE response when it carries a progressToken. 256 tokens is ≥ 10 s at the ~20 tokens/s of a 7–8 B
 * model on a laptop CPU — beyond that a held-open HTTP request is what breaks (client timeouts, no stream
 * resumption in 2026-07-28). Shorter calls answer synchronously: a task would cost the client 2+ round trips.
 * The read-only tools never become tasks.
 */
export const LONG_GENERATION_TOKENS = 256;

/** The same statuses as 2025-11-25's (mcpTaskView.ts MCP_STATUS). */
export type ModernTaskStatus = McpTaskStatus;

export interface ModernTask {
  taskId: string;
  status: ModernTaskStatus;
  statusMessage: string;
  createdAt: string;
  lastUpdatedAt: string;
  ttlMs: number | null;
  pollIntervalMs?: number;
}

export type DetailedTask = ModernTask & {
  result?: Record<string, unknown>;
  error?: { code: number; message: string; data?: unknown };
  inputRequests?: Record<string, unknown>;
};

const TASK_ID = z.string().min(1).max(200);
const GET_PARAMS = z.object({ taskId: TASK_ID }).passthrough();
const UPDATE_PARAMS = z.object({ taskId: TASK_ID, inputResponses: z.record(z.string(), z.unknown()) }).passthrough();
const CALL_PARAMS = z.object({ name: z.string().min(1).max(256), arguments: z.record(z.string(), z.unknown()).optional() }).passthrough();

function parse<T>(schema: z.ZodType<T>, params: unknown): T {
  const r = schema.safeParse(params);
  if (!r.success) throw invalidParams(`Invalid params: ${describeIssues(r.error)}`);
  return r.data;
}

function int(n: number | null): number | null {
  return n === null ? null : Math.max(0, Math.round(n));
}

/**
 * The runtime record in the modern vocabulary, with the outcome inlined by status (tasks/get, CreateTaskResult).
 * `detailed` inlines result / error / inputRequests; the input requests are only those the requesting client's
 * capabilities (`envelope`) can answer (MRTR rule; all of them when no envelope is given).
 */
export function modernTask(ctx: McpContext, task: TaskRecord, detailed: boolean, envelope?: Envelope): DetailedTask {
  const queue = task.status === 'queued' ? ctx.runtime.queueInfo(task.id) : null;
  const base = {
    taskId: task.id,
    statusMessage: statusMessage(task, queue),
    createdAt: new Date(task.createdAt).toISOString(),
    lastUpdatedAt: new Date(task.updatedAt).toISOString(),
    ttlMs: int(task.ttlMs),
  };
  const working = { ...base, pollIntervalMs: Math.max(1, Math.round(ctx.view.pollIntervalMs)) };
  const status = mcpStatus(task.status);
  if (status === 'working') return { ...working, status };
  if (status === 'input_required') {
    // Every outstanding request, by its key (unique for the task's life); required in this status.
    const all = task.inputRequests ?? {};
    return { ...working, status, ...(detailed && { inputRequests: envelope ? answerable(envelope, all) : { ...all } }) };
  }
  if (status === 'cancelled') return { ...base, status };
  const outcome = toolOutcome(task);
  if (!outcome)
    return { ...base, status: 'failed', ...(detailed && { error: { code: -32603, message: `Task ended in unexpected state ${task.status}` } }) };
  if ('error' in outcome) {
    const { code, message, data } = outcome.error;
    return { ...base, status: 'failed', ...(detailed && { error: { code, message, ...(data !== undefined && { data }) } }) };
  }
  // A tool result, isError or not, is `completed` in this era (a JSON-RPC error is `failed`). Inlined exactly as
  // the tools/call would have answered it, so with its own resultType (ext-tasks validates that).
  return { ...base, status: 'completed', ...(detailed && { result: { ...outcome.result, resultType: 'complete' } }) };
}

export interface ModernCallOptions {
  /** The request declared the tasks extension. */
  tasks: boolean;
  /**
   * Turns the call's response into an SSE stream (the result then comes as its last event) and returns its sender,
   * for notifications/progress of a synchronous call; absent when the client does not take SSE.
   */
  openStream?: () => SendNotification;
}

function progressTokenOf(params: Record<string, unknown>): ProgressToken | undefined {
  const token = (params['_meta'] as Record<string, unknown> | undefined)?.['progressToken'];
  return typeof token === 'string' || (typeof token === 'number' && Number.isFinite(token)) ? token : undefined;
}

function becomesTask(spec: ToolSpec, args: GenerationArgs): boolean {
  if (spec.taskSupport === 'required') return true;
  if (spec.taskSupport === 'forbidden') return false;
  return (args.max_output_tokens ?? spec.defaultMaxTokens ?? 0) >= LONG_GENERATION_TOKENS;
}

/** tools/call → a CallToolResult (`complete`) or, for a declaring client and a long call, a flat CreateTaskResult. */
export async function callToolModern(
  ctx: McpContext,
  caller: CallerContext,
  params: unknown,
  opts: ModernCallOptions,
): Promise<Record<string, unknown>> {
  // A legacy `task` param is an unknown field here: ignored, never an error and never a reason to make a task.
  const call = parse(CALL_PARAMS, params);
  const spec = TOOLS_BY_NAME.get(call.name);
  if (!spec) throw invalidParams(`Unknown tool: ${call.name}`);
  // No -32021 for a task-only tool: without the extension it is answered synchronously (below).
  const parsed = spec.args.safeParse(call.arguments ?? {});
  if (!parsed.success) throw invalidParams(`Invalid arguments for tool '${spec.name}': ${describeIssues(parsed.error)}`);

  if (spec.name === 'get_task_text')
    return { ...getTaskText(ctx.runtime, caller.principal, parsed.data as { taskId: string }), resultType: 'complete' };
  if (spec.name === 'list_models') return { ...listModels(ctx.runtime), resultType: 'complete' };
  if (spec.name === 'cancel_tasks')
    return { ...cancelTasks(ctx.runtime, caller.principal, parsed.data as { status?: Array<'queued' | 'running'> }), resultType: 'complete' };
  if (spec.name === 'embed')
    return { ...(await embed(ctx.runtime, caller.principal, caller.signal, parsed.data as EmbedArgs)), resultType: 'complete' };
  if (spec.name === SEARCH_WORKSPACE) return { ...(await searchWorkspace(ctx, caller, parsed.data as SearchWorkspaceArgs)), resultType: 'complete' };

  const args = parsed.data as GenerationArgs;
  const asTask = opts.tasks && becomesTask(spec, args);
  const input = toResponseRequest(args, spec.defaultMaxTokens ?? 512);
  const task = createToolTask(
    ctx,
    caller,
    {
      input,
      ttlMs: effectiveTtl(ctx, undefined),
      meta: toolTaskMeta(spec, call.arguments ?? {}, asTask, call['_meta'], { era: '2026-07-28' }),
    },
    call['_meta'],
  );
  ctx.log(`mcp: ${caller.principal} created ${task.id} via ${spec.name} (2026-07-28${asTask ? ', task' : ''})`);

  if (asTask) {
    // createTask returns once the record is journaled and readable, so tasks/get resolves from here on
    // (SEP-2663 durable-create rule). Re-read: the scheduler may already have moved it on.
    const now = ctx.runtime.getTask(task.id, caller.principal) ?? task;
    return { resultType: 'task', ...modernTask(ctx, now, false) };
  }

  const token = progressTokenOf(call);
  const progress = token !== undefined && opts.openStream ? { token, send: opts.openStream() } : undefined;
  return { ...(await answerWhenDone(ctx, caller, task, progress)), resultType: 'complete' };
}

export function getTaskModern(ctx: McpContext, caller: CallerContext, params: unknown, envelope?: Envelope): Record<string, unknown> {
  const { taskId } = parse(GET_PARAMS, params);
  return { resultType: 'complete', ...modernTask(ctx, visibleTask(ctx, caller, taskId), true, envelope) };
}

/**
 * tasks/update: delivers `inputResponses` to an input_required task (runtime.provideInput: durable before the
 * ack, so the next tasks/get already shows it). Answers to open requests must be well formed for their request type
 * (-32602, nothing recorded, otherwise); keys that are not open — unknown, already answered, superseded — and
 * updates to a task that waits for nothing are ignored (spec: SHOULD ignore). A partial set keeps the task
 * input_required with the rest. Unknown / foreign task → -32602.
 */
export function updateTaskModern(ctx: McpContext, caller: CallerContext, params: unknown): Record<string, unknown> {
  const { taskId, inputResponses } = parse(UPDATE_PARAMS, params);
  const task = visibleTask(ctx, caller, taskId);
  const open = task.inputRequests ?? {};
  const bad = Object.keys(inputResponses)
    .filter((k) => open[k] !== undefined)
    .map((k) => [k, invalidAnswer(open[k].method, inputResponses[k])] as const)
    .filter(([, why]) => why !== undefined);
  if (bad.length) throw invalidParams(`Invalid params: inputResponses: ${bad.map(([k, why]) => `"${k.slice(0, 80)}": ${why}`).join('; ')}`);
  try {
    ctx.runtime.provideInput(taskId, inputResponses, caller.principal);
  } catch (e) {
    throw toMcpError(e);
  }
  return { resultType: 'complete' };
}

/** tasks/cancel: acknowledged and idempotent — a terminal or already-cancelling task is simply acknowledged. */
export function cancelTaskModern(ctx: McpContext, caller: CallerContext, params: unknown): Record<string, unknown> {
  const { taskId } = parse(GET_PARAMS, params);
  const task = visibleTask(ctx, caller, taskId);
  if (isCancellable(task.status)) {
    try {
      ctx.runtime.cancelTask(taskId, caller.principal, 'cancelled by the MCP client');
    } catch (e) {
      // Became terminal in between: still an acknowledged cancel.
      if (!isRuntimeError(e, 'task_not_cancelable')) throw toMcpError(e);
    }
  }
  return { resultType: 'complete' };
}
