// Best-effort notifications/tasks/status and notifications/progress, woken by the runtime's own change feed.
// Clients must not rely on them (spec), so every send is fire-and-forget and a gone client is simply dropped.
import type { ProgressToken, ServerNotification } from '@modelcontextprotocol/sdk/types.js';
import type { Subscription, TaskRuntimeApi } from '../../runtime/api';
import type { TaskRecord } from '../../runtime/task';
import { isMcpTerminal, toMcpTask, type TaskViewOptions } from './mcpTaskView';

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
  lastStatusSentAt: number;
  lastProgressSentAt: number;
  lastProgress: number;
}

export class TaskNotifier {
  private readonly watchers = new Map<string, Set<Watcher>>();
  private readonly subscription: Subscription;

  constructor(
    private readonly runtime: TaskRuntimeApi,
    private readonly view: TaskViewOptions,
    /** Minimum gap between two notifications/progress for one watcher. */
    private readonly progressEveryMs = 250,
    private readonly log?: (m: string) => void,
    /**
     * Minimum gap between two status notifications that change only the statusMessage (token counts); status
     * changes always go out at once. Two poll intervals: VS Code 1.139 restarts its poll timer on every status it
     * receives, so more frequent messages would stop its polling altogether.
     */
    private readonly messageEveryMs = 2 * view.pollIntervalMs,
  ) {
    this.subscription = runtime.onTaskChange((task, deleted) => {
      if (!deleted) this.onChange(task);
      else this.watchers.delete(task.id);
    });
  }

  /**
   * Watches a task until it is terminal. With `announce` (the task as created) and a progressToken, a first
   * notifications/progress goes out at once with the task's phase (queued at position N, loading, generating) and
   * its tokens so far, so a synchronous caller learns where its call stands before the first token. Later ones
   * follow the tokens: progress must increase with each notification (spec), so a phase change without new
   * tokens is not sent again.
   */
  watch(
    taskId: string,
    send: SendNotification,
    opts: { statusUpdates: boolean; progressToken?: ProgressToken; total?: number; onEnd?: () => void; announce?: TaskRecord },
  ): () => void {
    const { announce, ...rest } = opts;
    const w: Watcher = { send, ...rest, lastStatusSentAt: 0, lastProgressSentAt: 0, lastProgress: 0 };
    let set = this.watchers.get(taskId);
    if (!set) this.watchers.set(taskId, (set = new Set()));
    set.add(w);
    if (announce && w.progressToken !== undefined) {
      const mcp = toMcpTask(announce, announce.status === 'queued' ? this.runtime.queueInfo(announce.id) : null, this.view);
      this.sendProgress(w, announce.outputTokens, mcp.statusMessage, Date.now());
    }
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
    const mcp = toMcpTask(task, task.status === 'queued' ? this.runtime.queueInfo(task.id) : null, this.view);
    const terminal = isMcpTerminal(mcp.status);
    const now = Date.now();
    for (const w of set) {
      if (w.lastStatus !== undefined && isMcpTerminal(w.lastStatus as typeof mcp.status)) continue;
      const statusChanged = w.lastStatus !== mcp.status;
      const messageDue = statusChanged || terminal || now - w.lastStatusSentAt >= this.messageEveryMs;
      if (w.statusUpdates && messageDue && (statusChanged || w.lastMessage !== mcp.statusMessage)) {
        this.fire(w, { method: 'notifications/tasks/status', params: { ...mcp } });
        w.lastStatusSentAt = now;
        w.lastMessage = mcp.statusMessage;
      }
      const progressDue = terminal || now - w.lastProgressSentAt >= this.progressEveryMs;
      if (progressDue && task.outputTokens > w.lastProgress) this.sendProgress(w, task.outputTokens, mcp.statusMessage, now);
      w.lastStatus = mcp.status;
    }
    if (terminal && task.status !== 'cancelling') {
      this.watchers.delete(task.id);
      for (const w of set) w.onEnd?.();
    }
  }

  private sendProgress(w: Watcher, progress: number, message: string | undefined, now: number): void {
    if (w.progressToken === undefined) return;
    w.lastProgress = progress;
    w.lastProgressSentAt = now;
    const params: Record<string, unknown> = { progressToken: w.progressToken, progress, message };
    if (w.total !== undefined) params['total'] = w.total;
    this.fire(w, { method: 'notifications/progress', params } as ServerNotification);
  }

  private fire(w: Watcher, n: ServerNotification): void {
    try {
      w.send(n).catch((e: unknown) => this.log?.(`mcp: notification dropped: ${String(e)}`));
    } catch (e) {
      this.log?.(`mcp: notification dropped: ${String(e)}`);
    }
  }
}
