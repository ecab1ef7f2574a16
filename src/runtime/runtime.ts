// The task runtime: one durable store, one scheduler, every door's operations.
import { join } from 'node:path';
import type {
  CreateTaskParams,
  CreateTaskResult,
  ListTasksPage,
  ListTasksQuery,
  RuntimeLimits,
  Subscription,
  TaskCounts,
  TaskRuntimeApi,
} from './api';
import { canResume, type ModelBackend, type ModelInfo } from './backend';
import { RuntimeError } from './errors';
import { EventLog } from './eventLog';
import { finishCancelled } from './generation';
import { newResponseId, newTaskId } from './ids';
import { recoverTasks, type RecoveryOutcome } from './recovery';
import { responseObject, taskStatusSnapshot, titleOf } from './responses';
import { sweep } from './retention';
import { Scheduler, type BackendRetryPolicy } from './scheduler';
import { DurableDatabase, type DatabaseOptions } from './store/database';
import { DataDirLock } from './store/lock';
import { TaskStore } from './taskStore';
import { TASK_STATUSES, isTerminal, type TaskEvent, type TaskRecord, type TaskStatus } from './task';
import { TaskTransitions } from './transitions';

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
  database?: DatabaseOptions;
  /**
   * The clock task times come from, in ms since the epoch (default Date.now): creation and update stamps, ttl expiry,
   * deadlines, retention, idempotency-key age. Timers still run on real time; a clock that stands still means no
   * deadline or ttl is ever reached.
   */
  now?: () => number;
}

export const DEFAULT_LIMITS: RuntimeLimits = {
  onRestart: ['fail', 'retry'],
  eventHistorySeconds: 3600,
  taskRetentionSeconds: 86_400,
  idempotencyKeyTtlSeconds: 86_400,
  maxConcurrentTasks: 1,
  maxQueuedTasks: 1000,
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
  private readonly log = new EventLog();
  private readonly transitions: TaskTransitions;
  private readonly scheduler: Scheduler;
  private readonly sweepTimer: NodeJS.Timeout;
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
    if (options.backend.supportsSnapshots && !this.limits.onRestart.includes('resume')) {
      this.limits.onRestart = [...this.limits.onRestart, 'resume'];
    }
    this.now = options.now ?? Date.now;
    this.transitions = new TaskTransitions(store, this.log, this.now);
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
      log: options.log,
    });
    this.queueOrder = store.maxQueueOrder();
    this.sweepTimer = setInterval(() => this.sweepNow(), options.sweepIntervalMs ?? 60_000);
    this.sweepTimer.unref();
  }

  static async open(options: RuntimeOptions): Promise<TaskRuntime> {
    const { mkdirSync } = await import('node:fs');
    mkdirSync(options.dataDir, { recursive: true });
    const lock = DataDirLock.acquire(options.dataDir, () => options.log?.('runtime: lost the data directory lock'));
    let db: DurableDatabase;
    try {
      db = await DurableDatabase.open(join(options.dataDir, 'store'), { log: options.log, ...options.database });
    } catch (e) {
      lock.release();
      throw e;
    }
    const store = new TaskStore(db);
    const recovery = recoverTasks(store, new TaskTransitions(store, new EventLog(), options.now ?? Date.now), options.backend);
    const runtime = new TaskRuntime(options, store, lock, recovery);
    // After recovery every unfinished task is queued.
    for (const t of store.activeTasks()) runtime.scheduler.enqueue(t, recovery.resumePoints.get(t.id));
    runtime.sweepNow();
    return runtime;
  }

  get supportsResume(): boolean {
    return this.options.backend.supportsSnapshots;
  }

  /** Records who owns the store (e.g. the endpoint url) in the data-directory lock, for other processes. */
  setOwnerInfo(info: Record<string, unknown>): void {
    this.lock.setInfo(info);
  }

  get storeReport() {
    return this.store.database.report;
  }

  // ---------------- creation ----------------

  createTask(p: CreateTaskParams): CreateTaskResult {
    this.assertOpen();
    const onRestart = p.onRestart ?? 'fail';
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
    if (onRestart === 'resume' && !canResume(this.options.backend, model)) {
      throw new RuntimeError('unsupported_capability', `on_restart "resume" is not supported for the model "${model}".`, 'on_restart');
    }
    if (this.scheduler.queueLength >= this.limits.maxQueuedTasks) {
      throw new RuntimeError('queue_full', `The queue is full (${this.limits.maxQueuedTasks} tasks).`);
    }
    const ttlMs =
      p.ttlMs === undefined || p.ttlMs === null ? null : Math.min(Math.max(Math.floor(p.ttlMs), 1000), this.limits.maxTtlMs);
    const task: TaskRecord = {
      id: newTaskId(),
      responseId: newResponseId(),
      origin: p.origin,
      principal: p.principal,
      title: (p.title ?? titleOf(p.input)).slice(0, 200),
      model,
      input: { ...p.input, model },
      status: 'queued',
      statusMessage: 'queued',
      createdAt: now,
      updatedAt: now,
      onRestart,
      attempt: 1,
      ttlMs,
      expiresAt: ttlMs === null ? null : now + ttlMs,
      deadlineAt: p.deadlineMs ? now + Math.max(1, Math.floor(p.deadlineMs)) : null,
      response: null,
      error: null,
      usage: null,
      outputTokens: 0,
      meta: p.meta ?? {},
      nextSeq: 2,
      oldestSeq: 0,
    };
    // Both first events carry the same data object, so the batch serialises it once (createTaskOps).
    const data = { response: responseObject(task, { status: 'queued' }) };
    const events = [
      { type: 'response.created', data },
      { type: 'response.queued', data },
    ];
    const ops = this.store.createTaskOps(task, ++this.queueOrder, events, now);
    if (p.idempotency) {
      ops.push(...this.store.insertIdempotencyOps(p.principal, p.idempotency.scope, p.idempotency.key, p.idempotency.fingerprint, task.id, now));
    }
    this.store.database.write(ops);
    this.log.publish(events.map((e, i) => ({ taskId: task.id, seq: i, type: e.type, data: e.data, createdAt: now })));
    this.log.publishChange(task);
    this.scheduler.enqueue(task);
    return { task, replayed: false };
  }

  // ---------------- reads ----------------

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
    return this.visible(this.store.getTask(id), principal);
  }

  getTaskByResponseId(responseId: string, principal?: string): TaskRecord | undefined {
    if (typeof responseId !== 'string' || responseId.length > 200) return undefined;
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
    for (const { status, n } of this.store.countByStatus(principal)) {
      byStatus[status] = n;
      total += n;
    }
    return { byStatus, total };
  }

  queuePosition(id: string): number | null {
    return this.scheduler.position(id);
  }

  listModels(): ModelInfo[] {
    return this.options.backend.listModels();
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
    const task = this.mustGet(id, principal);
    let last = this.checkAfter(task, afterSeq);
    // Replay and registration happen in one synchronous step: no event can be committed in between.
    for (const ev of this.store.readEvents(id, last)) {
      onEvent(ev);
      last = ev.seq;
    }
    return this.log.listen(id, (ev) => {
      if (ev.seq <= last) return;
      last = ev.seq;
      onEvent(ev);
    });
  }

  onTaskChange(listener: (task: TaskRecord, deleted: boolean) => void): Subscription {
    return this.log.onTaskChange(listener);
  }

  waitForTerminal(id: string, signal?: AbortSignal): Promise<TaskRecord> {
    return new Promise((resolve, reject) => {
      const first = this.store.getTask(id);
      if (!first) return reject(new RuntimeError('task_not_found', `No task with id "${id}".`));
      if (isTerminal(first.status)) return resolve(first);
      const abortError = () => Object.assign(new Error('The wait was aborted.'), { name: 'AbortError' });
      if (signal?.aborted) return reject(abortError());
      const sub = this.log.onTaskChange((t, deleted) => {
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
        return finishCancelled(this.transitions, id) ?? this.mustGet(id, principal);
      }
      default: {
        const t = this.transitions.transition(
          id,
          'cancelling',
          { statusMessage: reason ? `cancelling: ${reason.slice(0, 200)}` : 'cancelling' },
          (next) => [{ type: 'task_runtime:task.status', data: taskStatusSnapshot(next) }],
        );
        // Nothing running it here (e.g. its run died with the store): finish the stop now.
        if (!this.scheduler.stop(id, 'cancel')) finishCancelled(this.transitions, id);
        return t ?? this.mustGet(id, principal);
      }
    }
  }

  deleteTask(id: string, principal?: string): void {
    this.assertOpen();
    const task = this.mustGet(id, principal);
    if (!isTerminal(task.status)) throw new RuntimeError('task_not_deletable', `Task ${id} is ${task.status}; cancel it first.`);
    this.store.database.write(this.store.deleteTaskOps(id));
    this.log.publishChange(task, true);
  }

  /** Runs retention now (also runs periodically). */
  sweepNow() {
    if (this.closed) return { expired: 0, deleted: 0, historyPurged: 0 };
    try {
      return sweep(
        this.store,
        this.log,
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
    await this.scheduler.close();
    await this.store.database.close();
    this.lock.release();
  }
}
