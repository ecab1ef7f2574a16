// Entry point: wires the task service (ownership), the Tasks view, the events panels, commands, the MCP server
// definition provider, the status bar and settings. Activation stays fast: the store opens in the background and
// node-llama-cpp loads only when a model is needed.
import * as vscode from 'vscode';
import {
  exportedApi,
  type ConfirmationStub,
  type TaskRuntimeExtensionApi,
  type TaskRuntimeTestApi,
  type TaskRuntimeTestMembers,
  type TreeItemSnapshot,
} from './api';
import { CommandRegistry } from './commands';
import { CONFIG_SECTION, ContextKeys, OUTPUT_CHANNEL_NAME, engineKeySecret } from './constants';
import { TaskService, type EndpointInfo } from './host/taskService';
import { Disposable, toDisposable } from './lifecycle';
import { registerChatProvider } from './lm/chatProvider';
import { PendingRequests } from './model/pendingRequests';
import { McpServerProvider } from './mcpProvider';
import { readSettings, restartNeeded, type ExtensionSettings } from './model/settings';
import { describeStartup, StartupProbe, type StartupFigures } from './startupProbe';
import { TokenStore } from './tokenStore';
import { webhookSecret } from './webhookSecret';
import { CompletionNotifier } from './ui/completionNotifier';
import { ResultDocumentProvider } from './ui/resultDocument';
import { StatusBar } from './ui/statusBar';
import { OverviewViewProvider } from './views/overviewView';
import { TasksTreeProvider } from './views/tasksTreeProvider';
import { EventsPanelManager } from './webview/eventsPanelManager';
import { WorkspaceIndexController } from './workspaceIndex/indexController';

export type { TaskRuntimeExtensionApi, TaskRuntimeTestApi } from './api';

class TaskRuntimeExtension extends Disposable {
  readonly log: vscode.LogOutputChannel;
  readonly service: TaskService;
  readonly panels: EventsPanelManager;
  private readonly tree: TasksTreeProvider;
  readonly overview: OverviewViewProvider;
  private settings: ExtensionSettings;
  /** Set only through the test API (see api.ts): scripted answers to modal confirmations. */
  private confirmationStub: { answer: boolean; asked: string[] } | undefined;
  private startupResult: StartupFigures | undefined;

  constructor(
    context: vscode.ExtensionContext,
    private readonly startup: StartupProbe,
  ) {
    super();
    this.log = this._register(vscode.window.createOutputChannel(OUTPUT_CHANNEL_NAME, { log: true }));
    this.settings = this.readSettings();
    const tokens = this._register(new TokenStore(context.secrets));
    const workspaceIndex = this._register(new WorkspaceIndexController(context.globalStorageUri.fsPath, this.log, () => this.settings));
    this.service = this._register(
      new TaskService({
        dataDir: context.globalStorageUri.fsPath,
        settings: () => this.settings,
        token: () => tokens.get(),
        log: (m) => this.log.info(m),
        onStoreDamage: ({ unrecoveredBatches }) => {
          const show = vscode.l10n.t('Show Log');
          const message =
            unrecoveredBatches > 0
              ? vscode.l10n.t(
                  'Task Runtime: the task store was damaged and {0} recent changes could not be restored; some tasks or events may be missing. The damaged files were kept. Details are in the log.',
                  unrecoveredBatches,
                )
              : vscode.l10n.t(
                  'Task Runtime: the task store was damaged; everything was restored. The damaged files were kept. Details are in the log.',
                );
          void vscode.window.showWarningMessage(message, show).then((choice) => choice === show && this.log.show());
        },
        engineKey: (name) => Promise.resolve(context.secrets.get(engineKeySecret(name))),
        webhookSecret: () => webhookSecret(context.secrets),
        workspaceIndex: workspaceIndex.source,
      }),
    );
    const source = this.service.source;
    this.overview = this._register(new OverviewViewProvider(context.extensionUri, source, this.service));
    // Chat requests waiting for their model's first load, shown in the tree before their task exists.
    const pending = this._register(new PendingRequests());
    const tree = (this.tree = this._register(new TasksTreeProvider(source, this.overview.throughput, pending)));
    this.panels = this._register(new EventsPanelManager(context.extensionUri, source));
    const notifier = this._register(new CompletionNotifier(source, () => this.settings));
    this._register(new ResultDocumentProvider(source));
    this._register(new StatusBar(this.service, tree.model));
    this._register(new McpServerProvider(this.service, tokens));
    this._register(
      registerChatProvider({
        source,
        onDidChangeState: (l) => this.service.onDidChangeState(l),
        loadModel: async (model) => {
          await this.service.runtime?.loadModel(model);
        },
        pending,
        log: (m) => this.log.info(m),
      }),
    );
    const commands = this._register(
      new CommandRegistry({
        service: this.service,
        source,
        tree,
        panels: this.panels,
        notifier,
        tokens,
        log: this.log,
        settings: () => this.settings,
        confirm: (message, action) => this.confirm(message, action),
        secrets: context.secrets,
        webhookSecret: () => webhookSecret(context.secrets),
        workspaceIndex,
      }),
    );
    this._register(tokens.onDidChange(() => void this.service.tokenChanged()));
    this._register(this.service.onDidChangeState(() => void vscode.commands.executeCommand('setContext', ContextKeys.role, this.service.role)));
    this._register(
      vscode.workspace.onDidChangeConfiguration((e) => {
        if (!e.affectsConfiguration(CONFIG_SECTION)) return;
        const before = this.settings;
        this.settings = this.readSettings();
        if (restartNeeded(before, this.settings) && this.service.role === 'owner') {
          this.log.info('settings changed; restarting the task runtime');
          void this.service.restart();
        }
      }),
    );
    this._register(toDisposable(() => void this.service.stop()));
    // In the background: activate() returns before the store opens (the tree says it is loading meanwhile).
    const report = (outcome: string) => {
      this.startupResult = this.startup.finish();
      this.log.info(describeStartup(this.startupResult, outcome));
    };
    void this.service.start().then(
      () => {
        report(`the runtime was ${this.service.role}`);
        // The window that runs models offers the native engine build once (nativeBuildCommands.ts).
        if (this.service.role === 'owner') void commands.nativeBuild.offerAtStart(context.globalState);
      },
      () => report('start-up failed'),
    );
  }

  private readSettings(): ExtensionSettings {
    const config = vscode.workspace.getConfiguration(CONFIG_SECTION);
    const { settings, problems } = readSettings((key) => config.get(key), vscode.l10n.t);
    for (const p of problems) {
      this.log.warn(p);
      void vscode.window.showWarningMessage(p);
    }
    return settings;
  }

  /** A modal warning with one action; true when the user chose it. */
  private async confirm(message: string, action: string): Promise<boolean> {
    const stub = this.confirmationStub;
    if (stub) {
      stub.asked.push(message);
      return stub.answer;
    }
    return (await vscode.window.showWarningMessage(message, { modal: true }, action)) === action;
  }

  api(): TaskRuntimeExtensionApi | TaskRuntimeTestApi {
    const publicApi: TaskRuntimeExtensionApi = {
      getEndpoint: () => {
        const e: EndpointInfo | undefined = this.service.endpoint;
        return e && { url: e.url, lmspUrl: e.lmspUrl, mcpUrl: e.mcpUrl };
      },
      isOwner: () => this.service.role === 'owner',
      getRole: () => this.service.role,
      whenReady: async () => {
        await this.service.source.ready();
        await this.service.source.connected();
      },
    };
    return exportedApi(publicApi, () => this.testMembers(), process.env);
  }

  private testMembers(): TaskRuntimeTestMembers {
    return {
      getTaskSource: () => this.service.source,
      openEventPanels: () => this.panels.openTaskIds(),
      getTreeSnapshot: () => this.treeSnapshot(),
      startupFigures: () => this.startupResult,
      stubConfirmations: (answer: boolean): ConfirmationStub => {
        const stub = { answer, asked: [] as string[] };
        this.confirmationStub = stub;
        return {
          asked: stub.asked,
          dispose: () => {
            if (this.confirmationStub === stub) this.confirmationStub = undefined;
          },
        };
      },
    };
  }

  private async treeSnapshot(node?: Parameters<TasksTreeProvider['getChildren']>[0]): Promise<TreeItemSnapshot[]> {
    const children = await this.tree.getChildren(node);
    return Promise.all(
      children.map(async (child) => {
        const item = this.tree.getTreeItem(child);
        const label = typeof item.label === 'string' ? item.label : (item.label?.label ?? '');
        const description = typeof item.description === 'string' ? item.description : undefined;
        return { id: item.id, label, description, contextValue: item.contextValue, children: await this.treeSnapshot(child) };
      }),
    );
  }
}

let current: TaskRuntimeExtension | undefined;

export function activate(context: vscode.ExtensionContext): TaskRuntimeExtensionApi | TaskRuntimeTestApi {
  const startup = new StartupProbe();
  current = new TaskRuntimeExtension(context, startup);
  context.subscriptions.push(current);
  const api = current.api();
  startup.activated();
  return api;
}

export async function deactivate(): Promise<void> {
  const ext = current;
  current = undefined;
  if (ext) {
    // Close the store and listener cleanly so another window can take over at once.
    await ext.service.stop();
    ext.dispose();
  }
}
