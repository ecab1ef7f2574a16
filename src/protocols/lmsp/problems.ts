// The one place where runtime errors become LMSP problems.
import { CLIENT_FACING_CODES, RuntimeError, type RuntimeErrorCode } from '../../runtime/errors';
import { HttpProblem } from '../http/problem';
import { REFUSALS, retryAfterHeader } from '../shared/refusals';
import { CODES, type LmspCode } from './lmspConstants';

const RUNTIME_TO_LMSP: Record<RuntimeErrorCode, LmspCode> = {
  task_not_found: 'task_not_found',
  not_found: 'not_found',
  task_not_cancelable: 'task_not_cancelable',
  task_not_deletable: 'task_not_deletable',
  event_history_expired: 'event_history_expired',
  invalid_last_event_id: 'invalid_last_event_id',
  idempotency_key_reused: 'idempotency_key_reused',
  model_not_found: 'model_not_found',
  unsupported_capability: 'unsupported_capability',
  invalid_request: 'invalid_request',
  invalid_json_schema: 'invalid_json_schema',
  context_length_exceeded: 'context_length_exceeded',
  queue_full: 'queue_full',
  limit_exceeded: 'limit_exceeded',
  payload_too_large: 'payload_too_large',
  store_locked: 'unavailable',
  store_unwritable: 'unavailable',
  store_corrupt: 'internal_error',
  runtime_closed: 'unavailable',
};

export function lmspProblem(code: LmspCode, detail: string, extra: ConstructorParameters<typeof HttpProblem>[3] = {}): HttpProblem {
  return new HttpProblem(CODES[code], code, detail, extra);
}

export function fromRuntimeError(e: RuntimeError): HttpProblem {
  const code = RUNTIME_TO_LMSP[e.code];
  const detail = CLIENT_FACING_CODES.has(e.code)
    ? e.message
    : e.code === 'store_unwritable'
      ? REFUSALS.storeUnwritable.text
      : code === 'unavailable'
        ? REFUSALS.unavailable.text
        : 'The server could not complete the request.';
  const refusal =
    code === 'queue_full'
      ? REFUSALS.queueFull
      : code === 'unavailable'
        ? REFUSALS.unavailable
        : code === 'limit_exceeded' && e.limit?.unit !== 'bytes'
          ? REFUSALS.principalLimit
          : {};
  const headers = retryAfterHeader(refusal);
  return lmspProblem(code, detail, { param: e.param ?? null, headers, ...(e.limit && { members: { limit: e.limit } }) });
}

/** Runs `fn`, turning RuntimeErrors into problems. */
export function translate<T>(fn: () => T): T {
  try {
    return fn();
  } catch (e) {
    if (e instanceof RuntimeError) throw fromRuntimeError(e);
    throw e;
  }
}

export async function translateAsync<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (e) {
    if (e instanceof RuntimeError) throw fromRuntimeError(e);
    throw e;
  }
}
