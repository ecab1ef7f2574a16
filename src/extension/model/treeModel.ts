// The task tree's state, apart from the vscode TreeDataProvider: status groups with counts, lazily paged group
// contents, and coalesced change notifications naming only what changed. Stable node objects so the view can
// refresh single rows.
import type { TaskStatus } from '../../runtime/task';
import { ChangeCoalescer, realTimers, type Timers } from './coalescer';
import type { TaskInfo, TaskSource } from './taskSource';
import { emptyCounts } from './taskSource';
import type { IDisposable } from '../lifecycle';
import type { PendingRequest, PendingRequests } from './pendingRequests';

export const GROUP_IDS = ['queued', 'running', 'needsInput', 'succeeded', 'failed', 'cancelled'] as const;
export type GroupId = (typeof GROUP_IDS)[number];

export const GROUP_STATUSES: Record<GroupId, readonly TaskStatus[]> = {
  queued: ['queued'],
  running: ['loading', 'running', 'cancelling'],
  needsInput: ['input_required'],
  succeeded: ['succeeded'],
  failed: ['failed'],
  cancelled: ['cancelled'],
};

export function groupOf(status: TaskStatus): GroupId {
  for (const g of GROUP_IDS) if (GROUP_STATUSES[g].includes(status)) return g;
  return 'queued';
}

export interface GroupNode {
  readonly kind: 'group';
  readonly id: GroupId;
  count: number;
}
export interface TaskNode {
  readonly kind: 'task';
  readonly id: string;
  task: TaskInfo;
}
export interface MoreNode {
  readonly kind: 'more';
  readonly group: GroupId;
  /** How many tasks of the group are not shown yet. */
  remaining: number;
}
/** A request accepted but not a task yet (pendingRequests.ts), shown first in the running group. */
export interface PendingNode {
  readonly kind: 'pending';
  readonly id: string;
  readonly request: PendingRequest;
}
export type TreeNode = GroupNode | TaskNode | MoreNode | PendingNode;

/** What changed since the last notification. `root` means the set of visible groups changed. */
export interface TreeChange {
  root: boolean;
  groups: GroupNode[];
  tasks: TaskNode[];
}

interface GroupState {
  node: GroupNode;
  more: MoreNode;
  /** Loaded tasks, newest first; undefined until the group is first expanded. */
  ids: string[] | undefined;
  nextCursor: string | null;
  loading: Promise<void> | undefined;
}

type ChangeKey = 'root' | `group:${GroupId}` | `task:${string}`;

export interface TreeModelOptions {
  pageSize?: number;
  /** Requests not yet tasks, shown in the running group. */
  pending?: PendingRequests;
  intervalMs?: number;
  timers?: Timers;
}

export class TaskTreeModel implements IDisposable {
  private readonly groups = new Map<GroupId, GroupState>();
  private readonly nodes = new Map<string, TaskNode>();
  private counts = emptyCounts();
  private readonly listeners = new Set<(change: TreeChange) => void>();
  private readonly coalescer: ChangeCoalescer<ChangeKey>;
  private countsStale = false;
  private countsRefresh: Promise<void> | undefined;
  private readonly pageSize: number;
  private generation = 0;
  private subscriptions: IDisposable[] = [];
  private readonly pending: PendingRequests | undefined;
  private pendingNodes = new Map<string, PendingNode>();

  constructor(
    private readonly source: TaskSource,
    options: TreeModelOptions = {},
  ) {
    this.pageSize = options.pageSize ?? 200;
    for (const id of GROUP_IDS) {
      this.groups.set(id, {
        node: { kind: 'group', id, count: 0 },
        more: { kind: 'more', group: id, remaining: 0 },
        ids: undefined,
        nextCursor: null,
        loading: undefined,
      });
    }
    this.coalescer = new ChangeCoalescer((keys) => void this.emit(keys), options.intervalMs ?? 250, 16, options.timers ?? realTimers);
    this.subscriptions.push(source.onDidChangeTask((task, deleted) => this.applyChange(task, deleted)));
    if (source.onDidInvalidate) this.subscriptions.push(source.onDidInvalidate(() => void this.reload()));
    this.pending = options.pending;
    if (this.pending) this.subscriptions.push(this.pending.onDidChange(() => this.pendingChanged()));
  }

  /** The running group's pending rows follow the list (stable nodes per request). */
  private pendingChanged(): void {
    const next = new Map<string, PendingNode>();
    for (const request of this.pending!.list())
      next.set(request.id, this.pendingNodes.get(request.id) ?? { kind: 'pending', id: request.id, request });
    this.pendingNodes = next;
    this.coalescer.add('group:running');
    this.syncGroupCounts();
  }

  onDidChange(listener: (change: TreeChange) => void): IDisposable {
    this.listeners.add(listener);
    return { dispose: () => this.listeners.delete(listener) };
  }

  get taskCounts(): Readonly<Record<TaskStatus, number>> {
    return this.counts;
  }

  /** Tasks, and requests not yet tasks. */
  get total(): number {
    return Object.values(this.counts).reduce((a, b) => a + b, 0) + this.pendingNodes.size;
  }

  /** Tasks of the running group, and requests not yet tasks (they load their model). */
  get activeCount(): number {
    return this.counts.loading + this.counts.running + this.counts.cancelling + this.pendingNodes.size;
  }

  groupCount(id: GroupId): number {
    return GROUP_STATUSES[id].reduce((n, s) => n + this.counts[s], 0) + (id === 'running' ? this.pendingNodes.size : 0);
  }

  /** Re-reads counts and forgets loaded pages (they load again on expand). */
  async reload(): Promise<void> {
    const generation = ++this.generation;
    for (const g of this.groups.values()) {
      g.ids = undefined;
      g.nextCursor = null;
      g.loading = undefined;
    }
    this.nodes.clear();
    const counts = await this.source.counts();
    // Two reloads in flight (the source switched, then its feed connected): the later one's counts win.
    if (generation !== this.generation) return;
    this.counts = counts;
    this.syncGroupCounts();
    this.coalescer.add('root');
    for (const id of GROUP_IDS) this.coalescer.add(`group:${id}`);
    this.coalescer.flushNow();
  }

  /** Groups that have tasks, in fixed order. Empty list = show the welcome view. */
  rootNodes(): GroupNode[] {
    return GROUP_IDS.filter((id) => this.groupCount(id) > 0).map((id) => this.groups.get(id)!.node);
  }

  /** A group's rows: loaded tasks, then a "show more" row while pages remain. Loads the first page on demand. */
  async groupChildren(id: GroupId): Promise<Array<TaskNode | MoreNode | PendingNode>> {
    const g = this.groups.get(id)!;
    if (!g.ids) {
      g.loading ??= this.loadPage(g, undefined);
      await g.loading;
    }
    return this.rowsOf(g);
  }

  /** Loads the next page of a group. */
  async loadMore(id: GroupId): Promise<void> {
    const g = this.groups.get(id)!;
    if (g.loading) return g.loading;
    if (!g.ids) {
      g.loading = this.loadPage(g, undefined);
    } else if (g.nextCursor) {
      g.loading = this.loadPage(g, g.nextCursor);
    } else return;
    await g.loading;
    this.coalescer.add(`group:${id}`);
  }

  getTaskNode(id: string): TaskNode | undefined {
    return this.nodes.get(id);
  }

  /** Every loaded task (for quick picks before groups are expanded, use source.list). */
  loadedTasks(): TaskInfo[] {
    return [...this.nodes.values()].map((n) => n.task);
  }

  private rowsOf(g: GroupState): Array<TaskNode | MoreNode | PendingNode> {
    const pending = g.node.id === 'running' ? [...this.pendingNodes.values()] : [];
    const rows: Array<TaskNode | MoreNode | PendingNode> = [...pending, ...(g.ids ?? []).map((tid) => this.nodes.get(tid)!).filter(Boolean)];
    const remaining = Math.max(0, g.node.count - rows.length);
    g.more.remaining = remaining;
    if (g.nextCursor && remaining > 0) rows.push(g.more);
    return rows;
  }

  private async loadPage(g: GroupState, cursor: string | undefined): Promise<void> {
    const generation = this.generation;
    try {
      const page = await this.source.list({ statuses: GROUP_STATUSES[g.node.id], cursor, limit: this.pageSize });
      if (generation !== this.generation) return;
      const ids = cursor ? (g.ids ?? []) : [];
      const seen = new Set(ids);
      for (const t of page.tasks) {
        // A task may have moved to another group while the page was in flight.
        if (groupOf(t.status) !== g.node.id || seen.has(t.id)) continue;
        const existing = this.nodes.get(t.id);
        if (existing && groupOf(existing.task.status) !== g.node.id) continue;
        if (existing) existing.task = newer(existing.task, t);
        else this.nodes.set(t.id, { kind: 'task', id: t.id, task: t });
        ids.push(t.id);
        seen.add(t.id);
      }
      g.ids = ids;
      g.nextCursor = page.nextCursor;
    } finally {
      if (generation === this.generation) g.loading = undefined;
    }
  }

  /** Applies one change from the source; notifications follow, coalesced. */
  applyChange(task: TaskInfo, deleted: boolean): void {
    const node = this.nodes.get(task.id);
    const newGroup = groupOf(task.status);
    if (node) {
      const oldGroup = groupOf(node.task.status);
      if (!deleted && task.updatedAt < node.task.updatedAt) return; // stale update
      if (oldGroup !== newGroup || deleted) {
        this.removeFromGroup(oldGroup, task.id);
        this.coalescer.add(`group:${oldGroup}`);
      }
      this.counts[node.task.status] = Math.max(0, this.counts[node.task.status] - 1);
      if (deleted) {
        this.nodes.delete(task.id);
      } else {
        node.task = task;
        this.counts[task.status]++;
        if (oldGroup !== newGroup) {
          this.insertIntoGroup(newGroup, node);
          this.coalescer.add(`group:${newGroup}`);
        } else {
          this.coalescer.add(`task:${task.id}`);
        }
      }
    } else if (!deleted) {
      // Unknown here: new, or moved from a row we never loaded. Counts are re-read to stay exact.
      const n: TaskNode = { kind: 'task', id: task.id, task };
      if (this.insertIntoGroup(newGroup, n)) this.nodes.set(task.id, n);
      this.countsStale = true;
      this.coalescer.add(`group:${newGroup}`);
    } else {
      this.countsStale = true;
    }
    this.syncGroupCounts();
  }

  private removeFromGroup(id: GroupId, taskId: string): void {
    const g = this.groups.get(id)!;
    if (!g.ids) return;
    const i = g.ids.indexOf(taskId);
    if (i >= 0) g.ids.splice(i, 1);
  }

  /** Inserts newest-first if the row falls inside the loaded window; returns whether it was inserted. */
  private insertIntoGroup(id: GroupId, node: TaskNode): boolean {
    const g = this.groups.get(id)!;
    if (!g.ids) return false;
    let i = 0;
    while (i < g.ids.length) {
      const other = this.nodes.get(g.ids[i]!);
      if (other && other.task.createdAt < node.task.createdAt) break;
      if (other && other.task.createdAt === node.task.createdAt && other.id < node.id) break;
      i++;
    }
    // Past the end of a partially loaded group: it belongs to a page not loaded yet.
    if (i === g.ids.length && g.nextCursor) return false;
    g.ids.splice(i, 0, node.id);
    return true;
  }

  private syncGroupCounts(): void {
    for (const g of this.groups.values()) {
      const c = this.groupCount(g.node.id);
      if (c !== g.node.count) {
        if ((c === 0) !== (g.node.count === 0)) this.coalescer.add('root');
        g.node.count = c;
        this.coalescer.add(`group:${g.node.id}`);
      }
    }
  }

  private async emit(keys: Set<ChangeKey>): Promise<void> {
    if (this.countsStale) {
      this.countsStale = false;
      this.countsRefresh ??= this.source
        .counts()
        .then((c) => {
          this.counts = c;
        })
        .catch(() => undefined)
        .finally(() => {
          this.countsRefresh = undefined;
        });
      await this.countsRefresh;
      const before = new Map([...this.groups.values()].map((g) => [g.node.id, g.node.count]));
      for (const g of this.groups.values()) {
        g.node.count = this.groupCount(g.node.id);
        const old = before.get(g.node.id)!;
        if (g.node.count !== old) keys.add(`group:${g.node.id}`);
        if ((g.node.count === 0) !== (old === 0)) keys.add('root');
      }
    }
    const change: TreeChange = { root: keys.has('root'), groups: [], tasks: [] };
    const groupsChanged = new Set<GroupId>();
    for (const k of keys) {
      if (k.startsWith('group:')) {
        const id = k.slice(6) as GroupId;
        groupsChanged.add(id);
        change.groups.push(this.groups.get(id)!.node);
      }
    }
    for (const k of keys) {
      if (!k.startsWith('task:')) continue;
      const node = this.nodes.get(k.slice(5));
      // A row inside a group that is refreshed anyway needs no own refresh.
      if (node && !groupsChanged.has(groupOf(node.task.status))) change.tasks.push(node);
    }
    for (const l of this.listeners) l(change);
  }

  /** Test hook and user refresh: deliver pending notifications now. */
  flush(): void {
    this.coalescer.flushNow();
  }

  dispose(): void {
    this.coalescer.dispose();
    for (const s of this.subscriptions) s.dispose();
    this.subscriptions = [];
    this.listeners.clear();
  }
}

function newer(a: TaskInfo, b: TaskInfo): TaskInfo {
  return b.updatedAt >= a.updatedAt ? b : a;
}
