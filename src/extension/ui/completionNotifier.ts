// Tells the user when a task they started from the editor finishes, with "Open result".
import * as vscode from 'vscode';
import { isTerminal } from '../../runtime/task';
import { Commands } from '../constants';
import { Disposable } from '../lifecycle';
import { taskTitle } from '../model/format';
import type { ExtensionSettings } from '../model/settings';
import type { TaskSource } from '../model/taskSource';

const t = vscode.l10n.t;

export class CompletionNotifier extends Disposable {
  /** Tasks started from this window's commands that have not finished yet. */
  private readonly watched = new Set<string>();

  constructor(
    source: TaskSource,
    private readonly settings: () => ExtensionSettings,
  ) {
    super();
    this._register(
      source.onDidChangeTask((task, deleted) => {
        if (!this.watched.has(task.id)) return;
        if (deleted) return void this.watched.delete(task.id);
        if (!isTerminal(task.status)) return;
        this.watched.delete(task.id);
        const mode = this.settings().notifyOnCompletion;
        if (mode === 'never' || (mode === 'failures' && task.status === 'succeeded')) return;
        const open = t('Open result');
        const events = t('Open events');
        const title = taskTitle(task);
        const show =
          task.status === 'succeeded'
            ? vscode.window.showInformationMessage(t('Task finished: {0}', title), open, events)
            : task.status === 'failed'
              ? vscode.window.showErrorMessage(t('Task failed: {0} — {1}', title, task.error?.detail ?? ''), open, events)
              : vscode.window.showWarningMessage(t('Task cancelled: {0}', title), open, events);
        void show.then((choice) => {
          if (choice === open) void vscode.commands.executeCommand(Commands.fetchResult, task.id);
          else if (choice === events) void vscode.commands.executeCommand(Commands.openEvents, task.id);
        });
      }),
    );
  }

  watch(taskId: string): void {
    this.watched.add(taskId);
  }
}
