// The runtime overview, a webview view beside the Tasks view: the models and where they run, the queue by status,
// tokens/s across every running task over the last minutes, and the endpoints with copy buttons. Copying goes
// through the existing commands (so the MCP configuration, which holds the token, is copied exactly as the command
// does it, with its own notice). Posts nothing before the webview's `ready`; then the whole state, at most every
// REFRESH_MS while the view is visible.
import * as vscode from 'vscode';
import {
  NEXT_IN_QUEUE,
  OVERVIEW_PROTOCOL_VERSION,
  OVERVIEW_STRINGS,
  parseOverviewMessage,
  type OverviewHostMessage,
  type OverviewState,
} from './overviewProtocol';
import { Commands, OVERVIEW_VIEW_ID } from '../constants';
import type { TaskService } from '../host/taskService';
import { Disposable } from '../lifecycle';
import { taskTitle } from '../model/format';
import { BUCKET_MS, Throughput } from '../model/throughput';
import { emptyCounts, type TaskInfo, type TaskSource } from '../model/taskSource';
import { overviewHtml, webviewRoots } from '../webview/html';
import { toModelView } from '../webview/panelViews';

const REFRESH_MS = 2_000;

export function overviewStrings(): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, english] of Object.entries(OVERVIEW_STRINGS)) out[key] = vscode.l10n.t(english);
  return out;
}

export class OverviewViewProvider extends Disposable implements vscode.WebviewViewProvider {
  /** Fed by every task change from activation on, so the chart has history when the view first opens. */
  readonly throughput = new Throughput();
  private view: vscode.WebviewView | undefined;
  private ready = false;
  private timer: ReturnType<typeof setInterval> | undefined;
  private readonly titles = new Map<string, { title: string; tokens: number }>();

  constructor(
    private readonly extensionUri: vscode.Uri,
    private readonly source: TaskSource,
    private readonly service: Pick<TaskService, 'endpoint' | 'role' | 'onDidChangeState'>,
  ) {
    super();
    this._register(
      source.onDidChangeTask((task: TaskInfo, deleted: boolean) => {
        if (deleted) {
          this.throughput.forget(task.id);
          this.titles.delete(task.id);
          return;
        }
        this.throughput.record(task.id, task.status, task.outputTokens, Date.now());
        if (task.status === 'running' || task.status === 'input_required')
          this.titles.set(task.id, { title: taskTitle(task), tokens: task.outputTokens });
        else this.titles.delete(task.id);
      }),
    );
    this._register(service.onDidChangeState(() => void this.push()));
    this._register(vscode.window.registerWebviewViewProvider(OVERVIEW_VIEW_ID, this));
    this._register({ dispose: () => this.stopTimer() });
  }

  resolveWebviewView(view: vscode.WebviewView): void {
    this.view = view;
    this.ready = false;
    view.webview.options = { enableScripts: true, localResourceRoots: webviewRoots(this.extensionUri) };
    const subs = [
      view.webview.onDidReceiveMessage((m) => void this.onMessage(m)),
      view.onDidChangeVisibility(() => (view.visible ? this.startTimer() : this.stopTimer())),
    ];
    subs.push(
      view.onDidDispose(() => {
        for (const d of subs) d.dispose();
        this.view = undefined;
        this.ready = false;
        this.stopTimer();
      }),
    );
    view.webview.html = overviewHtml(view.webview, this.extensionUri, overviewStrings());
  }

  private async onMessage(raw: unknown): Promise<void> {
    const m = parseOverviewMessage(raw);
    if (!m) return;
    if (m.type === 'ready') {
      this.ready = m.version === OVERVIEW_PROTOCOL_VERSION;
      if (this.ready) {
        await this.push();
        if (this.view?.visible) this.startTimer();
      }
      return;
    }
    switch (m.action) {
      case 'copyLmsp':
      case 'copyOpenAi':
        return void vscode.commands.executeCommand(Commands.copyLmspEndpoint);
      case 'copyMcpConfig':
        return void vscode.commands.executeCommand(Commands.copyMcpConfig);
      case 'openTask':
        return void vscode.commands.executeCommand(Commands.openEvents, m.taskId);
      case 'selectModel':
        return void vscode.commands.executeCommand(Commands.selectModel);
      case 'showLog':
        return void vscode.commands.executeCommand(Commands.showLog);
    }
  }

  private startTimer(): void {
    this.timer ??= setInterval(() => void this.push(), REFRESH_MS);
  }

  private stopTimer(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** The state the view shows now (also read by the editor tests through the test API). */
  async snapshot(): Promise<OverviewState> {
    const now = Date.now();
    const [models, counts, queued] = await Promise.all([
      this.source.listModels().catch(() => []),
      this.source.counts().catch(() => emptyCounts()),
      this.source.list({ statuses: ['queued'], limit: 200 }).catch(() => ({ tasks: [] as TaskInfo[] })),
    ]);
    const next = queued.tasks
      .filter((task) => task.queue)
      .sort((a, b) => a.queue!.position - b.queue!.position)
      .slice(0, NEXT_IN_QUEUE)
      .map((task) => ({
        id: task.id,
        title: taskTitle(task),
        position: task.queue!.position,
        waitMs: task.queue!.expectedStartAt === null ? null : Math.max(0, task.queue!.expectedStartAt - now),
      }));
    const endpoint = this.service.endpoint;
    const running = this.throughput.running(now).map(({ id, rate }) => ({
      id,
      title: this.titles.get(id)?.title ?? id,
      tokens: this.titles.get(id)?.tokens ?? 0,
      rate: rate ?? null,
    }));
    return {
      role: this.service.role,
      models: models.map(toModelView),
      counts,
      series: this.throughput.series(now),
      bucketMs: BUCKET_MS,
      liveTps: running.reduce((sum, r) => sum + (r.rate ?? 0), 0),
      running,
      next,
      endpoints: endpoint ? { lmsp: endpoint.lmspUrl, mcp: endpoint.mcpUrl, openai: endpoint.lmspUrl } : null,
    };
  }

  private async push(): Promise<void> {
    if (!this.view || !this.ready) return;
    const message: OverviewHostMessage = { type: 'state', state: await this.snapshot() };
    if (this.view) void this.view.webview.postMessage(message);
  }
}
