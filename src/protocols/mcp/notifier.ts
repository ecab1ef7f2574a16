// Best-effort notifications/tasks/status and notifications/progress, woken by the runtime's own change feed.
// Clients must not rely on them (spec), so every send is fire-and-forget and a gone client is simply dropped.
import type { ProgressToken, ServerNotification } from '@modelcontextprotocol/sdk/types.js';
import type { Subscription, TaskRuntimeApi } from '../../runtime/api';
import type { TaskRecord } from '../../runtime/task';
import { isMcpTerminal, toMcpTask, type TaskViewOptions } from './taskView';

export type SendNotification = (notification: ServerNotification) => Promise<void>;

interface Watcher {
  send: SendNotification;
  /** Task status notifications go only where the task was created as a task (GET stream of that session). */
  statusUpdates: boolean;
  progressToken?: ProgressToken;
  total?: number;
  /** Called once the task is terminal and the watcher is dropped. */
  onEnd?: () => void;
  lastStatus?: string;
  lastMessage?: string;
  lastSentAt: number;
  lastProgress: number;
}

export class TaskNotifier {
  private readonly watchers = new Map<string, Set<Watcher>>();
  private readonly subscription: Subscription;

  constructor(
    private readonly runtime: TaskRuntimeApi,
    private readonly view: TaskViewOptions,
    /** Minimum gap between two token-count updates for one watcher; status changes always go out. */
    private readonly throttleMs = 250,
    private readonly log?: (m: string) => void,
  ) {
    this.subscription = runtime.onTaskChange((task, deleted) => {
      if (!deleted) this.onChange(task);
      else this.watchers.delete(task.id);
    });
  }

  watch(
    taskId: string,
    send: SendNotification,
    opts: { statusUpdates: boolean; progressToken?: ProgressToken; total?: number; onEnd?: () => void },
  ): () => void {
    const w: Watcher = { send, ...opts, lastSentAt: 0, lastProgress: 0 };
    let set = this.watchers.get(taskId);
    if (!set) this.watchers.set(taskId, (set = new Set()));
    set.add(w);
    return () => {
      set.delete(w);
      if (set.size === 0 && this.watchers.get(taskId) === set) this.watchers.delete(taskId);
    };
  }

  get watchedTasks(): number {
    return this.watchers.size;
  }

  close(): void {
    this.subscription.close();
    this.watchers.clear();
  }

  private onChange(task: TaskRecord): void {
    const set = this.watchers.get(task.id);
    if (!set) return;
    const mcp = toMcpTask(task, task.status === 'queued' ? this.runtime.queuePosition(task.id) : null, this.view);
    const terminal = isMcpTerminal(mcp.status);
    const now = Date.now();
    for (const w of set) {
      const statusChanged = w.lastStatus !== mcp.status;
      if (!statusChanged && now - w.lastSentAt < this.throttleMs && !terminal) continue;
      if (w.lastStatus !== undefined && isMcpTerminal(w.lastStatus as typeof mcp.status)) continue;
      if (w.statusUpdates && (statusChanged || w.lastMessage !== mcp.statusMessage)) {
        this.fire(w, { method: 'notifications/tasks/status', params: { ...mcp } });
      }
      if (w.progressToken !== undefined && task.outputTokens > w.lastProgress) {
        w.lastProgress = task.outputTokens;
        const params: Record<string, unknown> = {
          progressToken: w.progressToken,
          progress: task.outputTokens,
          message: mcp.statusMessage,
        };
        if (w.total !== undefined) params['total'] = w.total;
        this.fire(w, { method: 'notifications/progress', params } as ServerNotification);
      }
      w.lastStatus = mcp.status;
      w.lastMessage = mcp.statusMessage;
      w.lastSentAt = now;
    }
    if (terminal && task.status !== 'cancelling') {
      this.watchers.delete(task.id);
      for (const w of set) w.onEnd?.();
    }
  }

  private fire(w: Watcher, n: ServerNotification): void {
    try {
      w.send(n).catch((e: unknown) => this.log?.(`mcp: notification dropped: ${String(e)}`));
    } catch (e) {
      this.log?.(`mcp: notification dropped: ${String(e)}`);
    }
  }
}
