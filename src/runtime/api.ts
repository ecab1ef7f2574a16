// What the doors (LMSP, MCP, editor) may call. TaskRuntime implements it; doors depend on this interface only.
import type { LoadOptions, ModelInfo } from './backend';
import type { EmbedOutcome, EmbedParams, RerankOutcome, RerankParams } from './embeddings';
import type { FileListQuery } from './batches/batchFiles';
import type { BatchListQuery, CreateBatchParams } from './batches/batchJobs';
import type { BatchRecord, FilePurpose, FileRecord } from './batches/types';
import type { MetricsSnapshot } from './metrics';
import type { QueueInfo } from './queue';
import type { ResponseRequest, RestartPolicy, TaskEvent, TaskOrigin, TaskRecord, TaskStatus } from './task';

export interface CreateTaskParams {
  origin: TaskOrigin;
  principal: string;
  input: ResponseRequest;
  onRestart?: RestartPolicy;
  /**
   * Retention from creation, ms (MCP's ttl): the task is deleted once it passes, whatever its status. Clamped to
   * [1 s, maxTtlMs]. undefined/null = no ttl; the retention rules for terminal tasks apply instead.
   */
  ttlMs?: number | null;
  /** Fail the task with `deadline_exceeded` if not terminal this many ms after creation. */
  deadlineMs?: number;
  /**
   * Order among the principal's own queued tasks, higher first: an integer from -10 to 10, default 0 (runtime/queue.ts;
   * waiting raises it). Throws invalid_request outside the range.
   */
  priority?: number;
  /** Short human title; defaults to an excerpt of the prompt. */
  title?: string;
  meta?: Record<string, unknown>;
  /** Idempotent creation: same (principal, scope, key) and fingerprint returns the first task. */
  idempotency?: { scope: string; key: string; fingerprint: string };
}

export interface CreateTaskResult {
  task: TaskRecord;
  /** True when an idempotency key matched an earlier create and no new task was made. */
  replayed: boolean;
}

export interface ListTasksQuery {
  /** Only tasks of this principal (undefined = all, for the editor). */
  principal?: string;
  statuses?: readonly TaskStatus[];
  origin?: TaskOrigin;
  /** Opaque cursor from a previous page. Throws invalid_request when malformed. */
  cursor?: string;
  /** 1..1000, default 50. Newest first. */
  limit?: number;
}

/** Which of a principal's tasks a cancel by filter stops. */
export interface CancelFilter {
  /** Whose tasks (undefined = every principal's, for the editor). */
  principal?: string;
  /** `queued`: waiting ones; `running`: loading, running or waiting for input. */
  statuses: ReadonlyArray<'queued' | 'running'>;
  /** Only tasks of this model (as the task names it, or as it was resolved). */
  model?: string;
  reason?: string;
}

export interface ListTasksPage {
  tasks: TaskRecord[];
  nextCursor: string | null;
}

export interface Subscription {
  close(): void;
}

export interface RuntimeLimits {
  onRestart: RestartPolicy[];
  eventHistorySeconds: number;
  taskRetentionSeconds: number;
  idempotencyKeyTtlSeconds: number;
  maxConcurrentTasks: number;
  maxQueuedTasks: number;
  /** Unfinished tasks one principal may have queued or running, all doors together (runtime/shares.ts). */
  maxQueuedTasksPerPrincipal: number;
  /** Bytes one principal may have stored: its tasks' rows and events (runtime/shares.ts). */
  maxStoredBytesPerPrincipal: number;
  defaultTtlMs: number;
  maxTtlMs: number;
}

export interface TaskCounts {
  byStatus: Record<TaskStatus, number>;
  total: number;
}

/** The Batch API's files: each principal sees only its own (another's id is not found). */
export interface FilesApi {
  /** Stores an upload durably; refused past the size and per-principal limits (batches/types.ts BATCH_LIMITS). */
  create(principal: string, purpose: FilePurpose, filename: string, bytes: Buffer): FileRecord;
  get(id: string, principal: string): FileRecord | undefined;
  list(q: FileListQuery): { files: FileRecord[]; hasMore: boolean };
  /** Throws not_found. */
  content(id: string, principal: string): Buffer;
  /** Throws not_found, or invalid_request while an unfinished batch reads it. */
  delete(id: string, principal: string): FileRecord;
}

/** Batch jobs: a file of request lines run as durable work (batches/batchJobs.ts). */
export interface BatchesApi {
  create(p: CreateBatchParams): BatchRecord;
  get(id: string, principal: string): BatchRecord | undefined;
  list(q: BatchListQuery): { batches: BatchRecord[]; hasMore: boolean };
  /** Throws not_found; a batch already ending or ended is returned as it is. */
  cancel(id: string, principal: string): BatchRecord;
}

export interface TaskRuntimeApi {
  readonly files: FilesApi;
  readonly batches: BatchesApi;
  readonly limits: RuntimeLimits;
  /** Persists the task and its first event (`response.created`) before returning. */
  createTask(params: CreateTaskParams): CreateTaskResult;
  /**
   * The same create, resolved once it is durable; meanwhile the task may already start on the backend (its create
   * and start batches share one background sync). Nothing about it is visible before the promise resolves. Doors
   * use this: the answer waits for durability, the model does not.
   */
  createTaskAsync(params: CreateTaskParams): Promise<CreateTaskResult>;
  /** undefined when unknown, expired, or owned by another principal. */
  getTask(id: string, principal?: string): TaskRecord | undefined;
  getTaskByResponseId(responseId: string, principal?: string): TaskRecord | undefined;
  listTasks(query: ListTasksQuery): ListTasksPage;
  countTasks(principal?: string): TaskCounts;
  /** Aggregate metrics over every principal (counts, sums, histogram buckets; nothing per task). */
  metrics(): MetricsSnapshot;
  /**
   * queued → cancelled at once; loading/running/input_required → cancelling (→ cancelled when the backend stops);
   * cancelling/cancelled → unchanged. Throws task_not_found / task_not_cancelable (succeeded, failed).
   */
  cancelTask(id: string, principal?: string, reason?: string): TaskRecord;
  /**
   * Answers input requests of an `input_required` task (`responses` by the keys in `task.inputRequests`). Keys that
   * are not open in the current round (unknown, already answered, superseded) are ignored, and so is a task in any
   * other status. Partial answers are recorded and the task stays `input_required` with the rest; with the last one
   * it runs again: the waiting run continues, or (after a restart, when no run waits) a new attempt replays every
   * answered round. Durable before it returns. Returns the task as it is now. Throws task_not_found, and
   * invalid_request when an answer to an open key is not an object (nothing is recorded then).
   */
  provideInput(id: string, responses: Record<string, unknown>, principal?: string): TaskRecord;
  /** Deletes a terminal task with its events. Throws task_not_found / task_not_deletable. */
  deleteTask(id: string, principal?: string): void;
  /** Resolves with the terminal task; rejects with an AbortError when signal aborts, task_not_found if deleted. */
  waitForTerminal(id: string, signal?: AbortSignal): Promise<TaskRecord>;
  /**
   * Stored events with seq > afterSeq (afterSeq undefined = from the first). Throws task_not_found,
   * event_history_expired (older than retained), invalid_last_event_id (afterSeq >= nextSeq or < -1).
   */
  readEvents(id: string, afterSeq?: number, principal?: string): TaskEvent[];
  /**
   * Replays stored events after afterSeq synchronously through onEvent, then delivers live ones in order,
   * with no gap and no duplicate. Same errors as readEvents.
   */
  subscribe(id: string, afterSeq: number | undefined, onEvent: (event: TaskEvent) => void, principal?: string): Subscription;
  /** Every committed change of any task (status, progress, deletion: `deleted` true). */
  onTaskChange(listener: (task: TaskRecord, deleted: boolean) => void): Subscription;
  /**
   * Where a queued task stands: its place in the order its capacity group will start tasks (every principal's
   * counted) and its expected start from measured run times; null when it is not waiting in the queue.
   */
  queueInfo(id: string): QueueInfo | null;
  /**
   * A queued task goes first among its principal's queued tasks, with the highest priority (stored). Any other
   * status: returned unchanged. Throws task_not_found.
   */
  runNext(id: string, principal?: string): TaskRecord;
  /**
   * Cancels every task of the filter in one durable batch: queued ones at once, running ones → cancelling. Returns
   * the tasks it changed, as they are now (none: an empty list; a repeat finds nothing left to change).
   */
  cancelTasks(filter: CancelFilter): TaskRecord[];
  listModels(): ModelInfo[];
  /**
   * Tokens `text` takes in the tokenizer of `model` (undefined = the default), or null when that tokenizer is not at
   * hand (the model is not loaded, or is served by a remote engine): the caller estimates then. Never loads a model.
   */
  countTokens(model: string | undefined, text: string): number | null;
  /**
   * Tokens the prompt of `request` takes as its model would evaluate it (its chat template, tools and all), or null
   * when that is not at hand (the model is not loaded, or is served by a remote engine). Never loads a model.
   */
  countPromptTokens(request: ResponseRequest): number | null;
  readonly supportsResume: boolean;
  close(): Promise<void>;

  /**
   * Loads a model on the backend (downloading it first when it is a URI) ahead of any task: `model` as a request
   * names it, undefined = the default. Resolves with the model as listModels shows it then. Throws model_not_found
   * for a model the backend does not know (nothing is loaded); rejects with the backend's AbortError when `signal`
   * aborts.
   */
  loadModel(model: string | undefined, options?: LoadOptions): Promise<ModelInfo>;

  /**
   * Embeds the inputs with `model` (undefined = the default) as a direct call: nothing is stored (runtime/
   * embeddings.ts). Throws model_not_found; unsupported_capability (param `model`) for a model whose backend serves
   * no embeddings; invalid_request / context_length_exceeded (param `input` or `input.N`) for an input the model
   * cannot take; limit_exceeded when the principal has too many calls in flight. Rejects with an AbortError when
   * `signal` aborts.
   */
  embed(params: EmbedParams): Promise<EmbedOutcome>;

  /**
   * Scores each document's relevance to the query with `model` (undefined = the default), a direct call like embed
   * (and counted with it against the principal's calls in flight). Throws model_not_found; unsupported_capability
   * (param `model`) for a model that cannot rank; context_length_exceeded (param `documents.N`) for a pair too long;
   * limit_exceeded. Rejects with an AbortError when `signal` aborts.
   */
  rerank(params: RerankParams): Promise<RerankOutcome>;
}
