// tasks/get, tasks/result, tasks/list, tasks/cancel over the runtime, scoped to the caller's principal.
import { RELATED_TASK_META_KEY, McpError, type Task as McpTask } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { isRuntimeError } from '../../runtime/errors';
import { isTerminal, type TaskRecord } from '../../runtime/task';
import type { CallerContext, McpContext } from './context';
import { invalidParams, taskNotFound, toMcpError } from './errors';
import { describeIssues } from './tools';
import { isMcpTerminal, mcpStatus, toMcpTask, toolOutcome } from './mcpTaskView';

const TASK_ID_PARAMS = z.object({ taskId: z.string().min(1).max(200) }).passthrough();
const LIST_PARAMS = z
  .object({ cursor: z.string().max(1000).optional() })
  .passthrough()
  .optional();

function parseTaskId(params: unknown): string {
  // The common case without zod (a poller's hot path); anything else gets zod's exact message.
  const taskId = (params as { taskId?: unknown } | null | undefined)?.taskId;
  if (typeof taskId === 'string' && taskId.length >= 1 && taskId.length <= 200 && typeof params === 'object' && !Array.isArray(params)) return taskId;
  const parsed = TASK_ID_PARAMS.safeParse(params);
  if (!parsed.success) throw invalidParams(`Invalid params: ${describeIssues(parsed.error)}`);
  return parsed.data.taskId;
}

/** Only tasks created through this door (they carry a tool call) are MCP tasks; others are read via get_task_text. */
export function visibleTask(ctx: McpContext, caller: Pick<CallerContext, 'principal'>, taskId: string): TaskRecord {
  const task = ctx.runtime.getTask(taskId, caller.principal);
  if (!task || task.origin !== 'mcp' || typeof task.meta['tool'] !== 'string') throw taskNotFound(taskId);
  return task;
}

export function taskView(ctx: McpContext, task: TaskRecord): McpTask {
  return toMcpTask(task, task.status === 'queued' ? ctx.runtime.queueInfo(task.id) : null, ctx.view);
}

export function getTask(ctx: McpContext, caller: Pick<CallerContext, 'principal'>, params: unknown): McpTask {
  return taskView(ctx, visibleTask(ctx, caller, parseTaskId(params)));
}

/**
 * A finished task's MCP view is a function of its record alone (no queue position, no pollInterval), and the runtime
 * hands out one frozen record per finished task (TaskStore's cache): so its JSON text is kept per record.
 */
const finishedViews = new WeakMap<TaskRecord, string>();

/** tasks/get's result as JSON text: exactly JSON.stringify(getTask(...)), without rebuilding a finished task's view. */
export function getTaskJson(ctx: McpContext, caller: Pick<CallerContext, 'principal'>, params: unknown): string {
  const task = visibleTask(ctx, caller, parseTaskId(params));
  if (!isTerminal(task.status)) return JSON.stringify(taskView(ctx, task));
  let json = finishedViews.get(task);
  if (json === undefined) {
    json = JSON.stringify(taskView(ctx, task));
    finishedViews.set(task, json);
  }
  return json;
}

/** Blocks until the runtime task is terminal, woken by the runtime (not polling); gives up when the caller leaves. */
export async function waitTerminal(ctx: McpContext, caller: CallerContext, task: TaskRecord): Promise<TaskRecord> {
  if (isTerminal(task.status)) return task;
  try {
    return await ctx.runtime.waitForTerminal(task.id, caller.signal);
  } catch (e) {
    if (caller.signal.aborted) throw new McpError(-32000, 'Request abandoned by the client');
    if (isRuntimeError(e, 'task_not_found')) throw taskNotFound(task.id);
    throw toMcpError(e);
  }
}

export async function getTaskResult(ctx: McpContext, caller: CallerContext, params: unknown): Promise<Record<string, unknown>> {
  const taskId = parseTaskId(params);
  // A runtime `cancelling` task is already `cancelled` to MCP; waiting for the stop yields its final partial text.
  const final = await waitTerminal(ctx, caller, visibleTask(ctx, caller, taskId));
  const outcome = toolOutcome(final);
  if (!outcome) throw new McpError(-32603, `Task ${taskId} ended in unexpected state ${final.status}`);
  const related = { [RELATED_TASK_META_KEY]: { taskId } };
  if ('error' in outcome) {
    const data = { ...(outcome.error.data as object | undefined), _meta: related };
    throw new McpError(outcome.error.code, outcome.error.message, data);
  }
  return { ...outcome.result, _meta: { ...outcome.result._meta, ...related } };
}

export function listTasks(ctx: McpContext, caller: CallerContext, params: unknown): { tasks: McpTask[]; nextCursor?: string } {
  const parsed = LIST_PARAMS.safeParse(params);
  if (!parsed.success) throw invalidParams(`Invalid params: ${describeIssues(parsed.error)}`);
  let page;
  try {
    page = ctx.runtime.listTasks({ principal: caller.principal, origin: 'mcp', cursor: parsed.data?.cursor, limit: ctx.pageSize });
  } catch (e) {
    if (isRuntimeError(e, 'invalid_request')) throw invalidParams(`Invalid cursor: ${e.message}`);
    throw toMcpError(e);
  }
  const tasks = page.tasks.filter((t) => typeof t.meta['tool'] === 'string').map((t) => taskView(ctx, t));
  return page.nextCursor ? { tasks, nextCursor: page.nextCursor } : { tasks };
}

export function cancelTask(ctx: McpContext, caller: CallerContext, params: unknown): McpTask {
  const taskId = parseTaskId(params);
  const task = visibleTask(ctx, caller, taskId);
  const status = mcpStatus(task.status);
  if (isMcpTerminal(status)) throw invalidParams(`Cannot cancel task: already in terminal status '${status}'`);
  try {
    // queued → cancelled at once; running → cancelling (MCP: cancelled) while the backend aborts the generation.
    return taskView(ctx, ctx.runtime.cancelTask(taskId, caller.principal, 'cancelled by the MCP client'));
  } catch (e) {
    if (isRuntimeError(e, 'task_not_cancelable')) {
      const now = ctx.runtime.getTask(taskId, caller.principal);
      throw invalidParams(`Cannot cancel task: already in terminal status '${now ? mcpStatus(now.status) : 'unknown'}'`);
    }
    throw toMcpError(e);
  }
}
