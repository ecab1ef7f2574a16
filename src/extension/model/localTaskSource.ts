// TaskSource over the runtime this window owns. The editor sees every principal's tasks.
import { describeHardware } from '../../runtime/backend';
import type { TaskRuntimeApi } from '../../runtime/api';
import { inputText } from '../../runtime/responses';
import type { QueueInfo } from '../../runtime/queue';
import type { TaskRecord } from '../../runtime/task';
import type { IDisposable } from '../lifecycle';
import {
  toResponseRequest,
  type CreateTaskRequest,
  type EventStreamHandlers,
  type ModelSummary,
  type TaskInfo,
  type TaskListQuery,
  type TaskPage,
  type TaskSource,
} from './taskSource';

export function taskInfoFromRecord(t: TaskRecord, queue?: QueueInfo | null): TaskInfo {
  return {
    id: t.id,
    responseId: t.responseId,
    status: t.status,
    origin: t.origin,
    title: t.title,
    model: t.model,
    statusMessage: t.statusMessage,
    createdAt: t.createdAt,
    updatedAt: t.updatedAt,
    onRestart: t.onRestart,
    attempt: t.attempt,
    outputTokens: t.outputTokens,
    usage: t.usage,
    error: t.error,
    response: t.response,
    prompt: inputText(t.request),
    input: t.request,
    oldestSeq: t.oldestSeq,
    nextSeq: t.nextSeq,
    priority: t.priority,
    ...(queue ? { queue: { position: queue.position, expectedStartAt: queue.expectedStartAt } } : {}),
  };
}

export class LocalTaskSource implements TaskSource {
  readonly kind = 'local' as const;
  private readonly subscriptions = new Set<{ close(): void }>();

  /** principal: who editor-created tasks belong to (the token's principal, so agents see them too). */
  constructor(
    private readonly runtime: TaskRuntimeApi,
    private readonly principal: string,
  ) {}

  /** The task as the editor shows it, a queued one with its place in the queue. */
  private info(t: TaskRecord): TaskInfo {
    return taskInfoFromRecord(t, t.status === 'queued' ? this.runtime.queueInfo(t.id) : null);
  }

  async list(query: TaskListQuery): Promise<TaskPage> {
    const page = this.runtime.listTasks({ statuses: query.statuses, cursor: query.cursor, limit: query.limit });
    return { tasks: page.tasks.map((t) => this.info(t)), nextCursor: page.nextCursor };
  }

  async counts() {
    return { ...this.runtime.countTasks().byStatus };
  }

  async get(id: string): Promise<TaskInfo | undefined> {
    const t = this.runtime.getTask(id);
    return t && this.info(t);
  }

  async create(request: CreateTaskRequest): Promise<TaskInfo> {
    const { task } = this.runtime.createTask({
      origin: 'editor',
      principal: this.principal,
      input: toResponseRequest(request),
      onRestart: request.onRestart,
      ...(request.title ? { title: request.title } : {}),
    });
    return taskInfoFromRecord(task);
  }

  async cancel(id: string): Promise<TaskInfo> {
    return taskInfoFromRecord(this.runtime.cancelTask(id, undefined, 'cancelled from the editor'));
  }

  async cancelMany(statuses: ReadonlyArray<'queued' | 'running'>): Promise<TaskInfo[]> {
    const changed = this.runtime.cancelTasks({ principal: this.principal, statuses, reason: 'cancelled from the editor' });
    return changed.map((t) => this.info(t));
  }

  async runNext(id: string): Promise<TaskInfo> {
    return this.info(this.runtime.runNext(id, this.principal));
  }

  async delete(id: string): Promise<void> {
    this.runtime.deleteTask(id);
  }

  subscribeEvents(id: string, afterSeq: number | undefined, handlers: EventStreamHandlers): IDisposable {
    let sub: { close(): void } | undefined;
    let closed = false;
    const close = () => {
      if (closed) return;
      closed = true;
      if (sub) {
        sub.close();
        this.subscriptions.delete(sub);
      }
    };
    try {
      sub = this.runtime.subscribe(id, afterSeq, (e) => {
        if (!closed) handlers.onEvent({ seq: e.seq, type: e.type, data: e.data, createdAt: e.createdAt });
      });
      if (closed) sub.close();
      else this.subscriptions.add(sub);
    } catch (e) {
      closed = true;
      // Report asynchronously so callers see the same timing as the remote source.
      queueMicrotask(() => handlers.onError?.(e instanceof Error ? e : new Error(String(e))));
    }
    return { dispose: close };
  }

  onDidChangeTask(listener: (task: TaskInfo, deleted: boolean) => void): IDisposable {
    const sub = this.runtime.onTaskChange((t, deleted) => listener(deleted ? taskInfoFromRecord(t) : this.info(t), deleted));
    this.subscriptions.add(sub);
    return {
      dispose: () => {
        sub.close();
        this.subscriptions.delete(sub);
      },
    };
  }

  /** The runtime is in this process: changes flow as soon as a listener is registered. */
  connected(): Promise<void> {
    return Promise.resolve();
  }

  async listModels(): Promise<ModelSummary[]> {
    return this.runtime.listModels().map((m) => ({
      id: m.id,
      source: m.source,
      state: m.state,
      demo: m.demo,
      contextLength: m.contextLength ?? null,
      maxContextLength: m.maxContextLength,
      ...(m.engine ? { engine: m.engine } : {}),
      ...(m.capabilities ? { capabilities: { tools: m.capabilities.tools, reasoning: m.capabilities.reasoning } } : {}),
      ...(m.hardware ? { hardware: describeHardware(m.hardware), hardwareInfo: m.hardware } : {}),
    }));
  }

  async countTokens(model: string, text: string): Promise<number | null> {
    return this.runtime.countTokens(model, text);
  }

  dispose(): void {
    for (const s of this.subscriptions) s.close();
    this.subscriptions.clear();
  }
}
