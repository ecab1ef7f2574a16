// Read-only documents with a task's result text: task-runtime-result:/<taskId>/<title>.md
import * as vscode from 'vscode';
import { RESULT_DOCUMENT_SCHEME } from '../constants';
import { Disposable } from '../lifecycle';
import { answerText } from '../../runtime/responses';
import { type TaskInfo, type TaskSource } from '../model/taskSource';

const t = vscode.l10n.t;

export function resultUri(task: Pick<TaskInfo, 'id'>): vscode.Uri {
  return vscode.Uri.from({ scheme: RESULT_DOCUMENT_SCHEME, path: `/${task.id}/result.md` });
}

export function taskIdOfResultUri(uri: vscode.Uri): string | undefined {
  return uri.scheme === RESULT_DOCUMENT_SCHEME ? uri.path.split('/')[1] : undefined;
}

export function resultDocumentText(task: TaskInfo): string {
  const text = answerText(task.response);
  if (task.status === 'failed' && task.error) {
    return `${t('Task failed')}: ${task.error.title} (${task.error.code})\n\n${task.error.detail}\n${text ? `\n---\n${text}` : ''}`;
  }
  if (!task.response) return t('No result yet (status: {0}).', task.status);
  return text;
}

export class ResultDocumentProvider extends Disposable implements vscode.TextDocumentContentProvider {
  private readonly _onDidChange = this._register(new vscode.EventEmitter<vscode.Uri>());
  readonly onDidChange = this._onDidChange.event;
  private readonly open = new Set<string>();

  constructor(private readonly source: TaskSource) {
    super();
    this._register(vscode.workspace.registerTextDocumentContentProvider(RESULT_DOCUMENT_SCHEME, this));
    this._register(
      source.onDidChangeTask((task) => {
        if (this.open.has(task.id)) this._onDidChange.fire(resultUri(task));
      }),
    );
    this._register(
      vscode.workspace.onDidCloseTextDocument((d) => {
        const id = taskIdOfResultUri(d.uri);
        if (id) this.open.delete(id);
      }),
    );
  }

  async provideTextDocumentContent(uri: vscode.Uri): Promise<string> {
    const id = taskIdOfResultUri(uri);
    if (!id) return '';
    this.open.add(id);
    const task = await this.source.get(id);
    return task ? resultDocumentText(task) : t('Task {0} was not found.', id);
  }
}
