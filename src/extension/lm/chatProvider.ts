// The runtime's models as VS Code language models (vendor `task-runtime`): other extensions reach them through
// `vscode.lm.selectChatModels`, users through the Chat view's model picker. Every request is a durable task made
// through the editor's task source, so it shows in the Tasks view like any other, survives as a record, and a
// cancelled request cancels its task. The agent-mode picker lists only models with `toolCalling`, and only once some
// extension has resolved the vendor's models, so this provider resolves them itself once the runtime is up (what
// code-server showed: docs/editor.md). Mapping and trimming live in chatMapping.ts (pure, unit-tested).
import * as vscode from 'vscode';
import { LM_VENDOR } from '../constants';
import { Disposable, toDisposable, type IDisposable } from '../lifecycle';
import type { TaskSource, TaskInfo } from '../model/taskSource';
import type { PendingRequests } from '../model/pendingRequests';
import { answerTextDelta, TERMINAL_EVENT_TYPES } from '../../runtime/responseEvents';
import {
  chatModelInfos,
  chatTitle,
  estimateTokens,
  fitToContext,
  functionCallOf,
  functionCallsOf,
  messageText,
  samplingFromModelOptions,
  toFunctionTools,
  toInputItems,
  toToolChoice,
  MESSAGE_OVERHEAD_TOKENS,
  type ChatModelInfo,
} from './chatMapping';

const t = vscode.l10n.t;

export interface ChatProviderDeps {
  source: TaskSource;
  /** Fired when the runtime starts, stops or changes owner (the model list may change with it). */
  onDidChangeState(listener: () => void): IDisposable;
  /** Loads a model ahead of a request so its real context is known (owner only; undefined elsewhere). */
  loadModel?: (model: string) => Promise<void>;
  /** Where a request waiting for its model's load shows before its task exists (the Tasks tree). */
  pending?: PendingRequests;
  log: (message: string) => void;
}

export class TaskRuntimeChatProvider extends Disposable implements vscode.LanguageModelChatProvider<vscode.LanguageModelChatInformation> {
  private readonly changed = this._register(new vscode.EventEmitter<void>());
  readonly onDidChangeLanguageModelChatInformation = this.changed.event;
  private lastSignature = '';
  private refreshTimer: ReturnType<typeof setTimeout> | undefined;

  constructor(private readonly d: ChatProviderDeps) {
    super();
    this._register(d.onDidChangeState(() => this.scheduleRefresh()));
    // A task that ran may have loaded a model (its real context is known then): look again, at most twice a second.
    this._register(d.source.onDidChangeTask((task) => task.status !== 'running' && this.scheduleRefresh()));
    this._register(toDisposable(() => this.refreshTimer && clearTimeout(this.refreshTimer)));
  }

  private scheduleRefresh(): void {
    if (this.refreshTimer || this.isDisposed) return;
    this.refreshTimer = setTimeout(() => {
      this.refreshTimer = undefined;
      void this.models().then((models) => {
        const signature = JSON.stringify(models);
        if (signature === this.lastSignature) return;
        const first = this.lastSignature === '';
        this.lastSignature = signature;
        this.changed.fire();
        // The Chat view's picker shows a vendor's models only once some extension resolved them.
        if (first && models.length) void vscode.lm.selectChatModels({ vendor: LM_VENDOR }).then(undefined, () => undefined);
      });
    }, 500);
  }

  private async models(): Promise<ChatModelInfo[]> {
    try {
      return chatModelInfos(await this.d.source.listModels());
    } catch {
      return [];
    }
  }

  async provideLanguageModelChatInformation(): Promise<vscode.LanguageModelChatInformation[]> {
    const models = await this.models();
    this.lastSignature = JSON.stringify(models);
    return models;
  }

  async provideLanguageModelChatResponse(
    model: vscode.LanguageModelChatInformation,
    messages: readonly vscode.LanguageModelChatRequestMessage[],
    options: vscode.ProvideLanguageModelChatResponseOptions,
    progress: vscode.Progress<vscode.LanguageModelResponsePart>,
    token: vscode.CancellationToken,
  ): Promise<void> {
    if (token.isCancellationRequested) return;
    // Shown in the tree from now until its task exists: the first request may wait for its model's load.
    const shown = this.d.pending?.add(chatTitle(toInputItems(messages)), model.id);
    let task: TaskInfo;
    try {
      const made = await this.makeTask(model, messages, options, token);
      if (!made) return;
      task = made;
    } finally {
      shown?.dispose();
    }
    const final = await this.follow(task, progress, token);
    if (final.status === 'succeeded') return;
    if (final.status === 'cancelled' && token.isCancellationRequested) return;
    const detail = final.error?.detail ?? final.error?.title ?? final.statusMessage ?? final.status;
    if (final.error?.code === 'model_not_found') throw vscode.LanguageModelError.NotFound(detail);
    throw new Error(t('Task Runtime: the request ended {0}: {1}', final.status, detail));
  }

  /** Fits the conversation to the model's context (loading a local model first when it is unknown) and makes its task. */
  private async makeTask(
    model: vscode.LanguageModelChatInformation,
    messages: readonly vscode.LanguageModelChatRequestMessage[],
    options: vscode.ProvideLanguageModelChatResponseOptions,
    token: vscode.CancellationToken,
  ): Promise<TaskInfo | undefined> {
    const info = await this.currentInfo(model.id);
    const required = options.toolMode === vscode.LanguageModelChatToolMode.Required;
    const fit = await fitToContext(
      toInputItems(messages),
      toFunctionTools(options.tools),
      info.maxInputTokens,
      (text) => this.count(model.id, text),
      required,
    );
    if (fit.dropped.items || fit.dropped.tools || fit.dropped.cutTokens) {
      this.d.log(
        `chat request for ${model.id} trimmed to ${fit.tokens}/${info.maxInputTokens} tokens: ${fit.dropped.items} history item(s), ${fit.dropped.tools} tool(s), ${fit.dropped.cutTokens} token(s) of text`,
      );
    }
    if (token.isCancellationRequested) return undefined;
    const sampling = samplingFromModelOptions(options.modelOptions);
    // Without a budget a reply gets the room kept for output (the advertised maxOutputTokens). A caller may ask for
    // another (modelOptions `maxOutputTokens` or `max_tokens`): less, or more when its prompt leaves the room (a short
    // question, a long answer), as llama.cpp's server gives. Either is an "up to" budget: the input's fit is estimated
    // (fitToContext), so the budget is capped to the room the prompt leaves in the context rather than refused.
    const asked = options.modelOptions?.['maxOutputTokens'] ?? options.modelOptions?.['max_tokens'];
    const context = info.maxInputTokens + info.maxOutputTokens;
    const maxOutputTokens = Number.isInteger(asked) && (asked as number) > 0 ? Math.min(asked as number, context) : info.maxOutputTokens;
    return this.d.source.create({
      prompt: '',
      input: fit.items,
      model: model.id,
      title: chatTitle(fit.items),
      maxOutputTokens,
      capMaxOutputTokens: true,
      sampling,
      ...(fit.tools.length ? { tools: fit.tools, toolChoice: required ? 'required' : toToolChoice(options.toolMode) } : {}),
    });
  }

  /** The model's information now (its context may have become known since VS Code listed it). */
  private async currentInfo(id: string): Promise<ChatModelInfo> {
    let models = await this.d.source.listModels();
    let m = models.find((x) => x.id === id);
    if (!m) throw vscode.LanguageModelError.NotFound(t('The model {0} is not available in Task Runtime.', id));
    if (m.contextLength == null && !m.engine && this.d.loadModel) {
      // A local model's context is known once it is loaded; the task would load it anyway.
      await this.d.loadModel(id);
      models = await this.d.source.listModels();
      m = models.find((x) => x.id === id) ?? m;
    }
    return chatModelInfos([m])[0]!;
  }

  /** Streams the task's text and tool calls until it ends; cancels it when the token does. */
  private follow(task: TaskInfo, progress: vscode.Progress<vscode.LanguageModelResponsePart>, token: vscode.CancellationToken): Promise<TaskInfo> {
    const reported = new Set<string>();
    const reportCall = (c: { callId: string; name: string; input: object }) => {
      if (reported.has(c.callId)) return;
      reported.add(c.callId);
      progress.report(new vscode.LanguageModelToolCallPart(c.callId, c.name, c.input));
    };
    return new Promise<TaskInfo>((resolve, reject) => {
      let settled = false;
      let sub: IDisposable | undefined;
      let cancel: IDisposable | undefined;
      const finish = async () => {
        if (settled) return;
        settled = true;
        // Deferred: the local source may replay a stored terminal event while subscribeEvents is still returning.
        await Promise.resolve();
        sub?.dispose();
        cancel?.dispose();
        try {
          const final = await this.d.source.get(task.id);
          if (!final) throw new Error(t('The task {0} was deleted while it ran.', task.id));
          // Calls the stream did not carry as items (or carried before they were complete) come from the response.
          for (const c of functionCallsOf(final.response)) reportCall(c);
          resolve(final);
        } catch (e) {
          reject(e instanceof Error ? e : new Error(String(e)));
        }
      };
      sub = this.d.source.subscribeEvents(task.id, undefined, {
        onEvent: (e) => {
          const text = answerTextDelta(e);
          if (text) {
            progress.report(new vscode.LanguageModelTextPart(text));
          } else if (e.type === 'response.output_item.done') {
            const call = functionCallOf(e.data['item']);
            if (call) reportCall(call);
          }
          if (TERMINAL_EVENT_TYPES.has(e.type)) void finish();
        },
        onEnd: () => void finish(),
        onError: () => void finish(),
      });
      cancel = token.onCancellationRequested(() => {
        void this.d.source.cancel(task.id).catch((e: unknown) => this.d.log(`could not cancel ${task.id}: ${String(e)}`));
      });
      if (token.isCancellationRequested) void this.d.source.cancel(task.id).catch(() => undefined);
    });
  }

  private async count(model: string, text: string): Promise<number> {
    try {
      const n = await this.d.source.countTokens(model, text);
      if (n !== null) return n;
    } catch {
      // Not ready or not reachable: estimate.
    }
    return estimateTokens(text);
  }

  async provideTokenCount(model: vscode.LanguageModelChatInformation, text: string | vscode.LanguageModelChatRequestMessage): Promise<number> {
    if (typeof text === 'string') return this.count(model.id, text);
    return (await this.count(model.id, messageText(text))) + MESSAGE_OVERHEAD_TOKENS;
  }
}

/** Registers the provider under the contributed vendor. */
export function registerChatProvider(deps: ChatProviderDeps): vscode.Disposable {
  const provider = new TaskRuntimeChatProvider(deps);
  const registration = vscode.lm.registerLanguageModelChatProvider(LM_VENDOR, provider);
  return vscode.Disposable.from(registration, { dispose: () => provider.dispose() });
}
