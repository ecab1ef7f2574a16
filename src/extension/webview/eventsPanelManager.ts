// Keeps one events panel per task and brings panels back after a window reload (serializer).
import * as vscode from 'vscode';
import { isPanelState } from './protocol';
import { EVENTS_PANEL_VIEW_TYPE } from '../constants';
import { Disposable } from '../lifecycle';
import { taskTitle } from '../model/format';
import type { TaskSource } from '../model/taskSource';
import { EventsPanel } from './eventsPanel';

export class EventsPanelManager extends Disposable implements vscode.WebviewPanelSerializer<unknown> {
  private readonly panels = new Map<string, EventsPanel>();

  constructor(
    private readonly extensionUri: vscode.Uri,
    private readonly source: TaskSource,
  ) {
    super();
    this._register(vscode.window.registerWebviewPanelSerializer(EVENTS_PANEL_VIEW_TYPE, this));
    this._register({
      dispose: () => {
        for (const p of [...this.panels.values()]) p.dispose();
        this.panels.clear();
      },
    });
  }

  async open(taskId: string): Promise<EventsPanel> {
    const existing = this.panels.get(taskId);
    if (existing) {
      existing.reveal();
      return existing;
    }
    const task = await this.source.get(taskId).catch(() => undefined);
    const panel = EventsPanel.create(this.extensionUri, this.source, taskId, task ? taskTitle(task) : taskId);
    this.track(panel);
    return panel;
  }

  get(taskId: string): EventsPanel | undefined {
    return this.panels.get(taskId);
  }

  /** Task ids with an open panel (tests and the harness read it). */
  openTaskIds(): string[] {
    return [...this.panels.keys()];
  }

  private track(panel: EventsPanel): void {
    this.panels.set(panel.taskId, panel);
    panel.onDidDispose(() => {
      if (this.panels.get(panel.taskId) === panel) this.panels.delete(panel.taskId);
    });
  }

  async deserializeWebviewPanel(webviewPanel: vscode.WebviewPanel, state: unknown): Promise<void> {
    if (!isPanelState(state) || this.panels.has(state.taskId)) {
      webviewPanel.dispose();
      return;
    }
    // The restored webview sends `ready` with its saved lastSeq; the panel resumes from there.
    this.track(new EventsPanel(webviewPanel, this.extensionUri, this.source, state.taskId));
  }
}
