// One editor panel per task: posts a snapshot after the webview's `ready`, then the task's events in batches
// with their sequence numbers; resyncs on request; restores from the webview's saved state after a reload.
import * as vscode from 'vscode';
import { applyEvents, initialState } from './eventLog';
import { PROTOCOL_VERSION, WEBVIEW_STRINGS, parseWebviewMessage, type HostMessage, type PanelState, type WireEvent } from './protocol';
import { Commands, EVENTS_PANEL_VIEW_TYPE } from '../constants';
import { Disposable, type IDisposable } from '../lifecycle';
import { taskTitle } from '../model/format';
import { answerText } from '../../runtime/responses';
import { type TaskInfo, type TaskSource } from '../model/taskSource';
import { isRuntimeError } from '../../runtime/errors';
import { eventsPanelHtml, webviewRoots } from './html';
import { toModelView, toTaskView } from './panelViews';

const BATCH_MS = 60;
const TASK_UPDATE_MS = 250;

export function webviewStrings(): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, english] of Object.entries(WEBVIEW_STRINGS)) out[key] = vscode.l10n.t(english);
  return out;
}

export function panelOptions(extensionUri: vscode.Uri): vscode.WebviewOptions & vscode.WebviewPanelOptions {
  return { enableScripts: true, localResourceRoots: webviewRoots(extensionUri), enableFindWidget: true };
}

export class EventsPanel extends Disposable {
  private stream: IDisposable | undefined;
  private queue: WireEvent[] = [];
  private batchTimer: ReturnType<typeof setTimeout> | undefined;
  private taskTimer: ReturnType<typeof setTimeout> | undefined;
  private pendingTask: TaskInfo | undefined;
  private lastStatus: TaskInfo['status'] | undefined;
  /** Host-side mirror of what the webview shows (text for Copy text). */
  private mirror: PanelState;
  private readonly _onDidDispose = this._register(new vscode.EventEmitter<void>());
  readonly onDidDispose = this._onDidDispose.event;

  static create(extensionUri: vscode.Uri, source: TaskSource, taskId: string, title: string): EventsPanel {
    const panel = vscode.window.createWebviewPanel(
      EVENTS_PANEL_VIEW_TYPE,
      title,
      { viewColumn: vscode.ViewColumn.Active, preserveFocus: false },
      panelOptions(extensionUri),
    );
    return new EventsPanel(panel, extensionUri, source, taskId);
  }

  constructor(
    readonly panel: vscode.WebviewPanel,
    extensionUri: vscode.Uri,
    private readonly source: TaskSource,
    readonly taskId: string,
  ) {
    super();
    this.mirror = initialState(taskId);
    panel.webview.options = panelOptions(extensionUri);
    panel.iconPath = vscode.Uri.joinPath(extensionUri, 'media', 'task-runtime.svg');
    this._register(panel.onDidDispose(() => this.dispose()));
    this._register(panel.webview.onDidReceiveMessage((m) => void this.onMessage(m)));
    this._register(
      source.onDidChangeTask((task, deleted) => {
        if (task.id !== taskId) return;
        if (deleted) this.post({ type: 'deleted' });
        else this.queueTask(task);
      }),
    );
    this._register({
      dispose: () => {
        this.stream?.dispose();
        if (this.batchTimer) clearTimeout(this.batchTimer);
        if (this.taskTimer) clearTimeout(this.taskTimer);
      },
    });
    // The webview answers `ready` once its script runs; nothing is posted before that.
    panel.webview.html = eventsPanelHtml(panel.webview, extensionUri, taskId, webviewStrings());
  }

  reveal(): void {
    this.panel.reveal(undefined, false);
  }

  /** Text shown so far (for Copy text). */
  get text(): string {
    return this.mirror.text;
  }

  private post(message: HostMessage): void {
    if (this.isDisposed) return;
    void this.panel.webview.postMessage(message);
  }

  private async onMessage(raw: unknown): Promise<void> {
    const message = parseWebviewMessage(raw);
    if (!message) return;
    switch (message.type) {
      case 'ready':
        if (message.version !== PROTOCOL_VERSION) return this.sendSnapshot();
        return message.lastSeq >= 0 ? this.resume(message.lastSeq) : this.sendSnapshot();
      case 'resync':
        return this.sendSnapshot();
      case 'action':
        switch (message.action) {
          case 'cancel':
            return void vscode.commands.executeCommand(Commands.cancelTask, this.taskId);
          case 'openResult':
            return void vscode.commands.executeCommand(Commands.fetchResult, this.taskId);
          case 'retry':
            return void vscode.commands.executeCommand(Commands.retryTask, this.taskId);
          case 'copyId':
            await vscode.env.clipboard.writeText(this.taskId);
            return;
          case 'copyText':
            await vscode.env.clipboard.writeText(this.mirror.text);
            return;
        }
    }
  }

  /** The task as it is now (titling the panel), or undefined when it is gone (the webview is told) or we are. */
  private async currentTask(): Promise<TaskInfo | undefined> {
    const task = await this.source.get(this.taskId).catch(() => undefined);
    if (this.isDisposed) return undefined;
    if (!task) {
      this.post({ type: 'deleted' });
      return undefined;
    }
    this.panel.title = taskTitle(task);
    return task;
  }

  private async sendSnapshot(): Promise<void> {
    this.stream?.dispose();
    this.stream = undefined;
    this.queue = [];
    const task = await this.currentTask();
    if (!task) return;
    this.mirror = initialState(this.taskId);
    this.post({ type: 'snapshot', task: toTaskView(task), events: [], truncated: false, lastSeq: -1 });
    this.subscribe(undefined, task);
    void this.sendModel(task);
  }

  /** Where the task's model runs (hardware, context): asked once per snapshot, again when the task starts running. */
  private async sendModel(task: TaskInfo): Promise<void> {
    const models = await this.source.listModels().catch(() => []);
    const model = models.find((m) => m.id === task.model);
    if (model && !this.isDisposed) this.post({ type: 'model', model: toModelView(model) });
  }

  private async resume(lastSeq: number): Promise<void> {
    const task = await this.currentTask();
    if (!task) return;
    // The mirror restarts from here: Copy text covers text from this session onward plus the final response.
    this.mirror = { ...initialState(this.taskId), lastSeq };
    this.post({ type: 'task', task: toTaskView(task) });
    this.subscribe(lastSeq, task);
    void this.sendModel(task);
  }

  private subscribe(afterSeq: number | undefined, task: TaskInfo): void {
    this.stream?.dispose();
    this.stream = this.source.subscribeEvents(this.taskId, afterSeq, {
      onEvent: (e) => this.queueEvent({ seq: e.seq, type: e.type, data: e.data, ...(e.createdAt !== undefined ? { at: e.createdAt } : {}) }),
      onError: (err) => void this.onStreamError(err, task),
    });
  }

  private async onStreamError(err: Error, task: TaskInfo): Promise<void> {
    this.flush();
    if (isRuntimeError(err, 'event_history_expired') || isRuntimeError(err, 'invalid_last_event_id')) {
      // History was purged: show the stored result and continue with whatever is still stored.
      const fresh = (await this.source.get(this.taskId).catch(() => undefined)) ?? task;
      const from = (fresh.oldestSeq ?? fresh.nextSeq ?? 0) - 1;
      this.mirror = { ...initialState(this.taskId), lastSeq: from, text: answerText(fresh.response) };
      this.post({ type: 'snapshot', task: toTaskView(fresh), events: [], text: this.mirror.text, truncated: true, lastSeq: from });
      if (fresh.oldestSeq !== undefined) this.subscribe(from, fresh);
      return;
    }
    if (isRuntimeError(err, 'task_not_found')) {
      this.post({ type: 'deleted' });
      return;
    }
    this.post({ type: 'notice', level: 'error', message: err.message });
  }

  private queueEvent(event: WireEvent): void {
    this.queue.push(event);
    this.batchTimer ??= setTimeout(() => this.flush(), BATCH_MS);
  }

  private flush(): void {
    if (this.batchTimer) clearTimeout(this.batchTimer);
    this.batchTimer = undefined;
    if (!this.queue.length) return;
    const events = this.queue;
    this.queue = [];
    this.mirror = applyEvents(this.mirror, events).state;
    this.post({ type: 'events', events });
  }

  private queueTask(task: TaskInfo): void {
    this.pendingTask = task;
    this.taskTimer ??= setTimeout(() => {
      this.taskTimer = undefined;
      const t = this.pendingTask;
      this.pendingTask = undefined;
      if (!t) return;
      this.flush(); // events first, so the status never runs ahead of the text
      this.panel.title = taskTitle(t);
      const wasLoading = this.lastStatus === 'loading' || this.lastStatus === 'queued';
      this.lastStatus = t.status;
      this.post({ type: 'task', task: toTaskView(t) });
      if (wasLoading && t.status === 'running') void this.sendModel(t); // the model is loaded now: its hardware is known
    }, TASK_UPDATE_MS);
  }

  override dispose(): void {
    if (this.isDisposed) return;
    this._onDidDispose.fire();
    super.dispose();
    this.panel.dispose();
  }
}
