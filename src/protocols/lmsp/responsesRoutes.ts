// /lmsp/v1/responses: the synchronous Responses surface, run as a task so it is stored and readable afterwards.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { isTerminal, type TaskRecord } from '../../runtime/task';
import { readJsonBody } from '../http/body';
import type { RequestContext } from '../http/types';
import type { LmspDeps } from './deps';
import { toResponseObject, wireResponse } from './format';
import { idempotencyOf } from './idempotency';
import { HEADERS, IDEMPOTENCY_SCOPES, VENDOR_PREFIX } from './lmspConstants';
import { lmspProblem, translateAsync } from './problems';
import { checkRequestRules, parseBody, rejectUnsupported, responseCreateSchema, toRuntimeRequest } from './schemas';
import { streamTaskEvents } from './streams';
import { sendJson } from './wire';

export async function createResponse(deps: LmspDeps, req: IncomingMessage, res: ServerResponse, ctx: RequestContext): Promise<void> {
  const body = await readJsonBody(req, deps.maxBodyBytes);
  const idempotency = idempotencyOf(req, IDEMPOTENCY_SCOPES.responses, body);
  rejectUnsupported(body);
  const parsed = parseBody(responseCreateSchema, body);
  checkRequestRules(parsed);
  const stream = parsed.stream === true;
  const input = toRuntimeRequest(parsed);
  // The stream opens (headers, then response.created) once the create is durable; the model starts meanwhile.
  const result = await translateAsync(() =>
    deps.runtime.createTaskAsync({ origin: 'lmsp', principal: ctx.principal, input, onRestart: 'fail', idempotency, meta: { lmsp_route: 'responses' } }),
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
  // Nothing flows while a long generation runs: the listener's idle timeout must not cut this answer off.
  req.socket.setTimeout(0);
  const final = await translateAsync(() => deps.runtime.waitForTerminal(task.id, ctx.signal)).catch((e) => {
    if (ctx.signal.aborted) return undefined;
    throw e;
  });
  if (final) sendJson(res, 200, finalResponse(final));
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
