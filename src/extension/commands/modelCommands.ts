// Commands that choose the model: Select Model writes taskRuntime.model (a .gguf file, a model URI, or '' for the
// demo model); Download Model also loads it ahead of any task, through the runtime (TaskRuntimeApi.loadModel), so
// a download shows progress and can be cancelled. Only the window that owns the store runs the model.
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
    if (typeof arg === 'string') {
      await this.setModel(arg);
      return arg;
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
      validateInput: (v) => (/^(hf|https?):\S+$/i.test(v.trim()) ? undefined : t('Enter hf:owner/repo[:quant] or an https URL.')),
    });
  }

  async downloadModel(arg?: unknown): Promise<boolean> {
    const value = typeof arg === 'string' ? arg : await this.askModelUri();
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
