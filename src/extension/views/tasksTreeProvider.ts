// The "Tasks" view: status groups with counts, lazily paged rows, coalesced refreshes of only the changed rows,
// a running-count badge and a welcome view when there are no tasks.
import * as vscode from 'vscode';
import type { TaskStatus } from '../../runtime/task';
import { Commands, ContextKeys, TASKS_VIEW_ID, TASK_URI_SCHEME } from '../constants';
import { Disposable } from '../lifecycle';
import { statusLabel, taskDescription, taskTitle, taskTooltipMarkdown } from '../model/format';
import type { PendingRequests } from '../model/pendingRequests';
import type { TaskSource } from '../model/taskSource';
import { GROUP_STATUSES, TaskTreeModel, groupOf as groupOfStatus, type GroupId, type TreeNode } from '../model/treeModel';

const t = vscode.l10n.t;

/** Each group reads like its main status; the two active groups get static icons (rows already spin). */
const GROUP_MAIN_STATUS: Record<GroupId, TaskStatus> = {
  queued: 'queued',
  running: 'running',
  needsInput: 'input_required',
  succeeded: 'succeeded',
  failed: 'failed',
  cancelled: 'cancelled',
};

function groupLabel(id: GroupId): string {
  return statusLabel(GROUP_MAIN_STATUS[id], t);
}

function groupIcon(id: GroupId): vscode.ThemeIcon {
  if (id === 'queued') return new vscode.ThemeIcon('watch');
  if (id === 'running') return new vscode.ThemeIcon('play-circle');
  return statusIcon(GROUP_MAIN_STATUS[id]);
}

export function statusIcon(status: TaskStatus): vscode.ThemeIcon {
  switch (status) {
    case 'queued':
      return new vscode.ThemeIcon('clock');
    case 'loading':
    case 'running':
      return new vscode.ThemeIcon('loading~spin');
    case 'cancelling':
      return new vscode.ThemeIcon('sync~spin', new vscode.ThemeColor('testing.iconSkipped'));
    case 'input_required':
      return new vscode.ThemeIcon('question', new vscode.ThemeColor('list.warningForeground'));
    case 'succeeded':
      return new vscode.ThemeIcon('pass', new vscode.ThemeColor('testing.iconPassed'));
    case 'failed':
      return new vscode.ThemeIcon('error', new vscode.ThemeColor('testing.iconFailed'));
    case 'cancelled':
      return new vscode.ThemeIcon('circle-slash', new vscode.ThemeColor('testing.iconSkipped'));
  }
}

/** `contextValue` per status, matched by the view/item/context menus in package.json. */
export function taskContextValue(status: TaskStatus): string {
  return status === 'loading' ? 'task.running' : `task.${status}`;
}

export class TasksTreeProvider extends Disposable implements vscode.TreeDataProvider<TreeNode> {
  private readonly _onDidChangeTreeData = this._register(new vscode.EventEmitter<TreeNode | TreeNode[] | undefined>());
  readonly onDidChangeTreeData = this._onDidChangeTreeData.event;
  readonly model: TaskTreeModel;
  readonly view: vscode.TreeView<TreeNode>;
  private loaded = false;

  /** speeds: the running tasks' tokens/s for the row descriptions (model/throughput.ts). */
  constructor(
    source: TaskSource,
    private readonly speeds?: { rate(id: string, now: number): number | undefined },
    pending?: PendingRequests,
  ) {
    super();
    this.model = this._register(new TaskTreeModel(source, pending ? { pending } : {}));
    this.view = this._register(vscode.window.createTreeView(TASKS_VIEW_ID, { treeDataProvider: this, showCollapseAll: true }));
    this._register(
      this.model.onDidChange((change) => {
        this.updateBadge();
        if (change.root) this._onDidChangeTreeData.fire(undefined);
        else {
          const nodes: TreeNode[] = [...change.groups, ...change.tasks];
          if (nodes.length) this._onDidChangeTreeData.fire(nodes);
        }
      }),
    );
    // Durations of active rows tick; refresh them about once a second while any run.
    const timer = setInterval(() => this.tickActiveRows(), 1000);
    this._register({ dispose: () => clearInterval(timer) });
    void this.refresh();
  }

  async refresh(): Promise<void> {
    try {
      await this.model.reload();
      this.loaded = true;
      this.view.message = undefined;
      this.updateBadge();
    } catch {
      // The source is not ready yet (a large store opens after activation); it fires invalidate (→ reload) when it is.
      this.view.message = t('Opening the task store…');
    }
  }

  private tickActiveRows(): void {
    const active = this.model.loadedTasks().filter((task) => GROUP_STATUSES.running.includes(task.status));
    if (!active.length || !this.view.visible) return;
    const nodes = active.map((task) => this.model.getTaskNode(task.id)).filter((n): n is NonNullable<typeof n> => !!n);
    this._onDidChangeTreeData.fire(nodes);
  }

  private updateBadge(): void {
    const running = this.model.activeCount;
    this.view.badge = running > 0 ? { value: running, tooltip: t('{0} running', running) } : undefined;
    void vscode.commands.executeCommand('setContext', ContextKeys.hasTasks, this.model.total > 0);
  }

  getTreeItem(node: TreeNode): vscode.TreeItem {
    switch (node.kind) {
      case 'group': {
        const item = new vscode.TreeItem(groupLabel(node.id), vscode.TreeItemCollapsibleState.Collapsed);
        item.id = `group:${node.id}`;
        item.description = String(node.count);
        item.iconPath = groupIcon(node.id);
        item.contextValue = `group.${node.id}`;
        if (node.id === 'running' || node.id === 'queued' || node.id === 'needsInput')
          item.collapsibleState = vscode.TreeItemCollapsibleState.Expanded;
        return item;
      }
      case 'more': {
        const item = new vscode.TreeItem(t('Show more ({0} more)', node.remaining), vscode.TreeItemCollapsibleState.None);
        item.id = `more:${node.group}`;
        item.iconPath = new vscode.ThemeIcon('ellipsis');
        item.contextValue = 'more';
        item.command = { command: Commands.loadMore, title: t('Show more'), arguments: [node.group] };
        return item;
      }
      case 'pending': {
        const { request } = node;
        const item = new vscode.TreeItem(request.title, vscode.TreeItemCollapsibleState.None);
        item.id = `pending:${request.id}`;
        item.description = t('{0} · loading the model', request.model);
        item.iconPath = statusIcon('loading');
        item.contextValue = 'pending';
        item.tooltip = t('Waiting for {0} to load; the task starts when it has.', request.model);
        item.accessibilityInformation = { label: `${request.title}, ${statusLabel('loading', t)}` };
        return item;
      }
      case 'task': {
        const task = node.task;
        const item = new vscode.TreeItem(taskTitle(task), vscode.TreeItemCollapsibleState.None);
        item.id = `task:${task.id}`;
        item.description = taskDescription(task, Date.now(), t, this.speeds?.rate(task.id, Date.now()));
        item.iconPath = statusIcon(task.status);
        item.contextValue = taskContextValue(task.status);
        item.resourceUri = vscode.Uri.from({ scheme: TASK_URI_SCHEME, path: `/task/${task.id}` });
        item.accessibilityInformation = { label: `${taskTitle(task)}, ${statusLabel(task.status, t)}` };
        item.command = { command: Commands.openEvents, title: t('Open Events'), arguments: [task.id] };
        return item;
      }
    }
  }

  async resolveTreeItem(item: vscode.TreeItem, node: TreeNode): Promise<vscode.TreeItem> {
    if (node.kind === 'task') {
      const md = new vscode.MarkdownString(taskTooltipMarkdown(node.task, Date.now(), t));
      md.supportThemeIcons = false;
      item.tooltip = md;
    }
    return item;
  }

  async getChildren(node?: TreeNode): Promise<TreeNode[]> {
    if (!node) {
      if (!this.loaded) await this.refresh();
      return this.model.rootNodes();
    }
    if (node.kind === 'group') {
      try {
        return await this.model.groupChildren(node.id);
      } catch {
        return [];
      }
    }
    return [];
  }

  getParent(node: TreeNode): TreeNode | undefined {
    if (node.kind === 'task') {
      return this.model.rootNodes().find((g) => g.id === groupOfStatus(node.task.status));
    }
    if (node.kind === 'more') return this.model.rootNodes().find((g) => g.id === node.group);
    if (node.kind === 'pending') return this.model.rootNodes().find((g) => g.id === 'running');
    return undefined;
  }

  async loadMore(group: GroupId): Promise<void> {
    await this.model.loadMore(group);
  }
}
