// Commands on tasks and the Tasks view: create, cancel, open the result or the events, retry, delete, copy. A command
// acting on a task takes a task id, a tree node, a result document's URI or a TaskInfo as its first argument and
// otherwise asks with a quick pick; Create Task also takes its input as an argument object, so tests and other
// extensions can run it without UI. Clear Finished takes no arguments and always asks the user first.
import { fieldProblem } from '../../runtime/requestFields';
import * as vscode from 'vscode';
import { z } from 'zod';
import { CANCELLABLE_STATUSES, RESTART_POLICIES, TERMINAL_STATUSES, type TaskStatus } from '../../runtime/task';
import { Commands, VIEW_CONTAINER_ID } from '../constants';
import { Disposable } from '../lifecycle';
import { statusLabel, taskDescription, taskTitle } from '../model/format';
import type { ExtensionSettings } from '../model/settings';
import { answerText } from '../../runtime/responses';
import { type TaskSource } from '../model/taskSource';
import type { GroupId } from '../model/treeModel';
import type { CompletionNotifier } from '../ui/completionNotifier';
import { resultUri, taskIdOfResultUri } from '../ui/resultDocument';
import type { TasksTreeProvider } from '../views/tasksTreeProvider';
import type { EventsPanelManager } from '../webview/eventsPanelManager';
import type { RegisterCommand } from './register';

const t = vscode.l10n.t;

/** The argument object Create Task accepts (integration tests call it without UI). */
export const createTaskArgsSchema = z.strictObject({
  prompt: z.string().min(1).max(1_000_000),
  model: z.string().min(1).max(1000).optional(),
  onRestart: z.enum(RESTART_POLICIES).optional(),
  maxOutputTokens: z.number().int().min(1).max(1_000_000).optional(),
  temperature: z
    .number()
    .refine((v) => fieldProblem('temperature', v) === undefined, { message: `temperature ${fieldProblem('temperature', -1)}` })
    .optional(),
  instructions: z.string().max(1_000_000).optional(),
});
export type CreateTaskArgs = z.infer<typeof createTaskArgsSchema>;

/** Finished without success: what Retry offers. */
const RETRYABLE_STATUSES: readonly TaskStatus[] = TERMINAL_STATUSES.filter((s) => s !== 'succeeded');

export interface TaskCommandDeps {
  source: TaskSource;
  tree: TasksTreeProvider;
  panels: EventsPanelManager;
  notifier: CompletionNotifier;
  log: vscode.LogOutputChannel;
  settings: () => ExtensionSettings;
  /** Asks a modal yes/no question with one action button; true when the user chose the action. */
  confirm: (message: string, action: string) => Promise<boolean>;
}

export class TaskCommands extends Disposable {
  constructor(
    private readonly d: TaskCommandDeps,
    register: RegisterCommand,
  ) {
    super();
    const reg = (...a: Parameters<RegisterCommand>) => this._register(register(...a));
    reg(Commands.createTask, (arg?: unknown) => this.createTask(arg));
    reg(Commands.cancelTask, (arg?: unknown) => this.cancelTask(arg));
    reg(Commands.runNext, (arg?: unknown) => this.runNext(arg));
    reg(Commands.cancelQueued, () => this.cancelQueued());
    reg(Commands.fetchResult, (arg?: unknown) => this.fetchResult(arg));
    reg(Commands.openEvents, (arg?: unknown) => this.openEvents(arg));
    reg(Commands.retryTask, (arg?: unknown) => this.retryTask(arg));
    reg(Commands.deleteTask, (arg?: unknown) => this.deleteTask(arg));
    reg(Commands.clearFinished, () => this.clearFinished());
    reg(Commands.copyTaskId, (arg?: unknown) => this.copyTaskId(arg));
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
      if (!parsed.success)
        throw new Error(t('Invalid Create Task arguments: {0}', parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')));
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
      sampling: { temperature: args.temperature ?? this.d.settings().temperature ?? undefined },
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
        [
          { label: t('Default model'), id: undefined as string | undefined },
          ...models.map((m) => ({
            label: m.id,
            description: m.demo ? t('demo model') : m.source,
            detail: m.hardware,
            id: m.id as string | undefined,
          })),
        ],
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

  /** Moves a queued task of the editor's to the front of its queue; returns its new position. */
  async runNext(arg?: unknown): Promise<number | undefined> {
    const id = await this.taskIdFrom(arg, ['queued'], t('Run which queued task next?'));
    if (!id) return undefined;
    let task;
    try {
      task = await this.d.source.runNext(id);
    } catch (e) {
      // Another client's task (an agent with its own token): only that client may reorder its queue.
      void vscode.window.showWarningMessage(t('Only the client that created a task can move it in the queue: {0}', (e as Error).message));
      return undefined;
    }
    return task.queue?.position;
  }

  /** Cancels every queued task of the editor's (after asking); returns how many were cancelled. */
  async cancelQueued(): Promise<number> {
    if (!(await this.d.confirm(t('Cancel every task of yours that is waiting in the queue?'), t('Cancel Queued Tasks')))) return 0;
    const changed = await this.d.source.cancelMany(['queued']);
    void vscode.window.setStatusBarMessage(t('{0} queued tasks cancelled', changed.length), 3000);
    return changed.length;
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
    const text = answerText(task?.response ?? null);
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
}
