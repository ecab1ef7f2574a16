// JSON-RPC error forms of the MCP door, and the translation of runtime errors into them.
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { isBackendError } from '../../runtime/backend';
import { isRuntimeError } from '../../runtime/errors';
import { REFUSALS, retryAfterMs } from '../shared/refusals';

/** Implementation-defined server error (JSON-RPC reserves -32000..-32099): rate or concurrency limit hit. */
export const TOO_MANY_TASKS = -32029;

/**
 * Implementation-defined server error: the task store cannot be written (disk full or not writable) and the request
 * changed nothing. Worded and timed as every door says it (shared/refusals.ts).
 */
export const STORE_UNWRITABLE = -32010;

export function invalidParams(message: string, data?: unknown): McpError {
  return new McpError(ErrorCode.InvalidParams, message, data);
}

export function methodNotFound(message: string): McpError {
  return new McpError(ErrorCode.MethodNotFound, message);
}

export function taskNotFound(taskId: string): McpError {
  // One answer for unknown, expired and foreign ids, so ids of other principals cannot be probed.
  return invalidParams(`Failed to retrieve task: Task not found (unknown, expired, or not yours): ${taskId}`);
}

export function tooManyTasks(message: string, retryAfterMs?: number): McpError {
  return new McpError(TOO_MANY_TASKS, message, retryAfterMs === undefined ? undefined : { retryAfterMs });
}

/** Any error thrown while serving a request → the McpError the client should see. */
export function toMcpError(e: unknown): McpError {
  if (e instanceof McpError) return e;
  if (isRuntimeError(e)) {
    switch (e.code) {
      case 'task_not_found':
        return invalidParams(`Failed to retrieve task: ${e.message}`);
      case 'task_not_cancelable':
      case 'invalid_request':
      case 'model_not_found':
      case 'unsupported_capability':
      case 'invalid_json_schema':
      case 'context_length_exceeded':
      case 'idempotency_key_reused':
      case 'invalid_last_event_id':
      case 'event_history_expired':
        return invalidParams(e.message, e.param ? { param: e.param, code: e.code } : { code: e.code });
      case 'queue_full':
        return tooManyTasks(`Server busy: ${e.message}`);
      case 'limit_exceeded':
        // A per-principal cap (runtime/shares.ts), named in data.limit as LMSP names it in its problem.
        return new McpError(TOO_MANY_TASKS, e.message, {
          code: e.code,
          limit: e.limit,
          ...(e.limit?.unit !== 'bytes' && { retryAfterMs: retryAfterMs(REFUSALS.principalLimit) }),
        });
      case 'payload_too_large':
        return invalidParams(e.message, { code: e.code, ...(e.param && { param: e.param }), limit: e.limit });
      case 'store_unwritable':
        // The runtime's message may carry an errno code; never a path. Said the way the LMSP door says it.
        return new McpError(STORE_UNWRITABLE, REFUSALS.storeUnwritable.text, {
          code: 'store_unwritable',
          retryAfterMs: retryAfterMs(REFUSALS.storeUnwritable),
        });
      default:
        return new McpError(ErrorCode.InternalError, `${e.code}: ${e.message}`);
    }
  }
  if (isBackendError(e)) {
    // A direct call's backend failure (the embed tool on a remote engine): its refusals are the caller's to fix.
    if (e.code === 'invalid_request' || e.code === 'context_length_exceeded' || e.code === 'unsupported_capability' || e.code === 'model_not_found')
      return invalidParams(e.message, { code: e.code });
    return new McpError(ErrorCode.InternalError, e.message, { code: e.code, ...(e.retryAfterMs !== undefined && { retryAfterMs: e.retryAfterMs }) });
  }
  return new McpError(ErrorCode.InternalError, e instanceof Error ? e.message : String(e));
}
