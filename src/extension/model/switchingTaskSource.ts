// The one TaskSource the UI holds. It forwards to the current local or remote source and survives the switch
// when this window takes over the store (or attaches to a new owner): change listeners move over, open event
// streams resume from the last sequence they delivered, and listeners are told to reload.
import type { IDisposable } from '../lifecycle';
import type { CreateTaskRequest, EventStreamHandlers, ModelSummary, TaskInfo, TaskListQuery, TaskPage, TaskSource } from './taskSource';

interface StreamEntry {
  id: string;
  lastSeq: number | undefined;
  handlers: EventStreamHandlers;
  inner: IDisposable | undefined;
  done: boolean;
}

export class NotReadyError extends Error {
  constructor(message = 'Task Runtime is not ready yet.') {
    super(message);
    this.name = 'NotReadyError';
  }
}

export class SwitchingTaskSource implements TaskSource {
  private current: TaskSource | undefined;
  private waiters: Array<(s: TaskSource) => void> = [];
  private readonly changeListeners = new Map<(task: TaskInfo, deleted: boolean) => void, IDisposable | undefined>();
  private readonly invalidateListeners = new Set<() => void>();
  private readonly innerInvalidate = new Map<TaskSource, IDisposable>();
  private readonly streams = new Set<StreamEntry>();

  constructor(private readonly readyTimeoutMs = 30_000) {}

  get kind(): 'local' | 'remote' {
    return this.current?.kind ?? 'remote';
  }

  get isReady(): boolean {
    return this.current !== undefined;
  }

  /** Replaces the underlying source (undefined while switching). The old one is not disposed here. */
  setSource(source: TaskSource | undefined): void {
    if (source === this.current) return;
    for (const [listener, sub] of this.changeListeners) {
      sub?.dispose();
      this.changeListeners.set(listener, undefined);
    }
    for (const sub of this.innerInvalidate.values()) sub.dispose();
    this.innerInvalidate.clear();
    for (const s of this.streams) {
      s.inner?.dispose();
      s.inner = undefined;
    }
    this.current = source;
    if (!source) return;
    for (const listener of this.changeListeners.keys()) this.changeListeners.set(listener, source.onDidChangeTask(listener));
    if (source.onDidInvalidate)
      this.innerInvalidate.set(
        source,
        source.onDidInvalidate(() => this.fireInvalidate()),
      );
    for (const s of this.streams) if (!s.done) this.openStream(s, source);
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w(source);
    this.fireInvalidate();
  }

  private fireInvalidate(): void {
    for (const l of this.invalidateListeners) l();
  }

  /** The current source, waiting for one while the window is starting or switching. */
  ready(): Promise<TaskSource> {
    if (this.current) return Promise.resolve(this.current);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== waiter);
        reject(new NotReadyError());
      }, this.readyTimeoutMs);
      const waiter = (s: TaskSource) => {
        clearTimeout(timer);
        resolve(s);
      };
      this.waiters.push(waiter);
    });
  }

  async list(query: TaskListQuery): Promise<TaskPage> {
    return (await this.ready()).list(query);
  }
  async counts() {
    return (await this.ready()).counts();
  }
  async get(id: string): Promise<TaskInfo | undefined> {
    return (await this.ready()).get(id);
  }
  async create(request: CreateTaskRequest): Promise<TaskInfo> {
    return (await this.ready()).create(request);
  }
  async cancel(id: string): Promise<TaskInfo> {
    return (await this.ready()).cancel(id);
  }
  async cancelMany(statuses: ReadonlyArray<'queued' | 'running'>): Promise<TaskInfo[]> {
    return (await this.ready()).cancelMany(statuses);
  }
  async runNext(id: string): Promise<TaskInfo> {
    return (await this.ready()).runNext(id);
  }
  async delete(id: string): Promise<void> {
    return (await this.ready()).delete(id);
  }
  async listModels(): Promise<ModelSummary[]> {
    return (await this.ready()).listModels();
  }

  async countTokens(model: string, text: string): Promise<number | null> {
    return (await this.ready()).countTokens(model, text);
  }

  /** The current source's connected(); when the source is replaced meanwhile, the new one's. */
  async connected(): Promise<void> {
    for (;;) {
      const source = await this.ready();
      try {
        await source.connected();
        if (source === this.current) return;
      } catch (e) {
        if (source === this.current) throw e;
      }
    }
  }

  subscribeEvents(id: string, afterSeq: number | undefined, handlers: EventStreamHandlers): IDisposable {
    const entry: StreamEntry = { id, lastSeq: afterSeq, handlers, inner: undefined, done: false };
    this.streams.add(entry);
    if (this.current) this.openStream(entry, this.current);
    return {
      dispose: () => {
        entry.done = true;
        entry.inner?.dispose();
        this.streams.delete(entry);
      },
    };
  }

  private openStream(entry: StreamEntry, source: TaskSource): void {
    entry.inner = source.subscribeEvents(entry.id, entry.lastSeq, {
      onEvent: (e) => {
        if (entry.done || (entry.lastSeq !== undefined && e.seq <= entry.lastSeq)) return;
        entry.lastSeq = e.seq;
        entry.handlers.onEvent(e);
      },
      onError: (err) => {
        // A stream cut by a source switch is reopened by setSource; only report errors of the live source.
        if (entry.done || source !== this.current) return;
        entry.done = true;
        this.streams.delete(entry);
        entry.handlers.onError?.(err);
      },
      onEnd: () => {
        if (entry.done || source !== this.current) return;
        entry.done = true;
        this.streams.delete(entry);
        entry.handlers.onEnd?.();
      },
    });
  }

  onDidChangeTask(listener: (task: TaskInfo, deleted: boolean) => void): IDisposable {
    this.changeListeners.set(listener, this.current?.onDidChangeTask(listener));
    return {
      dispose: () => {
        this.changeListeners.get(listener)?.dispose();
        this.changeListeners.delete(listener);
      },
    };
  }

  onDidInvalidate(listener: () => void): IDisposable {
    this.invalidateListeners.add(listener);
    return { dispose: () => this.invalidateListeners.delete(listener) };
  }

  dispose(): void {
    this.setSource(undefined);
    for (const s of this.streams) s.done = true;
    this.streams.clear();
    this.changeListeners.clear();
    this.invalidateListeners.clear();
  }
}
