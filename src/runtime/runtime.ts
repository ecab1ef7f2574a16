// The task runtime: one durable store, one scheduler, every door's operations.
import { checkRequest } from './requestFields';
import { join } from 'node:path';
import { setImmediate as nextTurn } from 'node:timers/promises';
import type {
  CancelFilter,
  CreateTaskParams,
  CreateTaskResult,
  ListTasksPage,
  ListTasksQuery,
  RuntimeLimits,
  Subscription,
  TaskCounts,
  TaskRuntimeApi,
} from './api';
import { EmbeddingCalls, type EmbedOutcome, type EmbedParams, type RerankOutcome, type RerankParams } from './embeddings';
import { RequestRefusedError, type LoadOptions, type ModelBackend, type ModelInfo } from './backend';
import { RuntimeError } from './errors';
import { TaskEventBus } from './eventBus';
import { checkInputResponse, unansweredKeys } from './input';
import { RuntimeMetrics, type MetricsSnapshot } from './metrics';
import { recoverTasks, type RecoveryOutcome } from './recovery';
import { generateRequestOf, titleOf } from './responses';
import { sweep } from './retention';
import { checkPriority, PRIORITY, type QueueInfo } from './queue';
import { Scheduler, type BackendRetryPolicy } from './scheduler';
import { DEFAULT_MAX_QUEUED_PER_PRINCIPAL, DEFAULT_MAX_STORED_BYTES_PER_PRINCIPAL, StoredBytesMeter, tooManyQueued } from './shares';
import { DurableDatabase, type DatabaseOptions, type WriteOp } from './store/database';
import { DataDirLock } from './store/lock';
import { TaskStore } from './taskStore';
import { newTaskRecord } from './newTask';
import {
  TASK_STATUSES,
  isTerminal,
  type InputResponse,
  type ResponseRequest,
  type RestartPolicy,
  type TaskEvent,
  type TaskRecord,
  type TaskStatus,
} from './task';
import { TaskTransitions } from './transitions';
import { outboxOps, WebhookWorker, type WebhookOptions } from './webhooks';
import { BatchFiles, type FileListQuery } from './batches/batchFiles';
import { BatchJobs, batchItemOps, type BatchListQuery, type CreateBatchParams } from './batches/batchJobs';
import type { BatchEndpoints, FilePurpose } from './batches/types';
import type { BatchesApi, FilesApi } from './api';

export interface RuntimeOptions {
  dataDir: string;
  backend: ModelBackend;
  limits?: Partial<RuntimeLimits>;
  log?: (msg: string) => void;
  /** Batch window for token deltas (default 16 ms). */
  deltaFlushMs?: number;
  /** How often retention runs (default 60 s). */
  sweepIntervalMs?: number;
  snapshotEveryMs?: number;
  /** Snapshot only when re-evaluating the uncovered context would take longer (default 1000 ms; 0 = always). */
  snapshotMinReevalMs?: number;
  /** Retries while a backend is unavailable (remote engine unreachable); see `BackendRetryPolicy`. */
  backendRetry?: Partial<BackendRetryPolicy>;
  /** Waiting this long raises a queued task's priority one level (runtime/queue.ts; default 10 s, 0 = never). */
  priorityAgingMs?: number;
  database?: DatabaseOptions;
  /**
   * The clock task times come from, in ms since the epoch (default Date.now): creation and update stamps, ttl expiry,
   * deadlines, retention, idempotency-key age. Timers still run on real time; a clock that stands still means no
   * deadline or ttl is ever reached.
   */
  now?: () => number;
  /**
   * How long open() waits for a live owner of the data directory on this host to exit before refusing with
   * store_locked (default 0: refused at once; `serve` waits SERVE_LOCK_WAIT_MS for a process killed a moment ago).
   */
  lockWaitMs?: number;
  /** Completion webhooks (webhooks.ts): each principal's endpoint and the sender; absent: no task owes a delivery. */
  webhooks?: WebhookOptions;
  /**
   * The endpoints batch jobs may target (runtime/batches; the OpenAI door's `/v1/responses`, `/v1/chat/completions`,
   * `/v1/embeddings`). Absent: every batch create is refused naming `endpoint`, and unfinished batches wait.
   */
  batchEndpoints?: BatchEndpoints;
}

/**
 * The terminal-batch hook of TaskTransitions: a finished task's webhook outbox row (webhooks.ts) and, for a batch
 * item's task, its item's outcome (batches/batchJobs.ts), durable together with the ending.
 */
function finishedHook(options: RuntimeOptions, db: DurableDatabase, owed: () => void): (next: TaskRecord, now: number) => WriteOp[] {
  const webhooks = options.webhooks;
  const endpoints = options.batchEndpoints ?? {};
  return (next, now) => {
    const ops = batchItemOps(db, endpoints, next);
    if (!webhooks) return ops;
    const outbox = outboxOps(webhooks.endpoints, next, now);
    if (outbox.length) owed();
    return [...ops, ...outbox];
  };
}

export const DEFAULT_LIMITS: RuntimeLimits = {
  onRestart: ['fail', 'retry'],
  eventHistorySeconds: 3600,
  taskRetentionSeconds: 86_400,
  idempotencyKeyTtlSeconds: 86_400,
  maxConcurrentTasks: 1,
  maxQueuedTasks: 1000,
  maxQueuedTasksPerPrincipal: DEFAULT_MAX_QUEUED_PER_PRINCIPAL,
  maxStoredBytesPerPrincipal: DEFAULT_MAX_STORED_BYTES_PER_PRINCIPAL,
  defaultTtlMs: 3_600_000,
  maxTtlMs: 86_400_000,
};

function encodeCursor(t: TaskRecord): string {
  return Buffer.from(JSON.stringify([t.createdAt, t.id])).toString('base64url');
}

function decodeCursor(cursor: string): { createdAt: number; id: string } {
  try {
    if (!/^[A-Za-z0-9_-]{1,200}$/.test(cursor)) throw new Error();
    const v = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (!Array.isArray(v) || typeof v[0] !== 'number' || typeof v[1] !== 'string') throw new Error();
    return { createdAt: v[0], id: v[1] };
  } catch {
    throw new RuntimeError('invalid_request', 'The cursor is not valid.', 'cursor');
  }
}

export class TaskRuntime implements TaskRuntimeApi {
  readonly limits: RuntimeLimits;
  private readonly bus = new TaskEventBus();
  private readonly collector = new RuntimeMetrics();
  private readonly transitions: TaskTransitions;
  private readonly scheduler: Scheduler;
  private readonly storedBytes: StoredBytesMeter;
  private readonly sweepTimer: NodeJS.Timeout;
  private readonly webhooks: WebhookWorker | undefined;
  private readonly embeddings: EmbeddingCalls;
  private readonly batchJobs: BatchJobs;
  private readonly batchFiles: BatchFiles;
  /** The Batch API's files (OpenAI's /v1/files) and jobs (/v1/batches): docs/batches.md. */
  readonly files: FilesApi;
  readonly batches: BatchesApi;
  /** A terminal batch wrote an outbox row: the next change told pumps the webhook worker. */
  private webhookOwed = false;
  private queueOrder: number;
  private closed = false;
  private readonly now: () => number;

  private constructor(
    private readonly options: RuntimeOptions,
    private readonly store: TaskStore,
    private readonly lock: DataDirLock,
    readonly recovery: RecoveryOutcome,
  ) {
    this.limits = { ...DEFAULT_LIMITS, ...options.limits };
    this.embeddings = new EmbeddingCalls(options.backend, undefined, (model, outcome) => this.collector.embeddingCall(model, outcome));
    if (options.backend.supportsResume() && !this.limits.onRestart.includes('resume')) {
      this.limits.onRestart = [...this.limits.onRestart, 'resume'];
    }
    this.now = options.now ?? Date.now;
    this.bus.onTaskChange((task, deleted) => this.collector.taskChanged(task, deleted));
    store.database.onSync((ms) => this.collector.syncTook(ms));
    this.storedBytes = new StoredBytesMeter((principal) => store.storedBytes(principal));
    this.transitions = new TaskTransitions(
      store,
      this.bus,
      this.now,
      (principal, bytes) => this.storedBytes.added(principal, bytes),
      finishedHook(options, store.database, () => (this.webhookOwed = true)),
    );
    if (options.webhooks) {
      const worker = new WebhookWorker(store.database, this.transitions, this.now, options.webhooks, options.log);
      this.webhooks = worker;
      // Told once the terminal batch is durable: the delivery starts right away.
      this.bus.onTaskChange(() => {
        if (!this.webhookOwed) return;
        this.webhookOwed = false;
        worker.pump();
      });
    }
    this.scheduler = new Scheduler({
      now: this.now,
      store,
      transitions: this.transitions,
      backend: options.backend,
      dataDir: options.dataDir,
      maxConcurrentPerModel: this.limits.maxConcurrentTasks,
      deltaFlushMs: options.deltaFlushMs,
      snapshotEveryMs: options.snapshotEveryMs,
      snapshotMinReevalMs: options.snapshotMinReevalMs,
      backendRetry: options.backendRetry,
      priorityAgingMs: options.priorityAgingMs,
      log: options.log,
    });
    this.queueOrder = store.maxQueueOrder();
    this.batchFiles = new BatchFiles(store.database, options.dataDir, this.now);
    this.batchJobs = this.newBatchJobs();
    this.files = this.filesApi();
    this.batches = this.batchesApi();
    this.sweepTimer = setInterval(() => this.sweepNow(), options.sweepIntervalMs ?? 60_000);
    this.sweepTimer.unref();
  }

  static async open(options: RuntimeOptions): Promise<TaskRuntime> {
    const { mkdirSync } = await import('node:fs');
    mkdirSync(options.dataDir, { recursive: true });
    const onLost = () => options.log?.('runtime: lost the data directory lock');
    const lock = options.lockWaitMs
      ? await DataDirLock.acquireWaiting(options.dataDir, onLost, { maxMs: options.lockWaitMs })
      : DataDirLock.acquire(options.dataDir, onLost);
    let db: DurableDatabase;
    try {
      db = await DurableDatabase.open(join(options.dataDir, 'store'), { log: options.log, ...options.database });
    } catch (e) {
      lock.release();
      throw e;
    }
    // A turn of the event loop between the restore and the recovery: in the editor both share the extension host's
    // thread, and together they were one block of start-up (none over 20 ms).
    await nextTurn();
    const store = new TaskStore(db);
    const now = options.now ?? Date.now;
    const recovery = recoverTasks(
      store,
      new TaskTransitions(
        store,
        new TaskEventBus(),
        now,
        undefined,
        finishedHook(options, db, () => undefined),
      ),
      options.backend,
    );
    const runtime = new TaskRuntime(options, store, lock, recovery);
    // After recovery every unfinished task is queued, or waits for its client's input (recovery.ts).
    for (const t of store.activeTasks()) {
      if (t.status === 'input_required') runtime.scheduler.park(t);
      else runtime.scheduler.enqueue(t, recovery.resumePoints.get(t.id));
    }
    runtime.sweepNow();
    // Batches pick up where they were: the items recovery re-queued stay theirs, the rest start again.
    runtime.batchJobs.start();
    // Deliveries owed from before (a crash, a restart, recovery's endings) start now.
    runtime.webhooks?.pump();
    return runtime;
  }

  get supportsResume(): boolean {
    return this.options.backend.supportsResume();
  }

  /** Records who owns the store (e.g. the endpoint url) in the data-directory lock, for other processes. */
  setOwnerInfo(info: Record<string, unknown>): void {
    this.lock.setInfo(info);
  }

  get storeReport() {
    return this.store.database.report;
  }

  /** Completion webhooks owed and not yet delivered or given up (0 without webhooks). */
  get pendingWebhooks(): number {
    return this.webhooks?.pending ?? 0;
  }

  /** Write batches and journal syncs since open (benchmark, tests: group commit shows as fewer syncs than batches). */
  get storeStats(): { batches: number; syncs: number; deferred: number } {
    return { ...this.store.database.stats };
  }

  // ---------------- creation ----------------

  createTask(p: CreateTaskParams): CreateTaskResult {
    const planned = this.planCreate(p);
    if (!('ops' in planned)) return planned;
    this.transitions.create(planned.task, planned.queueOrder, { extraOps: planned.ops });
    this.collector.taskCreated(planned.task);
    this.scheduler.enqueue(planned.task);
    return { task: planned.task, replayed: false };
  }

  /**
   * Like createTask, but the task is queued (and may start on the backend) while its create batch is still being
   * synced; resolves once it is durable. Nothing about the task is visible before then: its events and the change
   * are published when the batch is durable, and reads settle pending batches first. Rejects with store_unwritable
   * if the sync fails (the task was rolled back and any run it began is stopped).
   */
  createTaskAsync(p: CreateTaskParams): Promise<CreateTaskResult> {
    return new Promise((resolve, reject) => {
      const planned = this.planCreate(p);
      if (!('ops' in planned)) return resolve(planned);
      const { task } = planned;
      this.transitions.create(task, planned.queueOrder, {
        extraOps: planned.ops,
        defer: {
          onDurable: () => {
            this.collector.taskCreated(task);
            resolve({ task, replayed: false });
          },
          onFailed: (e) => {
            this.scheduler.remove(task.id);
            this.scheduler.stop(task.id, 'shutdown');
            reject(e);
          },
        },
      });
      this.scheduler.enqueue(task);
    });
  }

  /** Checks a create and builds its batch; an idempotent replay returns the earlier task instead. */
  private planCreate(p: CreateTaskParams): CreateTaskResult | { task: TaskRecord; queueOrder: number; ops: WriteOp[] } {
    this.assertOpen();
    // A replay must answer with a durable task.
    this.store.database.settle();
    // Whoever calls: the doors checked the same already, the editor's local path did not.
    checkRequest(p.input);
    const onRestart = p.onRestart ?? 'fail';
    const priority = p.priority !== undefined ? checkPriority(p.priority) : checkPriority(p.input.task_runtime?.priority, 'task_runtime.priority');
    if (!this.limits.onRestart.includes(onRestart)) {
      throw new RuntimeError('unsupported_capability', `on_restart "${onRestart}" is not supported by this server.`, 'on_restart');
    }
    const now = this.now();
    if (p.idempotency) {
      const found = this.store.findIdempotencyKey(p.principal, p.idempotency.scope, p.idempotency.key);
      if (found && found.createdAt > now - this.limits.idempotencyKeyTtlSeconds * 1000) {
        if (found.fingerprint !== p.idempotency.fingerprint) {
          throw new RuntimeError('idempotency_key_reused', 'This Idempotency-Key was used with a different request body.');
        }
        const existing = this.store.getTask(found.taskId);
        if (existing) return { task: existing, replayed: true };
      }
    }
    const model = this.options.backend.resolveModel(p.input.model);
    if (!model) throw new RuntimeError('model_not_found', `The model "${p.input.model}" is not available.`, 'model');
    if (onRestart === 'resume' && !this.options.backend.supportsResume(model)) {
      throw new RuntimeError('unsupported_capability', `on_restart "resume" is not supported for the model "${model}".`, 'on_restart');
    }
    // The caller's own caps first (runtime/shares.ts), before the backend's costlier checks: a client over its share
    // hears about its share, not about the queue or its prompt's tokens.
    const mine = this.scheduler.unfinishedOf(p.principal);
    if (mine >= this.limits.maxQueuedTasksPerPrincipal) throw tooManyQueued(mine, this.limits.maxQueuedTasksPerPrincipal);
    // The prompt as the store keeps it (input_json).
    const bytes = Buffer.byteLength(JSON.stringify({ ...p.input, model }));
    this.storedBytes.admit(p.principal, bytes, this.limits.maxStoredBytesPerPrincipal);
    this.checkWithBackend(p.input, model, onRestart);
    if (this.scheduler.queueLength >= this.limits.maxQueuedTasks) {
      throw new RuntimeError('queue_full', `The queue is full (${this.limits.maxQueuedTasks} tasks).`);
    }
    const ttlMs = p.ttlMs === undefined || p.ttlMs === null ? null : Math.min(Math.max(Math.floor(p.ttlMs), 1000), this.limits.maxTtlMs);
    const task = newTaskRecord({
      origin: p.origin,
      principal: p.principal,
      title: p.title ?? titleOf(p.input),
      input: { ...p.input, model },
      onRestart,
      ttlMs,
      deadlineAt: p.deadlineMs ? now + Math.max(1, Math.floor(p.deadlineMs)) : null,
      meta: p.meta ?? {},
      priority,
      now,
    });
    // The idempotency key is written in the create's batch.
    const ops = p.idempotency
      ? this.store.insertIdempotencyOps(p.principal, p.idempotency.scope, p.idempotency.key, p.idempotency.fingerprint, task.id, now)
      : [];
    return { task, queueOrder: ++this.queueOrder, ops };
  }

  /** The backend's own check of what it is asked (formats, schema keywords, sampling, context), before anything is stored. */
  private checkWithBackend(input: CreateTaskParams['input'], model: string, onRestart: RestartPolicy): void {
    try {
      this.options.backend.checkRequest?.(generateRequestOf(input, model), { onRestart });
    } catch (e) {
      if (e instanceof RequestRefusedError) throw new RuntimeError(e.code, e.message, e.param ?? undefined);
      throw e;
    }
  }

  // ---------------- reads ----------------

  /**
   * Every read answered to anyone goes through here first: batches still waiting for their sync (a create or a start
   * written with a background sync) are synced now, so nothing read was not durable. Free when nothing waits.
   */
  private settle(): void {
    this.store.database.settle();
  }

  private visible(task: TaskRecord | undefined, principal?: string): TaskRecord | undefined {
    if (!task) return undefined;
    if (principal !== undefined && task.principal !== principal) return undefined;
    if (task.expiresAt !== null && task.expiresAt <= this.now()) {
      queueMicrotask(() => this.sweepNow());
      return undefined;
    }
    return task;
  }

  getTask(id: string, principal?: string): TaskRecord | undefined {
    if (typeof id !== 'string' || id.length > 200) return undefined;
    this.settle();
    return this.visible(this.store.getTask(id), principal);
  }

  getTaskByResponseId(responseId: string, principal?: string): TaskRecord | undefined {
    if (typeof responseId !== 'string' || responseId.length > 200) return undefined;
    this.settle();
    return this.visible(this.store.getTaskByResponseId(responseId), principal);
  }

  private mustGet(id: string, principal?: string): TaskRecord {
    const t = this.getTask(id, principal);
    if (!t) throw new RuntimeError('task_not_found', `No task with id "${String(id).slice(0, 80)}".`);
    return t;
  }

  listTasks(q: ListTasksQuery): ListTasksPage {
    const limit = Math.min(Math.max(Math.floor(q.limit ?? 50), 1), 1000);
    const before = q.cursor !== undefined ? decodeCursor(q.cursor) : undefined;
    this.settle();
    const now = this.now();
    const rows = this.store.listTasks({ principal: q.principal, statuses: q.statuses, origin: q.origin, before, limit: limit + 1 });
    const more = rows.length > limit;
    const page = rows.slice(0, limit);
    return {
      tasks: page.filter((t) => t.expiresAt === null || t.expiresAt > now),
      nextCursor: more ? encodeCursor(page[page.length - 1]) : null,
    };
  }

  countTasks(principal?: string): TaskCounts {
    const byStatus = Object.fromEntries(TASK_STATUSES.map((s) => [s, 0])) as Record<TaskStatus, number>;
    let total = 0;
    this.settle();
    for (const { status, n } of this.store.countByStatus(this.now(), principal)) {
      byStatus[status] = n;
      total += n;
    }
    return { byStatus, total };
  }

  metrics(): MetricsSnapshot {
    const { byModel, byPrincipal, oldestSince } = this.scheduler.queueDepths();
    const queue = {
      byModel: [...byModel].map(([model, n]) => ({ model, n })),
      byPrincipal: [...byPrincipal].map(([principal, n]) => ({ principal, n })),
      oldestWaitSeconds: oldestSince === null ? 0 : Math.max(0, this.now() - oldestSince) / 1000,
    };
    return this.collector.snapshot(this.countTasks().byStatus, this.store.database.sizeBytes(), queue);
  }

  queueInfo(id: string): QueueInfo | null {
    this.settle();
    return this.scheduler.queueInfo(id);
  }

  runNext(id: string, principal?: string): TaskRecord {
    this.assertOpen();
    const task = this.mustGet(id, principal);
    if (task.status !== 'queued' || !this.scheduler.runNext(id)) return task;
    const front = Math.min(this.store.minQueueOrder(), 1) - 1;
    return this.transitions.prioritize(id, PRIORITY.max, front) ?? this.mustGet(id, principal);
  }

  listModels(): ModelInfo[] {
    return this.options.backend.listModels();
  }

  countPromptTokens(request: ResponseRequest): number | null {
    const backend = this.options.backend;
    const id = backend.resolveModel(request.model);
    if (id === undefined || !backend.countPromptTokens) return null;
    return backend.countPromptTokens(generateRequestOf(request, id)) ?? null;
  }

  embed(params: EmbedParams): Promise<EmbedOutcome> {
    this.assertOpen();
    return this.embeddings.embed(params);
  }

  rerank(params: RerankParams): Promise<RerankOutcome> {
    this.assertOpen();
    return this.embeddings.rerank(params);
  }

  countTokens(model: string | undefined, text: string): number | null {
    const backend = this.options.backend;
    const id = backend.resolveModel(model);
    if (id === undefined) return null;
    return backend.countTokens?.(id, text) ?? null;
  }

  // ---------------- events ----------------

  private checkAfter(task: TaskRecord, afterSeq: number | undefined): number {
    const after = afterSeq ?? -1;
    if (!Number.isSafeInteger(after) || after < -1 || after >= task.nextSeq) {
      throw new RuntimeError('invalid_last_event_id', `Event id ${afterSeq} is not one this task has issued.`);
    }
    if (after + 1 < task.oldestSeq) {
      throw new RuntimeError('event_history_expired', 'The events after that id are no longer retained.');
    }
    return after;
  }

  readEvents(id: string, afterSeq?: number, principal?: string): TaskEvent[] {
    const task = this.mustGet(id, principal);
    return this.store.readEvents(id, this.checkAfter(task, afterSeq));
  }

  subscribe(id: string, afterSeq: number | undefined, onEvent: (e: TaskEvent) => void, principal?: string): Subscription {
    // No settle here (a stream opened right after a create would wait for the start's sync): the replay stops before
    // events whose batch is still being synced, and the live listener gets them once they are durable. Only a task
    // whose create itself is not yet durable is settled first (it does not exist for anyone before that).
    let unsynced = this.transitions.unsyncedFrom(id);
    if (unsynced === 0) {
      this.settle();
      unsynced = this.transitions.unsyncedFrom(id);
    }
    const task = this.visible(this.store.getTask(id), principal);
    if (!task) throw new RuntimeError('task_not_found', `No task with id "${String(id).slice(0, 80)}".`);
    let last = this.checkAfter(task, afterSeq);
    // Replay and registration happen in one synchronous step: no event can be committed in between.
    for (const ev of this.store.readEvents(id, last)) {
      if (unsynced !== undefined && ev.seq >= unsynced) break;
      onEvent(ev);
      last = ev.seq;
    }
    return this.bus.listen(id, (ev) => {
      if (ev.seq <= last) return;
      last = ev.seq;
      onEvent(ev);
    });
  }

  onTaskChange(listener: (task: TaskRecord, deleted: boolean) => void): Subscription {
    return this.bus.onTaskChange(listener);
  }

  waitForTerminal(id: string, signal?: AbortSignal): Promise<TaskRecord> {
    return new Promise((resolve, reject) => {
      this.settle();
      const first = this.store.getTask(id);
      if (!first) return reject(new RuntimeError('task_not_found', `No task with id "${id}".`));
      if (isTerminal(first.status)) return resolve(first);
      const abortError = () => Object.assign(new Error('The wait was aborted.'), { name: 'AbortError' });
      if (signal?.aborted) return reject(abortError());
      const sub = this.bus.onTaskChange((t, deleted) => {
        if (t.id !== id) return;
        if (deleted) {
          done();
          reject(new RuntimeError('task_not_found', `The task "${id}" was deleted.`));
        } else if (isTerminal(t.status)) {
          done();
          resolve(t);
        }
      });
      const onAbort = () => {
        done();
        reject(abortError());
      };
      const done = () => {
        sub.close();
        signal?.removeEventListener('abort', onAbort);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  // ---------------- cancel / delete ----------------

  cancelTask(id: string, principal?: string, reason?: string): TaskRecord {
    this.assertOpen();
    const task = this.mustGet(id, principal);
    switch (task.status) {
      case 'cancelling':
      case 'cancelled':
        return task;
      case 'succeeded':
      case 'failed':
        throw new RuntimeError('task_not_cancelable', `Task ${id} is already ${task.status}.`);
      case 'queued': {
        this.scheduler.remove(id);
        return this.transitions.cancelled(id) ?? this.mustGet(id, principal);
      }
      default: {
        const t = this.transitions.requestCancel(id, reason);
        // Nothing running it here (e.g. its run died with the store): finish the stop now. A task that waited for
        // input after a restart keeps the text its attempt had delivered.
        if (!this.scheduler.stop(id, 'cancel')) {
          this.transitions.cancelled(id, task.status === 'input_required' && t ? this.transitions.delivered(t) : undefined);
        }
        return t ?? this.mustGet(id, principal);
      }
    }
  }

  cancelTasks(filter: CancelFilter): TaskRecord[] {
    this.assertOpen();
    this.settle();
    const statuses = filter.statuses.flatMap((s): TaskStatus[] => (s === 'queued' ? ['queued'] : ['loading', 'running', 'input_required']));
    if (statuses.length === 0) return [];
    const ids: string[] = [];
    for (const t of this.store.activeTasks()) {
      if (filter.principal !== undefined && t.principal !== filter.principal) continue;
      if (!statuses.includes(t.status)) continue;
      if (filter.model !== undefined && t.model !== filter.model && t.request.model !== filter.model) continue;
      ids.push(t.id);
      if (t.status === 'queued') this.scheduler.remove(t.id);
    }
    const changed = this.transitions.cancelMany(ids, filter.reason);
    for (const t of changed) {
      if (t.status !== 'cancelling') continue;
      // Nothing running it here (it waited for input after a restart): finish the stop now.
      if (!this.scheduler.stop(t.id, 'cancel')) this.transitions.cancelled(t.id, this.transitions.delivered(t));
    }
    return changed.map((t) => this.store.getTask(t.id) ?? t);
  }

  // ---------------- input ----------------

  provideInput(id: string, responses: Record<string, unknown>, principal?: string): TaskRecord {
    this.assertOpen();
    const task = this.mustGet(id, principal);
    if (task.status !== 'input_required' || !responses || typeof responses !== 'object') return task;
    const rounds = this.store.inputRoundsOf(id);
    const last = rounds[rounds.length - 1];
    if (!last) return task;
    const open = new Set(unansweredKeys(last));
    // Only keys of the current round that are still open count; anything else is ignored (already answered, from
    // a superseded round, or never asked).
    const accepted: Record<string, InputResponse> = {};
    for (const [key, value] of Object.entries(responses)) {
      if (open.has(key)) accepted[key] = checkInputResponse(key, value);
    }
    if (Object.keys(accepted).length === 0) return task;
    const answered = { ...last, responses: { ...last.responses, ...accepted } };
    const inputRounds = [...rounds.slice(0, -1), answered];
    if (unansweredKeys(answered).length > 0) {
      // Partial: the task stays input_required with the rest.
      return this.transitions.recordAnswers(id, inputRounds) ?? this.mustGet(id, principal);
    }
    if (this.scheduler.hasInputWaiter(id)) {
      // The run that asked is waiting: back to running, then hand it the answers.
      const resumed = this.transitions.inputReceived(id, inputRounds);
      if (resumed) this.scheduler.inputAnswered(id);
      return resumed ?? this.mustGet(id, principal);
    }
    // No run behind it (the server restarted while it waited; recovery.ts): a new attempt, which replays the answers.
    const queued = this.transitions.newAttempt(task, (attempt) => `input received: running again (attempt ${attempt})`, { inputRounds });
    this.scheduler.enqueue(queued);
    return queued;
  }

  deleteTask(id: string, principal?: string): void {
    this.assertOpen();
    const task = this.mustGet(id, principal);
    if (!isTerminal(task.status)) throw new RuntimeError('task_not_deletable', `Task ${id} is ${task.status}; cancel it first.`);
    this.store.database.write(this.store.deleteTaskOps(id));
    // Its bytes are free now: the next create of its owner counts again.
    this.storedBytes.forget(task.principal);
    this.bus.publishChange(task, true);
  }

  /** Runs retention now (also runs periodically). */
  sweepNow() {
    if (this.closed) return { expired: 0, deleted: 0, historyPurged: 0 };
    try {
      const swept = sweep(
        this.store,
        this.bus,
        {
          taskRetentionMs: this.limits.taskRetentionSeconds * 1000,
          eventHistoryMs: this.limits.eventHistorySeconds * 1000,
          idempotencyKeyTtlMs: this.limits.idempotencyKeyTtlSeconds * 1000,
        },
        this.now(),
        (id) => {
          this.scheduler.remove(id);
          this.scheduler.stop(id, 'expired');
        },
      );
      // Deleted tasks and purged history are bytes come free: count again at each principal's next create.
      if (swept.expired + swept.deleted + swept.historyPurged > 0) this.storedBytes.forgetAll();
      return swept;
    } catch (e) {
      this.options.log?.(`retention sweep failed: ${(e as Error).message}`);
      return { expired: 0, deleted: 0, historyPurged: 0 };
    }
  }

  /** Forces a checkpoint (tests, benchmarks, shutdown). */
  checkpoint(): Promise<void> {
    return this.store.database.checkpoint();
  }

  private assertOpen(): void {
    if (this.closed) throw new RuntimeError('runtime_closed', 'The runtime is shutting down.');
  }

  /** Stops running work (it stays non-terminal, for restart recovery), checkpoints, releases the lock. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.sweepTimer);
    this.batchJobs.close();
    await this.scheduler.close();
    // After the scheduler: endings written while it stopped its runs owe deliveries, tried after the restart.
    await this.webhooks?.close();
    await this.store.database.close();
    this.lock.release();
  }

  // ---------------- the Batch API ----------------

  private newBatchJobs(): BatchJobs {
    // Batch lines' embeddings calls are the batch's own work: not counted against the principal's direct calls.
    const embeddings = new EmbeddingCalls(this.options.backend, Number.MAX_SAFE_INTEGER);
    const backend = this.options.backend;
    return new BatchJobs(this.store.database, this.batchFiles, this.options.batchEndpoints ?? {}, {
      now: this.now,
      log: this.options.log,
      createTask: (p) => this.createTaskAsync(p).then((r) => r.task),
      cancelTask: (id, principal, reason) => void this.cancelTask(id, principal, reason),
      deleteTask: (id, principal) => this.deleteTask(id, principal),
      activeTasks: () => this.store.activeTasks(),
      onTaskChange: (listener) => this.onTaskChange(listener),
      embed: (p) => embeddings.embed(p),
      capacityOf: (model) => {
        const id = backend.resolveModel(model);
        return id === undefined ? 1 : this.scheduler.capacityOf(id);
      },
      onRestartFor: (model) => {
        const id = backend.resolveModel(model);
        if (id !== undefined && this.limits.onRestart.includes('resume') && backend.supportsResume(id)) return 'resume';
        return this.limits.onRestart.includes('retry') ? 'retry' : 'fail';
      },
    });
  }

  private filesApi(): FilesApi {
    const files = this.batchFiles;
    return {
      create: (principal: string, purpose: FilePurpose, filename: string, bytes: Buffer) => {
        this.assertOpen();
        return files.create(principal, purpose, filename, bytes);
      },
      get: (id: string, principal: string) => {
        this.settle();
        return files.get(id, principal);
      },
      list: (q: FileListQuery) => {
        this.settle();
        return files.list(q);
      },
      content: (id: string, principal: string) => {
        this.settle();
        return files.content(id, principal);
      },
      delete: (id: string, principal: string) => {
        this.assertOpen();
        this.settle();
        return files.delete(id, principal, (fileId) => this.batchJobs.inputInUse(fileId));
      },
    };
  }

  private batchesApi(): BatchesApi {
    const jobs = this.batchJobs;
    return {
      create: (p: CreateBatchParams) => {
        this.assertOpen();
        this.settle();
        return jobs.create(p);
      },
      get: (id: string, principal: string) => {
        this.settle();
        return jobs.get(id, principal);
      },
      list: (q: BatchListQuery) => {
        this.settle();
        return jobs.list(q);
      },
      cancel: (id: string, principal: string) => {
        this.assertOpen();
        this.settle();
        return jobs.cancel(id, principal);
      },
    };
  }

  // ---------------- models ----------------

  async loadModel(model: string | undefined, options?: LoadOptions): Promise<ModelInfo> {
    this.assertOpen();
    const backend = this.options.backend;
    const id = backend.resolveModel(model);
    if (!id) {
      throw new RuntimeError(
        'model_not_found',
        model === undefined ? 'No default model is available.' : `The model "${model}" is not available.`,
        'model',
      );
    }
    await backend.load(id, options);
    const info = backend.listModels().find((m) => m.id === id);
    if (!info) throw new RuntimeError('model_not_found', `The model "${id}" is no longer available.`, 'model');
    return info;
  }
}
