// Refusals every door words alike: what a client is told and how long it is asked to wait, one row per condition.
// Each door renders a row in its own form (LMSP and Anthropic: a problem with Retry-After in seconds; MCP: a
// JSON-RPC error with `retryAfterMs` in its data), so a client learns the same thing through any door.
export interface Refusal {
  /** Told to the client as is (no paths, no secrets); absent where the runtime's own message is told. */
  text?: string;
  /** How long to wait before retrying; absent where waiting does not help. */
  retryAfterSeconds?: number;
}

export const REFUSALS = {
  /** The task store cannot be written; the request changed nothing. */
  storeUnwritable: {
    text: 'The server cannot write its task store (disk full or not writable); nothing was changed. Retry later.',
    retryAfterSeconds: 1,
  },
  /** The runtime is closing or its store is locked. */
  unavailable: { text: 'The service is unavailable; retry shortly.', retryAfterSeconds: 1 },
  shuttingDown: { text: 'The server is shutting down.', retryAfterSeconds: 1 },
  /** The door's shared stream slots are all taken. */
  streamsFull: { text: 'Too many open event streams; retry shortly.', retryAfterSeconds: 1 },
  /** The runtime's queue is full (RuntimeError queue_full). */
  queueFull: { retryAfterSeconds: 5 },
  /** A per-principal cap on unfinished tasks or open streams (stored bytes wait for a delete: no row). */
  principalLimit: { retryAfterSeconds: 5 },
} as const satisfies Record<string, Refusal>;

/** A row's wait as an HTTP Retry-After header. */
export function retryAfterHeader(r: Refusal): Record<string, string> {
  return r.retryAfterSeconds === undefined ? {} : { 'Retry-After': String(r.retryAfterSeconds) };
}

/** A row's wait in milliseconds (MCP's `retryAfterMs`). */
export function retryAfterMs(r: Refusal): number | undefined {
  return r.retryAfterSeconds === undefined ? undefined : r.retryAfterSeconds * 1000;
}
