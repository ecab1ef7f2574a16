// Errors the runtime raises for a door to translate into its own wire form (problem+json, JSON-RPC error).

export type RuntimeErrorCode =
  | 'task_not_found'
  /** A file or batch of the Batch API that does not exist (or is another principal's). */
  | 'not_found'
  | 'task_not_cancelable'
  | 'task_not_deletable'
  | 'event_history_expired'
  | 'invalid_last_event_id'
  | 'idempotency_key_reused'
  | 'model_not_found'
  | 'unsupported_capability'
  | 'invalid_request'
  | 'invalid_json_schema'
  | 'context_length_exceeded'
  | 'queue_full'
  | 'limit_exceeded'
  | 'payload_too_large'
  | 'store_locked'
  | 'store_unwritable'
  | 'store_corrupt'
  | 'runtime_closed';

/**
 * The per-principal limit a refusal is about (runtime/shares.ts), for doors to name it in their own form: `name` as
 * the wire shows it (snake_case), `max` the configured cap, `current` what the caller holds now, `unit` tasks,
 * streams, bytes or requests (calls in flight).
 */
export interface LimitInfo {
  name: string;
  max: number;
  current: number;
  unit: 'tasks' | 'streams' | 'bytes' | 'requests';
}

export class RuntimeError extends Error {
  constructor(
    readonly code: RuntimeErrorCode,
    message: string,
    readonly param?: string,
    /** With limit_exceeded / payload_too_large: which per-principal limit refused the request. */
    readonly limit?: LimitInfo,
  ) {
    super(message);
    this.name = 'RuntimeError';
  }
}

export function isRuntimeError(e: unknown, code?: RuntimeErrorCode): e is RuntimeError {
  return e instanceof RuntimeError && (code === undefined || e.code === code);
}

/** Codes whose messages describe the caller's request (safe to show); the others may name files and are replaced. */
export const CLIENT_FACING_CODES: ReadonlySet<RuntimeErrorCode> = new Set<RuntimeErrorCode>([
  'task_not_found',
  'not_found',
  'task_not_cancelable',
  'task_not_deletable',
  'event_history_expired',
  'invalid_last_event_id',
  'idempotency_key_reused',
  'model_not_found',
  'unsupported_capability',
  'invalid_request',
  'invalid_json_schema',
  'context_length_exceeded',
  'queue_full',
  'limit_exceeded',
  'payload_too_large',
]);
