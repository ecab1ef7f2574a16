// The task model shared by every door. Each door formats it in its own vocabulary.

export const TASK_STATUSES = ['queued', 'loading', 'running', 'input_required', 'cancelling', 'succeeded', 'failed', 'cancelled'] as const;
export type TaskStatus = (typeof TASK_STATUSES)[number];

/**
 * What each status is, in one table: `terminal` (it never changes again) and `cancellable` (a cancel request acts on
 * it: every unfinished status but `cancelling`, which is already stopping). Every status set below is read from it.
 */
const STATUS_TRAITS: Record<TaskStatus, { terminal: boolean; cancellable: boolean }> = {
  queued: { terminal: false, cancellable: true },
  loading: { terminal: false, cancellable: true },
  running: { terminal: false, cancellable: true },
  input_required: { terminal: false, cancellable: true },
  cancelling: { terminal: false, cancellable: false },
  succeeded: { terminal: true, cancellable: false },
  failed: { terminal: true, cancellable: false },
  cancelled: { terminal: true, cancellable: false },
};

export function isTerminal(status: TaskStatus): boolean {
  return STATUS_TRAITS[status].terminal;
}

export function isCancellable(status: TaskStatus): boolean {
  return STATUS_TRAITS[status].cancellable;
}

export const TERMINAL_STATUSES: readonly TaskStatus[] = TASK_STATUSES.filter(isTerminal);
/** Statuses of unfinished tasks (the scheduler's and recovery's working set). */
export const ACTIVE_STATUSES: readonly TaskStatus[] = TASK_STATUSES.filter((s) => !isTerminal(s));
/** Statuses a cancel request acts on. */
export const CANCELLABLE_STATUSES: readonly TaskStatus[] = TASK_STATUSES.filter(isCancellable);

export const TASK_ORIGINS = ['lmsp', 'mcp', 'editor'] as const;
export type TaskOrigin = (typeof TASK_ORIGINS)[number];

export const RESTART_POLICIES = ['fail', 'retry', 'resume'] as const;
export type RestartPolicy = (typeof RESTART_POLICIES)[number];

/** RFC 9457 problem object plus a machine-readable `code` (LMSP task.error). */
export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: string;
  instance?: string;
  param?: string | null;
  /**
   * Only with code `request_error`: the protocol-level error the backend ended the request with (a JSON-RPC style
   * `{code, message, data?}`; backend.ts `RequestError`). Doors answer it as an error response of their protocol
   * rather than as a result (MCP: this very JSON-RPC error). Kept in the store with the problem.
   */
  requestError?: RequestErrorObject;
}

/** A protocol-level error as a backend reported it: JSON-RPC's error object shape. */
export interface RequestErrorObject {
  code: number;
  message: string;
  data?: unknown;
}

/**
 * Something a task asks its client for while it runs. Opaque to the runtime; the MCP door passes it on as is, so a
 * backend gives the MCP request object: `{method: "elicitation/create" | "sampling/createMessage" | "roots/list",
 * params}`.
 */
export interface InputRequest {
  method: string;
  params?: Record<string, unknown>;
}

/** A client's answer to one input request (MCP: an ElicitResult, CreateMessageResult or ListRootsResult). */
export type InputResponse = Record<string, unknown>;

/**
 * One round of input: the requests a task made at once and the answers received so far, stored with the task
 * (tasks.input_rounds_json). Keys are `<name>.<round>`: unique for the task's whole life, so a key is never reused
 * for another request, even by a later attempt.
 */
export interface InputRound {
  /** 1-based, counted over the task's life (all attempts). */
  round: number;
  requests: Record<string, InputRequest>;
  responses: Record<string, InputResponse>;
  /** What the backend said it waits for (shown in the status message). */
  message?: string;
}

/** `text.format` of a Responses request. */
export type ResponseTextFormat =
  | { type: 'text' }
  | { type: 'json_object' }
  | { type: 'json_schema'; name: string; schema: Record<string, unknown>; strict?: boolean; description?: string };

/**
 * The vendor member of a Responses request (`task_runtime`): sampling the Responses API has no field for, named as
 * OpenAI's chat completions and llama.cpp name them, and whether max_output_tokens is an "up to" budget.
 */
export interface ResponseSamplingExtras {
  seed?: number;
  stop?: string | string[];
  top_k?: number;
  min_p?: number;
  repeat_penalty?: number;
  frequency_penalty?: number;
  presence_penalty?: number;
  /**
   * max_output_tokens is an "up to" budget: capped to the room the prompt leaves in the context instead of refused
   * (400 context_length_exceeded) when prompt + max_output_tokens do not fit. Doors set it for budgets the caller
   * did not give (MCP tools' defaults, the editor's chat provider); an LMSP client may too.
   */
  cap_max_output_tokens?: boolean;
  /** Not sampling: the task's priority among its principal's queued tasks (runtime/queue.ts; create's `priority` wins). */
  priority?: number;
}

/** A function tool of a Responses request (OpenAI's flat Responses shape, not chat completions' nested one). */
export interface ResponseFunctionTool {
  type: 'function';
  /** 1–64 of [A-Za-z0-9_-]. */
  name: string;
  description?: string;
  /** JSON Schema of the arguments object (absent: any object). */
  parameters?: Record<string, unknown>;
  strict?: boolean;
}

/**
 * A freeform tool (OpenAI `custom`): the model writes raw text, not a JSON object. `format.grammar` is accepted but
 * not enforced (docs/lmsp.md, "Codex dialect").
 */
export interface ResponseCustomTool {
  type: 'custom';
  name: string;
  description?: string;
  format?: { type: 'text' } | { type: 'grammar'; syntax: 'lark' | 'regex'; definition: string };
}

/** A group of tools under one name (Codex's `namespace`): the model sees each as `<namespace>__<name>`. */
export interface ResponseNamespaceTool {
  type: 'namespace';
  name: string;
  description?: string;
  tools: Array<ResponseFunctionTool | ResponseCustomTool>;
}

/** A tool type this runtime cannot run (OpenAI's hosted tools): kept as sent, left out of what the model sees. */
export interface ResponseHostedTool {
  type: string;
  [key: string]: unknown;
}

export type ResponseTool = ResponseFunctionTool | ResponseCustomTool | ResponseNamespaceTool | ResponseHostedTool;

/**
 * `tool_choice` of a Responses request. A function of a namespace is named by `namespace` + its inner name, or by
 * its flattened name `<namespace>__<name>`.
 */
export type ResponseToolChoice = 'none' | 'auto' | 'required' | { type: 'function' | 'custom'; name: string; namespace?: string };

/** `reasoning` of a Responses request. */
export interface ResponseReasoning {
  /** `xhigh` runs as `high` (the highest a local control has). */
  effort?: 'none' | 'minimal' | 'low' | 'medium' | 'high' | 'xhigh';
  summary?: 'auto' | 'concise' | 'detailed' | null;
}

/** A Responses-style request, already validated by the door that accepted it; stored with the task as it is. */
export interface ResponseRequest {
  model?: string;
  input: string | unknown[];
  instructions?: string;
  max_output_tokens?: number;
  temperature?: number;
  top_p?: number;
  /** With `include: ["message.output_text.logprobs"]`: alternatives per token (0–20). */
  top_logprobs?: number;
  include?: string[];
  /** `verbosity` is accepted and echoed; a local model has no control for it. */
  text?: { format?: ResponseTextFormat; verbosity?: 'low' | 'medium' | 'high' };
  task_runtime?: ResponseSamplingExtras;
  /** Function tools the model may call (input items `function_call` / `function_call_output` carry a round trip). */
  tools?: ResponseTool[];
  tool_choice?: ResponseToolChoice;
  /** Whether the model may make more than one call in one response (default true, as OpenAI). */
  parallel_tool_calls?: boolean;
  reasoning?: ResponseReasoning;
  /** OpenAI background mode: the request was made as a background response (the task is the same either way). */
  background?: boolean;
  /** The stored response this one continues (its input and output come before `input`); resolved at create. */
  previous_response_id?: string;
  metadata?: Record<string, string>;
  /**
   * OpenAI's cache-routing key (Codex CLI sends its thread id; the Messages door sets Claude Code's session id): the
   * backend keeps this conversation's KV where the key last ran (a local sequence, a remote pool's endpoint).
   */
  prompt_cache_key?: string;
  [key: string]: unknown;
}

/** The `include` value that asks for log-probabilities of the output text. */
export const INCLUDE_OUTPUT_LOGPROBS = 'message.output_text.logprobs';

/** The `include` value that asks reasoning items to carry their sealed text (`encrypted_content`, store: false). */
export const INCLUDE_REASONING_ENCRYPTED = 'reasoning.encrypted_content';

export interface Usage {
  input_tokens: number;
  output_tokens: number;
  total_tokens: number;
  /** Input tokens a backend did not evaluate again (a kept prompt prefix). */
  input_tokens_details?: { cached_tokens: number };
  /**
   * Vendor member: speculative decoding's drafted tokens and of those the accepted ones (docs/speculative-decoding.md);
   * only when the generation drafted any.
   */
  task_runtime?: { speculative: { drafted: number; accepted: number } };
  /**
   * Of output_tokens, those of reasoning items (OPENAI-WIRE §3.2); present when there were some and every one was
   * counted (not after a resume that had delivered reasoning before the restart).
   */
  output_tokens_details?: { reasoning_tokens: number };
}

export interface TaskRecord {
  id: string;
  responseId: string;
  origin: TaskOrigin;
  /** Who created it; every lookup through a door is filtered by it. */
  principal: string;
  title: string;
  model: string;
  request: ResponseRequest;
  status: TaskStatus;
  statusMessage: string | null;
  /** Unix milliseconds. */
  createdAt: number;
  updatedAt: number;
  onRestart: RestartPolicy;
  /** 1 for the first run; +1 for each retry after a restart. */
  attempt: number;
  /** Retention from creation, ms; null = unlimited. */
  ttlMs: number | null;
  /** createdAt + ttlMs, or null. */
  expiresAt: number | null;
  /** Unix ms after which a non-terminal task fails with `deadline_exceeded`; null = none. */
  deadlineAt: number | null;
  /** The Responses object, set when terminal (partial on failed/cancelled), else null. */
  response: Record<string, unknown> | null;
  /** Problem object when failed, else null. */
  error: Problem | null;
  usage: Usage | null;
  /** Output tokens generated so far in the current attempt. */
  outputTokens: number;
  /** Door-specific data recorded at creation (e.g. MCP tool name and arguments). */
  meta: Record<string, unknown>;
  /** Order among its principal's queued tasks, higher first (runtime/queue.ts: range, aging; "run next" sets the top). */
  priority: number;
  /**
   * While `input_required`: the requests of the current input round not answered yet, by key (never empty then);
   * else null. Durable: written in the same batch as the status change (see InputRound).
   */
  inputRequests: Record<string, InputRequest> | null;
  /** Next event sequence number to assign. */
  nextSeq: number;
  /** Oldest sequence number still stored (events before it were purged). */
  oldestSeq: number;
}

export interface TaskEvent {
  taskId: string;
  seq: number;
  /** LMSP/Responses event type, e.g. `response.output_text.delta` or `task_runtime:task.status`. */
  type: string;
  /** Payload without `type` and `sequence_number`. */
  data: Record<string, unknown>;
  createdAt: number;
}

/** LMSP ch.7 transitions plus MCP's input_required, in one place. */
const TRANSITIONS: Record<TaskStatus, readonly TaskStatus[]> = {
  queued: ['loading', 'cancelled', 'failed'],
  loading: ['running', 'cancelling', 'failed'],
  running: ['succeeded', 'failed', 'cancelling', 'input_required'],
  input_required: ['running', 'succeeded', 'failed', 'cancelling'],
  cancelling: ['cancelled'],
  succeeded: [],
  failed: [],
  cancelled: [],
};

export function canTransition(from: TaskStatus, to: TaskStatus): boolean {
  return TRANSITIONS[from].includes(to);
}

export function allowedTransitions(from: TaskStatus): readonly TaskStatus[] {
  return TRANSITIONS[from];
}
