// /lmsp/v1/tasks: create (202, persisted first), read, list, cancel, delete, events (ch.7).
import type { IncomingMessage, ServerResponse } from 'node:http';
import { HttpProblem } from '../http/problem';
import type { RequestContext } from '../http/types';
import { readJsonBody } from '../http/body';
import { checkBackgroundRules, withPreviousResponse } from '../openai/background';
import type { LmspDeps } from './deps';
import { runtimeStatuses, toTaskObject } from './format';
import { idempotencyOf } from './idempotency';
import { HEADERS, IDEMPOTENCY_SCOPES, LMSP_PREFIX, OBJECTS, PATHS, QUERY, VENDOR_MEMBER } from './lmspConstants';
import { lmspProblem, translate, translateAsync } from './problems';
import {
  cancelFilterSchema,
  checkRequestRules,
  parseBody,
  parseLastEventId,
  parseListQuery,
  rejectUnsupported,
  taskCreateSchema,
  toRuntimeRequest,
} from './schemas';
import { openSealedReasoning } from '../openai/responsesView';
import { streamTaskEvents } from './streams';
import { sendJson } from './wire';
import type { TaskRecord } from '../../runtime/task';

/** The task object with a queued task's place (the runtime's queue, read now). */
export function taskObject(deps: LmspDeps, task: TaskRecord, options: { withPrompt?: boolean } = {}): Record<string, unknown> {
  return toTaskObject(task, { ...options, queue: task.status === 'queued' ? deps.runtime.queueInfo(task.id) : null });
}

export async function createTask(deps: LmspDeps, req: IncomingMessage, res: ServerResponse, ctx: RequestContext): Promise<void> {
  const body = await readJsonBody(req, deps.maxBodyBytes);
  const idempotency = idempotencyOf(req, IDEMPOTENCY_SCOPES.tasks, body);
  if (typeof body === 'object' && body !== null) rejectUnsupported((body as Record<string, unknown>).input, 'input.');
  const parsed = parseBody(taskCreateSchema, body);
  checkRequestRules(parsed.input, 'input.');
  checkBackgroundRules(parsed.input, 'input.');
  const onRestart = parsed.on_restart ?? 'fail';
  const advertised = deps.runtime.limits.onRestart.includes(onRestart) && (onRestart !== 'resume' || deps.runtime.supportsResume);
  if (!advertised) {
    throw lmspProblem('unsupported_capability', `on_restart "${onRestart}" is not supported by this server.`, { param: 'on_restart' });
  }
  // The editor's other windows create tasks here on the user's behalf and say so; nobody else may.
  const claimed = parsed[VENDOR_MEMBER]?.origin;
  if (claimed && !deps.editorPrincipals.has(ctx.principal)) {
    throw lmspProblem('forbidden', `Only the editor may create tasks with origin "${claimed}".`, { param: `${VENDOR_MEMBER}.origin` });
  }
  const origin = claimed ?? 'lmsp';
  // ch.7: the `stream` field of the wrapped request is ignored.
  const input = withPreviousResponse(deps.runtime, ctx.principal, openSealedReasoning(toRuntimeRequest(parsed.input), deps.seal), 'input.');
  // Answered once the create is durable; the task may already be starting on the backend meanwhile.
  const result = await translateAsync(() =>
    deps.runtime.createTaskAsync({
      origin,
      principal: ctx.principal,
      input,
      onRestart,
      priority: parsed.priority,
      idempotency,
      meta: { lmsp_route: 'tasks' },
    }),
  ).catch((e: unknown) => {
    throw inInput(e);
  });
  const headers: Record<string, string> = { Location: `${LMSP_PREFIX}${PATHS.tasks}/${result.task.id}` };
  if (result.replayed) headers[HEADERS.idempotentReplayed] = 'true';
  sendJson(res, 202, taskObject(deps, result.task), headers);
}

/**
 * The runtime names request fields as a /responses body has them (`model`, `text.format.schema…`); here that body is
 * `input`, so its params get the prefix (on_restart is this body's own).
 */
function inInput(e: unknown): unknown {
  const param = e instanceof HttpProblem ? e.extra.param : undefined;
  if (!(e instanceof HttpProblem) || !param || param === 'on_restart' || param === 'priority') return e;
  return new HttpProblem(e.status, e.code, e.detail, { ...e.extra, param: `input.${param}` });
}

export function getTask(deps: LmspDeps, res: ServerResponse, ctx: RequestContext, id: string): void {
  const task = deps.runtime.getTask(id, ctx.principal);
  if (!task) throw lmspProblem('task_not_found', `No task ${id}.`, { param: 'task_id' });
  sendJson(res, 200, taskObject(deps, task, { withPrompt: true }));
}

export function listTasks(deps: LmspDeps, res: ServerResponse, ctx: RequestContext): void {
  const query = parseListQuery(ctx.url.searchParams);
  const page = translate(() =>
    deps.runtime.listTasks({
      principal: ctx.principal,
      statuses: query.status ? runtimeStatuses(query.status) : undefined,
      cursor: query.cursor,
      limit: query.limit ?? 20,
    }),
  );
  sendJson(res, 200, {
    object: OBJECTS.list,
    data: page.tasks.map((t) => taskObject(deps, t)),
    next_cursor: page.nextCursor,
    has_more: page.nextCursor !== null,
  });
}

export function cancelTask(deps: LmspDeps, res: ServerResponse, ctx: RequestContext, id: string): void {
  const task = translate(() => deps.runtime.cancelTask(id, ctx.principal, 'cancelled by the client'));
  sendJson(res, 200, taskObject(deps, task));
}

/** POST /tasks/{id}/run_next (vendor): a queued task of the caller's goes first among its queued tasks. */
export function runNextTask(deps: LmspDeps, res: ServerResponse, ctx: RequestContext, id: string): void {
  const task = translate(() => deps.runtime.runNext(id, ctx.principal));
  sendJson(res, 200, taskObject(deps, task));
}

/**
 * POST /task_runtime/cancel (vendor): cancels the caller's queued tasks (`status` ["queued"], the default), running
 * ones (["running"]) or both, optionally of one `model`, in one durable batch. Answers the tasks it changed; a
 * repeat finds none left (idempotent).
 */
export async function cancelTasksByFilter(deps: LmspDeps, req: IncomingMessage, res: ServerResponse, ctx: RequestContext): Promise<void> {
  const body = parseBody(cancelFilterSchema, await readJsonBody(req, deps.maxBodyBytes));
  const changed = translate(() =>
    deps.runtime.cancelTasks({
      principal: ctx.principal,
      statuses: body.status ?? ['queued'],
      model: body.model,
      reason: 'cancelled by the client (cancel by filter)',
    }),
  );
  sendJson(res, 200, { object: OBJECTS.list, data: changed.map((t) => taskObject(deps, t)), has_more: false });
}

export function deleteTask(deps: LmspDeps, res: ServerResponse, ctx: RequestContext, id: string): void {
  translate(() => deps.runtime.deleteTask(id, ctx.principal));
  sendJson(res, 200, { id, object: OBJECTS.taskDeleted, deleted: true });
}

export async function taskEvents(deps: LmspDeps, req: IncomingMessage, res: ServerResponse, ctx: RequestContext, id: string): Promise<void> {
  const afterSeq = parseLastEventId(req.headers[HEADERS.lastEventId], ctx.url.searchParams.get(QUERY.after));
  await streamTaskEvents(deps, res, { taskId: id, principal: ctx.principal, afterSeq, signal: ctx.signal, noContentWhenDone: true });
}
