// Every command of the extension. Commands acting on a task take a task id, a tree node or a TaskInfo as their
// first argument and otherwise ask with a quick pick; commands that ask for input also accept it as an argument
// object, so tests and other extensions can run them without UI. The destructive ones (Clear Finished, Regenerate
// Token) take no arguments and always ask the user first.
import * as vscode from 'vscode';
import { z } from 'zod';
import { CANCELLABLE_STATUSES, RESTART_POLICIES, TERMINAL_STATUSES, type TaskStatus } from '../runtime/task';
import { checkEngineName, normalizeEngineUrl } from '../backends/openai/config';
import { ENGINE_KINDS, type EngineKind } from '../backends/openai/quirks';
import { CONFIG_SECTION, Commands, VIEW_CONTAINER_ID, engineKeySecret } from './constants';
import type { TaskService } from './host/taskService';
import { Disposable } from './lifecycle';
import { statusLabel, taskDescription, taskTitle } from './model/format';
import { SETTING_KEYS, type ExtensionSettings } from './model/settings';
import { responseText, type TaskSource } from './model/taskSource';
import type { GroupId } from './model/treeModel';
import type { TokenStore } from './tokenStore';
import type { CompletionNotifier } from './ui/completionNotifier';
import { resultUri, taskIdOfResultUri } from './ui/resultDocument';
import type { TasksTreeProvider } from './views/tasksTreeProvider';
import type { EventsPanelManager } from './webview/eventsPanelManager';

const t = vscode.l10n.t;

/** The argument object Create Task accepts (integration tests call it without UI). */
export const createTaskArgsSchema = z.strictObject({
  prompt: z.string().min(1).max(1_000_000),
  model: z.string().min(1).max(1000).optional(),
  onRestart: z.enum(RESTART_POLICIES).optional(),
  maxOutputTokens: z.number().int().min(1).max(1_000_000).optional(),
  temperature: z.number().min(0).max(2).optional(),
  instructions: z.string().max(1_000_000).optional(),
});
export type CreateTaskArgs = z.infer<typeof createTaskArgsSchema>;

/** Finished without success: what Retry offers. */
const RETRYABLE_STATUSES: readonly TaskStatus[] = TERMINAL_STATUSES.filter((s) => s !== 'succeeded');

export interface CommandDeps {
  service: TaskService;
  source: TaskSource;
  tree: TasksTreeProvider;
  panels: EventsPanelManager;
  notifier: CompletionNotifier;
  tokens: TokenStore;
  log: vscode.LogOutputChannel;
  settings: () => ExtensionSettings;
  /** Asks a modal yes/no question with one action button; true when the user chose the action. */
  confirm: (message: string, action: string) => Promise<boolean>;
  /** Where remote engines' API keys are kept. */
  secrets: vscode.SecretStorage;
}

/** Presets of "Add Remote Engine…": each engine's usual OpenAI-style base URL and its kind (what it can do). */
export const ENGINE_PRESETS = [
  { id: 'llamacpp', label: 'llama.cpp server', name: 'llamacpp', url: 'http://127.0.0.1:8080/v1', kind: 'llama.cpp' },
  { id: 'vllm', label: 'vLLM', name: 'vllm', url: 'http://127.0.0.1:8000/v1', kind: 'vllm' },
  { id: 'ollama', label: 'Ollama', name: 'ollama', url: 'http://127.0.0.1:11434/v1', kind: 'ollama' },
  { id: 'lmstudio', label: 'LM Studio', name: 'lmstudio', url: 'http://127.0.0.1:1234/v1', kind: 'lmstudio' },
  { id: 'other', label: 'Other OpenAI-compatible server', name: 'remote', url: 'http://', kind: undefined },
] as const satisfies ReadonlyArray<{ id: string; label: string; name: string; url: string; kind: EngineKind | undefined }>;

/** The argument object Add Remote Engine accepts (tests and other extensions run it without UI). */
export const addEngineArgsSchema = z.strictObject({
  name: z.string().min(1).max(64),
  url: z.string().min(1).max(2000),
  apiKey: z.string().min(1).max(4096).optional(),
  kind: z.enum(ENGINE_KINDS).optional(),
});

export class CommandRegistry extends Disposable {
  constructor(private readonly d: CommandDeps) {
    super();
    const reg = (id: string, fn: (...args: any[]) => unknown) =>
      this._register(
        vscode.commands.registerCommand(id, async (...args: unknown[]) => {
          try {
            return await fn(...args);
          } catch (e) {
            const message = e instanceof Error ? e.message : String(e);
            d.log.error(`${id} failed: ${message}`);
            void vscode.window.showErrorMessage(t('Task Runtime: {0}', message));
            // Programmatic callers (an id or argument object) get the rejection; UI invocations only the message.
            const fromTree = typeof args[0] === 'object' && args[0] !== null && 'kind' in (args[0] as object);
            if (args.length && args[0] !== undefined && !fromTree) throw e;
            return undefined;
          }
        }),
      );
    reg(Commands.createTask, (arg?: unknown) => this.createTask(arg));
    reg(Commands.cancelTask, (arg?: unknown) => this.cancelTask(arg));
    reg(Commands.fetchResult, (arg?: unknown) => this.fetchResult(arg));
    reg(Commands.openEvents, (arg?: unknown) => this.openEvents(arg));
    reg(Commands.retryTask, (arg?: unknown) => this.retryTask(arg));
    reg(Commands.deleteTask, (arg?: unknown) => this.deleteTask(arg));
    reg(Commands.clearFinished, () => this.clearFinished());
    reg(Commands.copyTaskId, (arg?: unknown) => this.copyTaskId(arg));
    reg(Commands.selectModel, (arg?: unknown) => this.selectModel(arg));
    reg(Commands.downloadModel, (arg?: unknown) => this.downloadModel(arg));
    reg(Commands.addRemoteEngine, (arg?: unknown) => this.addRemoteEngine(arg));
    reg(Commands.copyMcpConfig, () => this.copyMcpConfig());
    reg(Commands.copyLmspEndpoint, () => this.copyLmspEndpoint());
    reg(Commands.regenerateToken, () => this.regenerateToken());
    reg(Commands.restartServer, () => d.service.restart());
    reg(Commands.showLog, () => d.log.show());
    reg(Commands.refresh, () => d.tree.refresh());
    reg(Commands.loadMore, (group: GroupId) => d.tree.loadMore(group));
    reg(Commands.copyResult, (arg?: unknown) => this.copyResult(arg));
    reg(Commands.showView, () => vscode.commands.executeCommand(`workbench.view.extension.${VIEW_CONTAINER_ID}`));
  }

  /** Turns a command argument into a task id, or asks. */
  private async taskIdFrom(arg: unknown, statuses: readonly TaskStatus[] | undefined, placeHolder: string): Promise<string | undefined> {
    if (typeof arg === 'string' && arg) return arg;
    if (arg instanceof vscode.Uri) return taskIdOfResultUri(arg);
    if (arg && typeof arg === 'object') {
      const o = arg as { kind?: unknown; id?: unknown; taskId?: unknown };
      if (typeof o.taskId === 'string') return o.taskId;
      if ((o.kind === 'task' || o.kind === undefined) && typeof o.id === 'string') return o.id;
    }
    const page = await this.d.source.list({ statuses, limit: 200 });
    if (!page.tasks.length) {
      void vscode.window.showInformationMessage(t('There is no matching task.'));
      return undefined;
    }
    const now = Date.now();
    const pick = await vscode.window.showQuickPick(
      page.tasks.map((task) => ({
        label: taskTitle(task),
        description: `${statusLabel(task.status, t)} · ${taskDescription(task, now, t)}`,
        detail: task.id,
        id: task.id,
      })),
      { placeHolder, matchOnDescription: true, matchOnDetail: true },
    );
    return pick?.id;
  }

  async createTask(arg?: unknown): Promise<string | undefined> {
    let args: CreateTaskArgs;
    if (arg !== undefined && !(arg && typeof arg === 'object' && 'kind' in arg)) {
      const parsed = createTaskArgsSchema.safeParse(arg);
      if (!parsed.success) throw new Error(t('Invalid Create Task arguments: {0}', parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')));
      args = parsed.data;
    } else {
      const asked = await this.askCreateArgs();
      if (!asked) return undefined;
      args = asked;
    }
    const task = await this.d.source.create({
      prompt: args.prompt,
      model: args.model,
      onRestart: args.onRestart ?? this.d.settings().defaultRestartPolicy,
      maxOutputTokens: args.maxOutputTokens,
      temperature: args.temperature ?? this.d.settings().temperature ?? undefined,
      instructions: args.instructions,
    });
    this.d.notifier.watch(task.id);
    this.d.log.info(`created ${task.id} from the editor`);
    return task.id;
  }

  private async askCreateArgs(): Promise<CreateTaskArgs | undefined> {
    const prompt = await vscode.window.showInputBox({
      title: t('Create Task (1/3): prompt'),
      prompt: t('What should the model do?'),
      ignoreFocusOut: true,
      validateInput: (v) => (v.trim() ? undefined : t('Enter a prompt.')),
    });
    if (!prompt) return undefined;
    const models = await this.d.source.listModels().catch(() => []);
    let model: string | undefined;
    if (models.length > 1) {
      const pick = await vscode.window.showQuickPick(
        [{ label: t('Default model'), id: undefined as string | undefined }, ...models.map((m) => ({ label: m.id, description: m.demo ? t('demo model') : m.source, detail: m.hardware, id: m.id as string | undefined }))],
        { title: t('Create Task (2/3): model'), ignoreFocusOut: true },
      );
      if (!pick) return undefined;
      model = pick.id;
    }
    const def = this.d.settings().defaultRestartPolicy;
    const policies = [
      { label: 'fail', description: t('Fail the task if the editor restarts') },
      { label: 'retry', description: t('Run it again from the start after a restart') },
      { label: 'resume', description: t('Continue from the last snapshot after a restart') },
    ].map((p) => ({ ...p, picked: p.label === def }));
    policies.sort((a, b) => Number(b.picked) - Number(a.picked));
    const policy = await vscode.window.showQuickPick(policies, { title: t('Create Task (3/3): if the editor restarts'), ignoreFocusOut: true });
    if (!policy) return undefined;
    return { prompt, model, onRestart: policy.label as CreateTaskArgs['onRestart'] };
  }

  async cancelTask(arg?: unknown): Promise<string | undefined> {
    const id = await this.taskIdFrom(arg, CANCELLABLE_STATUSES, t('Cancel which task?'));
    if (!id) return undefined;
    const task = await this.d.source.cancel(id);
    return task.status;
  }

  async fetchResult(arg?: unknown): Promise<string | undefined> {
    const id = await this.taskIdFrom(arg, TERMINAL_STATUSES, t('Open the result of which task?'));
    if (!id) return undefined;
    const task = await this.d.source.get(id);
    if (!task) throw new Error(t('Task {0} was not found.', id));
    const doc = await vscode.workspace.openTextDocument(resultUri(task));
    await vscode.window.showTextDocument(doc, { preview: true });
    return id;
  }

  async copyResult(arg?: unknown): Promise<string | undefined> {
    const uri = arg instanceof vscode.Uri ? arg : vscode.window.activeTextEditor?.document.uri;
    const id = await this.taskIdFrom(uri && taskIdOfResultUri(uri) ? uri : arg, TERMINAL_STATUSES, t('Copy the result of which task?'));
    if (!id) return undefined;
    const task = await this.d.source.get(id);
    const text = responseText(task?.response ?? null);
    await vscode.env.clipboard.writeText(text);
    void vscode.window.setStatusBarMessage(t('Result copied'), 2000);
    return text;
  }

  async openEvents(arg?: unknown): Promise<string | undefined> {
    const id = await this.taskIdFrom(arg, undefined, t('Show the events of which task?'));
    if (!id) return undefined;
    await this.d.panels.open(id);
    return id;
  }

  async retryTask(arg?: unknown): Promise<string | undefined> {
    const id = await this.taskIdFrom(arg, RETRYABLE_STATUSES, t('Retry which task?'));
    if (!id) return undefined;
    const old = await this.d.source.get(id);
    if (!old) throw new Error(t('Task {0} was not found.', id));
    let prompt = old.prompt;
    if (!prompt) {
      prompt = await vscode.window.showInputBox({ title: t('Retry: prompt'), value: old.title, ignoreFocusOut: true });
      if (!prompt) return undefined;
    }
    const task = await this.d.source.create({ prompt, model: old.model || undefined, onRestart: old.onRestart });
    this.d.notifier.watch(task.id);
    return task.id;
  }

  async deleteTask(arg?: unknown): Promise<string | undefined> {
    const id = await this.taskIdFrom(arg, TERMINAL_STATUSES, t('Delete which task?'));
    if (!id) return undefined;
    await this.d.source.delete(id);
    this.d.panels.get(id)?.dispose();
    return id;
  }

  /** Always asks first, whatever the caller passes: another extension cannot delete the user's tasks unasked. */
  async clearFinished(): Promise<number> {
    if (!(await this.d.confirm(t('Delete every finished task (succeeded, failed, cancelled)?'), t('Delete')))) return 0;
    let deleted = 0;
    for (;;) {
      const page = await this.d.source.list({ statuses: TERMINAL_STATUSES, limit: 100 });
      if (!page.tasks.length) break;
      let progress = 0;
      for (const task of page.tasks) {
        try {
          await this.d.source.delete(task.id);
          deleted++;
          progress++;
        } catch (e) {
          this.d.log.warn(`could not delete ${task.id}: ${String(e)}`);
        }
      }
      if (!progress) break;
    }
    return deleted;
  }

  async copyTaskId(arg?: unknown): Promise<string | undefined> {
    const id = await this.taskIdFrom(arg, undefined, t('Copy the id of which task?'));
    if (!id) return undefined;
    await vscode.env.clipboard.writeText(id);
    return id;
  }

  private async setModel(value: string): Promise<void> {
    await vscode.workspace.getConfiguration(CONFIG_SECTION).update(SETTING_KEYS.model, value, vscode.ConfigurationTarget.Global);
  }

  /**
   * Adds an entry to taskRuntime.engines (a preset's URL, a name, an optional API key). The key goes to
   * SecretStorage only, before the setting changes, so the runtime restart the setting causes already finds it.
   */
  async addRemoteEngine(arg?: unknown): Promise<string | undefined> {
    let input: z.infer<typeof addEngineArgsSchema>;
    const existing = this.d.settings().engines.map((e) => e.name);
    const checkName = (v: string) => {
      try {
        checkEngineName(v);
      } catch (e) {
        return (e as Error).message;
      }
      return existing.includes(v) ? t('An engine named "{0}" exists already.', v) : undefined;
    };
    const checkUrl = (v: string) => {
      try {
        normalizeEngineUrl(v);
      } catch (e) {
        return (e as Error).message;
      }
      return undefined;
    };
    if (arg !== undefined) {
      const parsed = addEngineArgsSchema.safeParse(arg);
      if (!parsed.success) throw new Error(t('Invalid Add Remote Engine arguments: {0}', parsed.error.issues[0].message));
      input = parsed.data;
      const problem = checkName(input.name) ?? checkUrl(input.url);
      if (problem) throw new Error(problem);
    } else {
      const preset = await vscode.window.showQuickPick(
        ENGINE_PRESETS.map((p) => ({ label: p.label, description: p.id === 'other' ? '' : p.url, preset: p })),
        { title: t('Add Remote Engine'), placeHolder: t('Which server runs the models?') },
      );
      if (!preset) return undefined;
      const url = await vscode.window.showInputBox({
        title: t('Add Remote Engine'),
        prompt: t('The OpenAI-style base URL (ending in /v1). Several URLs of one engine, separated by commas, form a pool.'),
        value: preset.preset.url,
        validateInput: (v) => v.split(',').map((u) => checkUrl(u)).find((m) => m),
      });
      if (!url) return undefined;
      let suggested: string = preset.preset.name;
      for (let i = 2; existing.includes(suggested); i++) suggested = `${preset.preset.name}${i}`;
      const name = await vscode.window.showInputBox({
        title: t('Add Remote Engine'),
        prompt: t('A short name; its models appear as NAME/model-id.'),
        value: suggested,
        validateInput: (v) => checkName(v),
      });
      if (!name) return undefined;
      const apiKey = await vscode.window.showInputBox({
        title: t('Add Remote Engine'),
        prompt: t('API key, if the server needs one (kept in the editor\'s secret storage, never in settings). Leave empty for none.'),
        password: true,
        ignoreFocusOut: true,
      });
      if (apiKey === undefined) return undefined;
      input = { name, url, apiKey: apiKey.trim() || undefined, kind: preset.preset.kind };
    }
    const urls = input.url.split(',').map((u) => normalizeEngineUrl(u));
    if (input.apiKey) await this.d.secrets.store(engineKeySecret(input.name), input.apiKey.trim());
    else await this.d.secrets.delete(engineKeySecret(input.name));
    const config = vscode.workspace.getConfiguration(CONFIG_SECTION);
    const current = (config.get<unknown[]>(SETTING_KEYS.engines) ?? []).filter((e) => (e as { name?: unknown })?.name !== input.name);
    const entry = { name: input.name, urls, ...(input.kind ? { kind: input.kind } : {}) };
    await config.update(SETTING_KEYS.engines, [...current, entry], vscode.ConfigurationTarget.Global);
    this.d.log.info(`remote engine ${input.name} added (${urls.join(', ')})${input.apiKey ? ' with an API key in secret storage' : ''}`);
    return input.name;
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
    // The setting change restarts the runtime with the new model; wait for it, then load (= download).
    await this.d.service.restart();
    const backend = this.d.service.backend;
    if (!backend) throw new Error(t('The task runtime is not running.'));
    const modelId = backend.resolveModel(undefined);
    if (!modelId) throw new Error(t('The model {0} is not known to the backend.', value));
    return vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: t('Downloading model {0}', value), cancellable: true },
      async (progress, token) => {
        const abort = new AbortController();
        token.onCancellationRequested(() => abort.abort());
        let last = 0;
        try {
          await backend.load(modelId, {
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
          if (abort.signal.aborted) return false;
          throw e;
        }
      },
    );
  }

  private async requireEndpoint() {
    const endpoint = this.d.service.endpoint;
    if (!endpoint) throw new Error(t('The task runtime is not listening yet.'));
    return endpoint;
  }

  async copyMcpConfig(): Promise<string> {
    const endpoint = await this.requireEndpoint();
    const token = await this.d.tokens.get();
    const config = JSON.stringify(
      { servers: { 'task-runtime': { type: 'http', url: endpoint.mcpUrl, headers: { Authorization: `Bearer ${token}` } } } },
      null,
      2,
    );
    await vscode.env.clipboard.writeText(config);
    void vscode.window.showInformationMessage(t('MCP server configuration copied (it contains the access token).'));
    return config;
  }

  async copyLmspEndpoint(): Promise<string> {
    const endpoint = await this.requireEndpoint();
    await vscode.env.clipboard.writeText(endpoint.lmspUrl);
    void vscode.window.setStatusBarMessage(t('LMSP endpoint copied: {0}', endpoint.lmspUrl), 3000);
    return endpoint.lmspUrl;
  }

  /** Always asks first, whatever the caller passes: another extension cannot cut off the user's clients unasked. */
  async regenerateToken(): Promise<boolean> {
    const question = t('Regenerate the access token? Clients using the old token (other agents, scripts) must be reconfigured.');
    if (!(await this.d.confirm(question, t('Regenerate')))) return false;
    await this.d.tokens.regenerate();
    await this.d.service.tokenChanged();
    return true;
  }
}
