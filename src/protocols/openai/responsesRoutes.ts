// /lmsp/v1/responses: the Responses surface, every response run as a task so it is stored and readable afterwards.
// A synchronous response belongs to its connection (a client that leaves cancels it); a background one (OpenAI
// background mode, docs/lmsp.md) is answered `queued` once durable and lives on without any connection: polled,
// cancelled, streamed again from a sequence number, deleted, and run again after a restart by its restart policy.
// A `store: false` response (Codex CLI) still runs as a task, seen in the task list while it runs, but it is never
// readable here afterwards (404, as OpenAI) and its task is deleted soon after it ends (DEFAULTS.unstoredRetentionMs).
// Output goes out through ResponsesView: namespaces, custom tools and sealed reasoning as the client offered them.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { CreateTaskResult } from '../../runtime/api';
import { isTerminal, type ResponseRequest, type RestartPolicy, type TaskRecord } from '../../runtime/task';
import { readJsonBody } from '../http/body';
import type { RequestContext } from '../http/types';
import { backgroundPolicy, checkBackgroundRules, listInputItems, refusedResume, withPreviousResponse } from './background';
import type { LmspDeps } from '../lmsp/deps';
import { toResponseObject, wireResponse, withQueue } from '../lmsp/format';
import { idempotencyOf } from '../lmsp/idempotency';
import { HEADERS, IDEMPOTENCY_SCOPES, OBJECTS, QUERY, VENDOR_PREFIX } from '../lmsp/lmspConstants';
import { lmspProblem, translate, translateAsync } from '../lmsp/problems';
import { validateResponseBody } from '../lmsp/schemas';
import { streamTaskEvents } from '../lmsp/streams';
import { openSealedReasoning, ResponsesView } from './responsesView';
import { sendEvent, sendJson } from '../lmsp/wire';
import type { TaskEvent } from '../../runtime/task';
import type { SseWriter } from '../http/sse';

/**
 * A Responses stream: the response's own events (vendor ones stay on /tasks/{id}/events) as the client offered its
 * tools (ResponsesView), `[DONE]` after the last.
 */
function responsesOnly(deps: LmspDeps, task: TaskRecord) {
  const view = new ResponsesView(task, deps.seal);
  return {
    filter: (e: { type: string }) => !e.type.startsWith(VENDOR_PREFIX),
    send: (writer: SseWriter, e: TaskEvent) => {
      const shown = view.event(e);
      if (shown) sendEvent(writer, shown);
    },
    trailer: '[DONE]',
  };
}

/** Headers a client such as Codex CLI sends about its session, kept on the task's meta (never required). */
const SESSION_HEADERS = { 'thread-id': 'thread_id', 'session-id': 'session_id', originator: 'originator' } as const;

/** What the task's meta keeps of a /responses request beyond the route: client metadata, cache key, session headers. */
function requestMeta(req: IncomingMessage, input: ResponseRequest): Record<string, unknown> {
  const meta: Record<string, unknown> = {};
  if (input.client_metadata !== undefined) meta.client_metadata = input.client_metadata;
  if (input.prompt_cache_key !== undefined) meta.prompt_cache_key = input.prompt_cache_key;
  for (const [header, key] of Object.entries(SESSION_HEADERS)) {
    const v = req.headers[header];
    if (typeof v === 'string' && v.length > 0) meta[key] = v.slice(0, 256);
  }
  return meta;
}

export async function createResponse(deps: LmspDeps, req: IncomingMessage, res: ServerResponse, ctx: RequestContext): Promise<void> {
  const body = await readJsonBody(req, deps.maxBodyBytes);
  const idempotency = idempotencyOf(req, IDEMPOTENCY_SCOPES.responses, body);
  const { stream, input: validated } = validateResponseBody(body);
  const request = openSealedReasoning(validated, deps.seal);
  checkBackgroundRules(request);
  const background = request.background === true;
  const input = withPreviousResponse(deps.runtime, ctx.principal, request);
  const { task, replayed } = await startResponseTask(deps, res, ctx, {
    input,
    idempotency,
    route: 'responses',
    background,
    meta: requestMeta(req, input),
  });
  if (stream) {
    await streamTaskEvents(deps, res, {
      taskId: task.id,
      principal: ctx.principal,
      afterSeq: undefined,
      signal: ctx.signal,
      noContentWhenDone: false,
      ...responsesOnly(deps, task),
    });
    return;
  }
  const view = new ResponsesView(task, deps.seal);
  if (background) {
    // Answered as soon as it is durable: `queued` (or, replayed, however far it has got).
    sendJson(res, 200, view.response(toResponseObject(replayed ? (deps.runtime.getTask(task.id, ctx.principal) ?? task) : task)));
    return;
  }
  const final = await awaitTerminal(deps, req, ctx, task.id);
  if (final) sendJson(res, 200, view.response(finalResponse(final)));
}

export interface StartResponseTask {
  input: ResponseRequest;
  idempotency: ReturnType<typeof idempotencyOf>;
  /** Recorded in the task's meta (`lmsp_route`): which route made it. */
  route: string;
  /** A background response: runs under the background restart policy and outlives its connection. */
  background?: boolean;
  /** More of the request for the task's meta (requestMeta; the Anthropic door's beta header and session id). */
  meta?: Record<string, unknown>;
}

/**
 * Creates the task of a response (/responses, /chat/completions): durable before anything is answered, an
 * idempotent replay marked (or, synchronous, refused while the first is still running). A synchronous response is
 * cancelled when its client leaves and is not run again after a restart (`fail`); a background one runs under the
 * configured background policy (`retry` when that is `resume` and the model cannot resume).
 */
export async function startResponseTask(deps: LmspDeps, res: ServerResponse, ctx: RequestContext, p: StartResponseTask): Promise<CreateTaskResult> {
  const create = (onRestart: RestartPolicy) =>
    translateAsync(() =>
      deps.runtime.createTaskAsync({
        origin: 'lmsp',
        principal: ctx.principal,
        input: p.input,
        onRestart,
        idempotency: p.idempotency,
        meta: { ...p.meta, lmsp_route: p.route },
      }),
    );
  // The stream opens (headers, then response.created) once the create is durable; the model starts meanwhile.
  let result: CreateTaskResult;
  if (p.background) {
    const policy = backgroundPolicy(deps.runtime, deps.backgroundOnRestart);
    result = await create(policy).catch((e: unknown) => {
      if (policy === 'resume' && refusedResume(e)) return create('retry'); // this model cannot resume
      throw e;
    });
  } else {
    result = await create('fail');
  }
  const task = result.task;
  if (result.replayed) {
    if (!p.background && !isTerminal(task.status)) {
      throw lmspProblem('idempotency_request_in_progress', 'A request with this Idempotency-Key is still being processed.', {
        param: 'Idempotency-Key',
      });
    }
    res.setHeader(HEADERS.idempotentReplayed, 'true');
  } else if (!p.background) {
    // A synchronous response belongs to its connection: a client that leaves no longer wants it (also one that left
    // while the create was being synced).
    if (ctx.signal.aborted) cancelQuietly(deps, task.id, ctx.principal);
    else ctx.signal.addEventListener('abort', () => cancelQuietly(deps, task.id, ctx.principal), { once: true });
  }
  if (!result.replayed && p.input.store === false) deleteWhenEnded(deps, task.id, ctx.principal);
  return result;
}

/**
 * A `store: false` response keeps nothing once it has been answered: its task is deleted `unstoredRetentionMs`
 * after it ends (long enough to be seen finished in the task list and the editor's tree). A restart meanwhile
 * leaves it to the runtime's retention (a synchronous response is failed by the restart and then kept as any
 * finished task).
 */
function deleteWhenEnded(deps: LmspDeps, taskId: string, principal: string): void {
  deps.runtime.waitForTerminal(taskId).then(
    () => {
      const timer = setTimeout(() => {
        deps.timers.delete(timer);
        try {
          deps.runtime.deleteTask(taskId, principal);
        } catch (e) {
          deps.log(`lmsp: deleting the unstored task ${taskId} failed: ${e instanceof Error ? e.message : String(e)}`);
        }
      }, deps.unstoredRetentionMs);
      timer.unref();
      deps.timers.add(timer);
    },
    () => {}, // already gone (deleted, or expired)
  );
}

/** The finished task of a non-streamed synchronous response; undefined when the client left meanwhile. */
export async function awaitTerminal(deps: LmspDeps, req: IncomingMessage, ctx: RequestContext, taskId: string): Promise<TaskRecord | undefined> {
  // Nothing flows while a long generation runs: the listener's idle timeout must not cut this answer off.
  req.socket.setTimeout(0);
  return translateAsync(() => deps.runtime.waitForTerminal(taskId, ctx.signal)).catch((e) => {
    if (ctx.signal.aborted) return undefined;
    throw e;
  });
}

/** A stored response of the caller's; a `store: false` one is not found, as OpenAI answers it. */
function mustGetResponse(deps: LmspDeps, ctx: RequestContext, id: string): TaskRecord {
  const task = deps.runtime.getTaskByResponseId(id, ctx.principal);
  if (!task || task.request.store === false) throw lmspProblem('response_not_found', `Response with id '${id}' not found.`, { param: 'response_id' });
  return task;
}

/**
 * GET /responses/{id}: the response as it is now; with `?stream=true` its events (OpenAI's resume: after
 * `starting_after`, else from the first), then live ones until the end.
 */
export async function getResponse(deps: LmspDeps, res: ServerResponse, ctx: RequestContext, id: string): Promise<void> {
  const q = ctx.url.searchParams;
  const stream = booleanQuery(q, QUERY.stream);
  const startingAfter = sequenceQuery(q, QUERY.startingAfter);
  const task = mustGetResponse(deps, ctx, id);
  if (!stream) {
    if (startingAfter !== undefined)
      throw lmspProblem('invalid_request', '"starting_after" is only meaningful with stream=true.', { param: QUERY.startingAfter });
    const body = new ResponsesView(task, deps.seal).response(toResponseObject(task));
    sendJson(res, 200, withQueue(body, task.status === 'queued' ? deps.runtime.queueInfo(task.id) : null));
    return;
  }
  await streamTaskEvents(deps, res, {
    taskId: task.id,
    principal: ctx.principal,
    afterSeq: startingAfter,
    signal: ctx.signal,
    noContentWhenDone: false,
    ...responsesOnly(deps, task),
  });
}

/**
 * POST /responses/{id}/cancel: a background response stops (`cancelled`, answered once it has); cancelling one that
 * has finished answers it unchanged (idempotent). A synchronous response is cancelled by closing its connection.
 */
export async function cancelResponse(deps: LmspDeps, res: ServerResponse, ctx: RequestContext, id: string): Promise<void> {
  const task = mustGetResponse(deps, ctx, id);
  if (task.request.background !== true) {
    throw lmspProblem('invalid_request', 'Cannot cancel a synchronous response; only a background response can be cancelled.', {
      param: 'response_id',
    });
  }
  if (isTerminal(task.status)) {
    sendJson(res, 200, toResponseObject(task));
    return;
  }
  translate(() => deps.runtime.cancelTask(task.id, ctx.principal, 'cancelled by the client'));
  // A running generation stops within a token; a finish that won the race is answered as it is (best effort, as OpenAI).
  const final = await translateAsync(() => deps.runtime.waitForTerminal(task.id, ctx.signal)).catch((e) => {
    if (ctx.signal.aborted) return undefined;
    throw e;
  });
  if (final) sendJson(res, 200, toResponseObject(final));
}

/** DELETE /responses/{id}: a finished response and its events (409 while it runs: cancel it first). */
export function deleteResponse(deps: LmspDeps, res: ServerResponse, ctx: RequestContext, id: string): void {
  const task = mustGetResponse(deps, ctx, id);
  translate(() => deps.runtime.deleteTask(task.id, ctx.principal));
  sendJson(res, 200, { id, object: OBJECTS.response, deleted: true });
}

/** GET /responses/{id}/input_items: the stored input (a chained response's includes what it continued), paged. */
export function getInputItems(deps: LmspDeps, res: ServerResponse, ctx: RequestContext, id: string): void {
  const task = mustGetResponse(deps, ctx, id);
  sendJson(res, 200, listInputItems(task, ctx.url.searchParams));
}

function booleanQuery(q: URLSearchParams, name: string): boolean {
  const values = q.getAll(name);
  if (values.length === 0) return false;
  if (values.length > 1 || (values[0] !== 'true' && values[0] !== 'false')) {
    throw lmspProblem('invalid_request', `Query parameter "${name}" must be true or false.`, { param: name });
  }
  return values[0] === 'true';
}

function sequenceQuery(q: URLSearchParams, name: string): number | undefined {
  const values = q.getAll(name);
  if (values.length === 0) return undefined;
  if (values.length > 1 || !/^(0|[1-9][0-9]{0,14})$/.test(values[0])) {
    throw lmspProblem('invalid_request', `Query parameter "${name}" must be a non-negative integer sequence number.`, { param: name });
  }
  return Number(values[0]);
}

function finalResponse(task: TaskRecord): Record<string, unknown> {
  if (task.response) return wireResponse(task.response);
  // Cancelled before it started: no Responses object was ever produced.
  const snapshot = toResponseObject(task);
  const failed = task.status === 'failed';
  return {
    ...snapshot,
    status: failed ? 'failed' : 'cancelled',
    error: failed && task.error ? { code: task.error.code, message: task.error.detail } : null,
  };
}

function cancelQuietly(deps: LmspDeps, id: string, principal: string): void {
  const task = deps.runtime.getTask(id, principal);
  if (!task || isTerminal(task.status)) return;
  try {
    deps.runtime.cancelTask(id, principal, 'client disconnected');
  } catch (e) {
    deps.log(`lmsp: cancel after disconnect failed: ${e instanceof Error ? e.message : String(e)}`);
  }
}
