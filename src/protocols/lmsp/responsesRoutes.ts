// /lmsp/v1/responses: the synchronous Responses surface, run as a task so it is stored and readable afterwards.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { isTerminal, type ResponseRequest, type TaskRecord } from '../../runtime/task';
import { readJsonBody } from '../http/body';
import type { RequestContext } from '../http/types';
import type { LmspDeps } from './deps';
import { toResponseObject, wireResponse } from './format';
import { idempotencyOf } from './idempotency';
import { HEADERS, IDEMPOTENCY_SCOPES, VENDOR_PREFIX } from './lmspConstants';
import { lmspProblem, translateAsync } from './problems';
import { validateResponseBody } from './schemas';
import { streamTaskEvents } from './streams';
import { sendJson } from './wire';

export async function createResponse(deps: LmspDeps, req: IncomingMessage, res: ServerResponse, ctx: RequestContext): Promise<void> {
  const body = await readJsonBody(req, deps.maxBodyBytes);
  const idempotency = idempotencyOf(req, IDEMPOTENCY_SCOPES.responses, body);
  const { stream, input } = validateResponseBody(body);
  const task = await startResponseTask(deps, res, ctx, { input, idempotency, route: 'responses' });
  if (stream) {
    await streamTaskEvents(deps, res, {
      taskId: task.id,
      principal: ctx.principal,
      afterSeq: undefined,
      signal: ctx.signal,
      filter: (e) => !e.type.startsWith(VENDOR_PREFIX),
      trailer: '[DONE]',
      noContentWhenDone: false,
    });
    return;
  }
  const final = await awaitTerminal(deps, req, ctx, task.id);
  if (final) sendJson(res, 200, finalResponse(final));
}

export interface StartResponseTask {
  input: ResponseRequest;
  idempotency: ReturnType<typeof idempotencyOf>;
  /** Recorded in the task's meta (`lmsp_route`): which route made it. */
  route: string;
}

/**
 * Creates the task of a synchronous response (/responses, /chat/completions): durable before anything is answered,
 * an idempotent replay marked (or refused while the first is still running), and cancelled when its client leaves.
 */
export async function startResponseTask(deps: LmspDeps, res: ServerResponse, ctx: RequestContext, p: StartResponseTask): Promise<TaskRecord> {
  // The stream opens (headers, then response.created) once the create is durable; the model starts meanwhile.
  const result = await translateAsync(() =>
    deps.runtime.createTaskAsync({
      origin: 'lmsp',
      principal: ctx.principal,
      input: p.input,
      onRestart: 'fail',
      idempotency: p.idempotency,
      meta: { lmsp_route: p.route },
    }),
  );
  const task = result.task;
  if (result.replayed) {
    if (!isTerminal(task.status)) {
      throw lmspProblem('idempotency_request_in_progress', 'A request with this Idempotency-Key is still being processed.', { param: 'Idempotency-Key' });
    }
    res.setHeader(HEADERS.idempotentReplayed, 'true');
  } else {
    // A synchronous response belongs to its connection: a client that leaves no longer wants it (also one that left
    // while the create was being synced).
    if (ctx.signal.aborted) cancelQuietly(deps, task.id, ctx.principal);
    else ctx.signal.addEventListener('abort', () => cancelQuietly(deps, task.id, ctx.principal), { once: true });
  }
  return task;
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

export function getResponse(deps: LmspDeps, res: ServerResponse, ctx: RequestContext, id: string): void {
  const task = deps.runtime.getTaskByResponseId(id, ctx.principal);
  if (!task) throw lmspProblem('response_not_found', `No response ${id}.`, { param: 'response_id' });
  sendJson(res, 200, toResponseObject(task));
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
