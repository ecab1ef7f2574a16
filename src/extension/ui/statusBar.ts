// Status bar item: endpoint state and running count; click opens the Tasks view.
import * as vscode from 'vscode';
import { Commands } from '../constants';
import type { TaskService } from '../host/taskService';
import { Disposable } from '../lifecycle';
import type { TaskTreeModel } from '../model/treeModel';

const t = vscode.l10n.t;

export class StatusBar extends Disposable {
  private readonly item = this._register(vscode.window.createStatusBarItem('taskRuntime.status', vscode.StatusBarAlignment.Left, 50));

  /**
   * Model lines for the tooltip (what each loaded model runs on). A model's hardware changes only when it loads, and
   * a load ends with a task running, so they are read again when the runtime's state or the number of loading or
   * running tasks changes — not on every token's tree change (in another window each read is an HTTP request).
   */
  private modelLines: string[] = [];
  private fetchingModels = false;
  private modelsStale = false;
  private lastActivity = '';

  constructor(
    private readonly service: TaskService,
    private readonly model: TaskTreeModel,
  ) {
    super();
    this.item.name = t('Task Runtime');
    this.item.command = Commands.showView;
    this._register(
      service.onDidChangeState(() => {
        this.update();
        this.refreshModels();
      }),
    );
    this._register(
      model.onDidChange(() => {
        this.update();
        const counts = model.taskCounts;
        const activity = `${counts.loading}/${counts.running}`;
        if (activity === this.lastActivity) return;
        this.lastActivity = activity;
        this.refreshModels();
      }),
    );
    this.update();
    this.item.show();
  }

  update(): void {
    const running = this.model.activeCount;
    const role = this.service.role;
    let icon = '$(server-process)';
    let state: string;
    switch (role) {
      case 'owner':
        state = t('listening on port {0}', this.service.endpoint?.port ?? 0);
        break;
      case 'client':
        state = t('attached to another window (port {0})', this.service.endpoint?.port ?? 0);
        icon = '$(link)';
        break;
      case 'failed':
        state = t('failed to start: {0}', this.service.lastError ?? '');
        icon = '$(error)';
        break;
      case 'starting':
      case 'waiting':
        state = t('starting…');
        icon = '$(loading~spin)';
        break;
      default:
        state = t('stopped');
        icon = '$(circle-slash)';
    }
    this.item.text = running > 0 ? `${icon} ${t('{0} running', running)}` : `${icon} ${t('Tasks')}`;
    this.item.tooltip = [`${t('Task Runtime')}: ${state}`, ...this.modelLines].join('\n');
    this.item.backgroundColor = role === 'failed' ? new vscode.ThemeColor('statusBarItem.errorBackground') : undefined;
  }

  /** One request at a time; changes while one is out ask for one more afterwards. */
  private refreshModels(): void {
    if (this.service.role !== 'owner' && this.service.role !== 'client') return;
    if (this.fetchingModels) {
      this.modelsStale = true;
      return;
    }
    this.fetchingModels = true;
    this.service.source
      .listModels()
      .then((models) => {
        this.modelLines = models.map((m) => `${m.id}: ${m.hardware ?? m.state}`);
        this.update();
      })
      .catch(() => undefined)
      .finally(() => {
        this.fetchingModels = false;
        if (this.modelsStale) {
          this.modelsStale = false;
          this.refreshModels();
        }
      });
  }
}
