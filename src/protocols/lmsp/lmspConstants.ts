// Every LMSP name this door uses that is not settled by chapter 7 lives here, so it is cheap to rename when the
// rest of the spec is found (docs/lmsp.md). Names marked ch.7 are from the published chapter.

import { MAX_BODY_BYTES } from '../http/body';

export const LMSP_PREFIX = '/lmsp/v1';
export const LMSP_PROTOCOL = 'lmsp';
export const LMSP_VERSION = '1.0';

/** Paths below LMSP_PREFIX. */
export const PATHS = {
  capabilities: '/capabilities', // INFERENCE
  models: '/models', // INFERENCE
  responses: '/responses', // known to exist; shape INFERENCE
  /** OpenAI's chat completions, at the same base URL as /models (an OpenAI client's baseURL is LMSP_PREFIX). */
  chatCompletions: '/chat/completions',
  /** OpenAI's embeddings (a direct call, not a task: docs/embeddings.md). */
  embeddings: '/embeddings',
  /** OpenAI's Files API, for batch inputs and outputs (docs/batches.md). */
  files: '/files',
  /** OpenAI's Batch API: durable batch jobs (docs/batches.md). */
  batches: '/batches',
  /** Reranking in llama.cpp server's and vLLM's shape (a direct call like embeddings: docs/embeddings.md). */
  rerank: '/rerank',
  tasks: '/tasks', // ch.7
  changes: '/task_runtime/changes', // vendor
  counts: '/task_runtime/counts', // vendor
  cancelTasks: '/task_runtime/cancel', // vendor: cancel by filter
} as const;

/** Paths below a response's own path (`${PATHS.responses}/{response_id}`), OpenAI's names. */
export const RESPONSE_PATHS = {
  cancel: '/cancel',
  inputItems: '/input_items',
} as const;

/** Paths below a task's own path (`${PATHS.tasks}/{task_id}`). */
export const TASK_PATHS = {
  cancel: '/cancel', // ch.7
  events: '/events', // ch.7
  runNext: '/run_next', // vendor
} as const;

export const OBJECTS = {
  service: 'service',
  list: 'list',
  model: 'model',
  task: 'task', // ch.7
  taskDeleted: 'task.deleted',
  counts: 'task_runtime.counts', // vendor
  response: 'response',
  chatCompletion: 'chat.completion', // OpenAI
  chatCompletionChunk: 'chat.completion.chunk', // OpenAI
} as const;

/**
 * A chat completion's id is its task's id with this prefix instead of `task_` (`chatcmpl-abc…` is task `task_abc…`),
 * so a chat client can find the task (GET /tasks/{id}) from the id it got.
 */
export const CHAT_COMPLETION_ID_PREFIX = 'chatcmpl-';

export const TASK_TYPE_RESPONSE = 'response'; // ch.7

/** Task statuses as LMSP shows them; the runtime's input_required (an MCP notion) shows as running. */
export const LMSP_TASK_STATUSES = ['queued', 'loading', 'running', 'cancelling', 'succeeded', 'failed', 'cancelled'] as const;
export type LmspTaskStatus = (typeof LMSP_TASK_STATUSES)[number];

/** The events that end a response's stream (ch.7): the runtime's own set, which writes them. */
export { TERMINAL_EVENT_TYPES } from '../../runtime/responseEvents';

export const VENDOR_PREFIX = 'task_runtime:';
/** The vendor member of task objects (and of a task create body, where it may carry `origin`). */
export const VENDOR_MEMBER = 'task_runtime';
/** The one origin a create body may claim, and only with an editor principal's token. */
export const EDITOR_ORIGIN = 'editor';
export const EVENT_TASK_CHANGED = 'task_runtime:task.changed';

export const HEADERS = {
  idempotencyKey: 'idempotency-key', // ch.7
  idempotentReplayed: 'Idempotent-Replayed', // Stripe-style marker
  lastEventId: 'last-event-id',
  /** The OpenAI SDK retries a 409 unless the answer carries `x-should-retry: false` (docs/lmsp.md). */
  shouldRetry: 'x-should-retry',
} as const;

export const QUERY = {
  after: 'after',
  status: 'status',
  cursor: 'cursor',
  limit: 'limit',
  // GET /responses/{id} and /input_items (OpenAI's names)
  stream: 'stream',
  startingAfter: 'starting_after',
  include: 'include',
  order: 'order',
} as const;

/** Idempotency scopes: method and path of the creating route. */
export const IDEMPOTENCY_SCOPES = {
  tasks: `POST ${LMSP_PREFIX}${PATHS.tasks}`,
  responses: `POST ${LMSP_PREFIX}${PATHS.responses}`,
  chatCompletions: `POST ${LMSP_PREFIX}${PATHS.chatCompletions}`,
} as const;

/** Problem codes and their HTTP statuses (profile §9.3). */
export const CODES = {
  invalid_request: 400,
  invalid_last_event_id: 400,
  invalid_idempotency_key: 400,
  invalid_json_schema: 400,
  context_length_exceeded: 400,
  unsupported_capability: 400, // ch.7
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  task_not_found: 404, // ch.7
  response_not_found: 404,
  previous_response_not_found: 404,
  model_not_found: 404,
  method_not_allowed: 405,
  task_not_cancelable: 409, // ch.7
  task_not_deletable: 409,
  idempotency_request_in_progress: 409,
  /** A synchronous chat completion whose task was cancelled (from the editor, /tasks or MCP) before it finished. */
  task_cancelled: 409,
  event_history_expired: 410, // ch.7
  payload_too_large: 413,
  unsupported_media_type: 415,
  idempotency_key_reused: 422,
  queue_full: 429,
  limit_exceeded: 429, // vendor: a per-principal cap (runtime/shares.ts), named in the problem's `limit` member
  internal_error: 500,
  unavailable: 503,
} as const;
export type LmspCode = keyof typeof CODES;

/** In task.error of a task failed by a restart under on_restart "fail" (ch.7). */
export const SERVER_RESTARTED = 'server_restarted';

export const DEFAULTS = {
  maxBodyBytes: MAX_BODY_BYTES,
  /**
   * Items of one request's input (and parts of one item): an agent's session sends every tool call and result again
   * on each turn, hundreds in a long one (Claude Code, Codex); the body's byte cap bounds what they hold.
   */
  maxInputItems: 4096,
  maxSseStreams: 256,
  heartbeatMs: 15_000,
  listLimit: 20,
  maxListLimit: 100,
  /** on_restart of a `background: true` response unless configured (serve --background-restart, setting taskRuntime.backgroundRestartPolicy). */
  backgroundOnRestart: 'retry',
  /** GET /responses/{id}/input_items: OpenAI's default and largest page. */
  inputItemsLimit: 20,
  maxInputItemsLimit: 100,
  /**
   * How long a `store: false` response's task stays (in the task list and the editor's tree) after it ends, before it
   * is deleted; it is never retrievable through /responses (docs/lmsp.md, "store: false").
   */
  unstoredRetentionMs: 60_000,
} as const;
