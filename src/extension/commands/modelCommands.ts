// Commands that choose the model: Select Model writes taskRuntime.model (a .gguf file, a model URI, or '' for the
// demo model); Download Model also loads it ahead of any task, through the runtime (TaskRuntimeApi.loadModel), so
// a download shows progress and can be cancelled. Only the window that owns the store runs the model.
// Any extension can run these commands with an argument (VS Code does not say who asked): an argument is checked
// exactly as the input box checks what the user types (modelUriProblem), and nothing is downloaded or switched
// before the user confirms it in a modal. What the user picks or types in our own quick pick and input
// box needs no second question.
import * as vscode from 'vscode';
import { isRuntimeError } from '../../runtime/errors';
import { CONFIG_SECTION, Commands } from '../constants';
import type { TaskService } from '../host/taskService';
import { Disposable } from '../lifecycle';
import { SETTING_KEYS } from '../model/settings';
import type { TaskSource } from '../model/taskSource';
import type { RegisterCommand } from './register';

const t = vscode.l10n.t;

export interface ModelCommandDeps {
  service: Pick<TaskService, 'role' | 'restart' | 'runtime'>;
  source: Pick<TaskSource, 'listModels'>;
  /** Asks a modal yes/no question with one action button; true when the user chose the action. */
  confirm: (message: string, action: string) => Promise<boolean>;
}

/** hf:owner/repo[:quant] or an https URL: what the model URI input box accepts (undefined) or why not. */
export function modelUriProblem(value: string): string | undefined {
  return /^(hf:|https:\/\/)\S+$/i.test(value.trim()) ? undefined : t('Enter hf:owner/repo[:quant] or an https URL.');
}

/** A command argument that names a model: checked as the input box checks it; throws with its message. */
function checkedModelArgument(arg: string): string {
  const problem = modelUriProblem(arg);
  if (problem) throw new Error(problem);
  return arg.trim();
}

export class ModelCommands extends Disposable {
  constructor(
    private readonly d: ModelCommandDeps,
    register: RegisterCommand,
  ) {
    super();
    this._register(register(Commands.selectModel, (arg?: unknown) => this.selectModel(arg)));
    this._register(register(Commands.downloadModel, (arg?: unknown) => this.downloadModel(arg)));
  }

  private async setModel(value: string): Promise<void> {
    await vscode.workspace.getConfiguration(CONFIG_SECTION).update(SETTING_KEYS.model, value, vscode.ConfigurationTarget.Global);
  }

  async selectModel(arg?: unknown): Promise<string | undefined> {
    if (arg !== undefined && (typeof arg !== 'object' || arg === null || !('kind' in arg))) {
      if (typeof arg !== 'string') throw new Error(t('Select Model takes a model URI (a string).'));
      const value = checkedModelArgument(arg);
      const question = t(
        'Switch the model of every new task to {0}? A command asked for it; the model is downloaded when a task first needs it.',
        value,
      );
      if (!(await this.d.confirm(question, t('Switch Model')))) return undefined;
      await this.setModel(value);
      return value;
    }
    const browse = { label: `$(file) ${t('Choose a local .gguf file…')}`, id: 'browse' };
    const uri = { label: `$(cloud-download) ${t('Enter a model URI…')}`, id: 'uri' };
    const demo = { label: `$(beaker) ${t('Use the built-in demo model')}`, id: 'demo' };
    const current = (await this.d.source.listModels().catch(() => []))[0];
    const placeHolder = current ? t('Current: {0} ({1})', current.id, current.hardware ?? current.state) : undefined;
    const pick = await vscode.window.showQuickPick([browse, uri, demo], { title: t('Select Model'), placeHolder });
    if (!pick) return undefined;
    if (pick.id === 'demo') {
      await this.setModel('');
      return '';
    }
    if (pick.id === 'browse') {
      const files = await vscode.window.showOpenDialog({ canSelectMany: false, filters: { [t('GGUF models')]: ['gguf'] }, title: t('Select Model') });
      if (!files?.[0]) return undefined;
      await this.setModel(files[0].fsPath);
      return files[0].fsPath;
    }
    const value = await this.askModelUri();
    if (!value) return undefined;
    await this.setModel(value);
    return value;
  }

  private askModelUri(): Thenable<string | undefined> {
    return vscode.window.showInputBox({
      title: t('Model URI'),
      prompt: t('A node-llama-cpp model URI, e.g. hf:owner/repo:Q4_K_M, or an https URL of a .gguf file'),
      ignoreFocusOut: true,
      validateInput: (v) => modelUriProblem(v),
    });
  }

  async downloadModel(arg?: unknown): Promise<boolean> {
    let value: string | undefined;
    if (arg !== undefined && (typeof arg !== 'object' || arg === null || !('kind' in arg))) {
      if (typeof arg !== 'string') throw new Error(t('Download Model takes a model URI (a string).'));
      value = checkedModelArgument(arg);
      const question = t('Download the model {0} and make it the model of every new task? A command asked for it.', value);
      if (!(await this.d.confirm(question, t('Download')))) return false;
    } else value = await this.askModelUri();
    if (!value) return false;
    if (this.d.service.role !== 'owner') {
      void vscode.window.showWarningMessage(t('Models are downloaded by the window that owns the task store. Run this command there.'));
      return false;
    }
    await this.setModel(value.trim());
    // The setting change restarts the runtime with the new model as its default; wait for it, then load (= download).
    await this.d.service.restart();
    const runtime = this.d.service.runtime;
    if (!runtime) throw new Error(t('The task runtime is not running.'));
    return vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: t('Downloading model {0}', value), cancellable: true },
      async (progress, token) => {
        const abort = new AbortController();
        token.onCancellationRequested(() => abort.abort());
        let last = 0;
        try {
          await runtime.loadModel(undefined, {
            signal: abort.signal,
            onProgress: (p) => {
              const pct = Math.round(p * 100);
              if (pct > last) {
                progress.report({ increment: pct - last, message: `${pct}%` });
                last = pct;
              }
            },
          });
          void vscode.window.showInformationMessage(t('Model ready: {0}', value));
          return true;
        } catch (e) {
          if (isRuntimeError(e, 'model_not_found')) throw new Error(t('The model {0} is not known to the backend.', value));
          if (abort.signal.aborted) return false;
          throw e;
        }
      },
    );
  }
}
