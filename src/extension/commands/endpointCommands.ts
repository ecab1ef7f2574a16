// Commands on this window's endpoint and server: copy the MCP configuration, the LMSP URL or the OpenAI-compatible
// endpoint, regenerate the access token, restart the runtime, show the log. Any extension can run any command (VS Code
// does not say who asked), so the ones that touch the token take no arguments, always ask the user first with a
// modal, and give the caller nothing secret back: Copy MCP Server Config and Copy OpenAI-Compatible Endpoint put the
// token on the clipboard only after the user said yes and return only whether they did (the MCP one
// returned the token to whoever ran it).
import * as vscode from 'vscode';
import { Commands } from '../constants';
import type { TaskService } from '../host/taskService';
import { Disposable } from '../lifecycle';
import type { TokenStore } from '../tokenStore';
import type { RegisterCommand } from './register';

const t = vscode.l10n.t;

export interface EndpointCommandDeps {
  service: Pick<TaskService, 'endpoint' | 'restart' | 'tokenChanged'>;
  tokens: Pick<TokenStore, 'get' | 'regenerate'>;
  log: vscode.LogOutputChannel;
  /** Asks a modal yes/no question with one action button; true when the user chose the action. */
  confirm: (message: string, action: string) => Promise<boolean>;
  /** The completion webhook's signing secret (SecretStorage; created on first use). */
  webhookSecret?: () => Promise<string>;
}

export class EndpointCommands extends Disposable {
  constructor(
    private readonly d: EndpointCommandDeps,
    register: RegisterCommand,
  ) {
    super();
    const reg = (...a: Parameters<RegisterCommand>) => this._register(register(...a));
    reg(Commands.copyMcpConfig, () => this.copyMcpConfig());
    reg(Commands.copyLmspEndpoint, () => this.copyLmspEndpoint());
    reg(Commands.copyOpenAiEndpoint, () => this.copyOpenAiEndpoint());
    reg(Commands.regenerateToken, () => this.regenerateToken());
    reg(Commands.copyWebhookSecret, () => this.copyWebhookSecret());
    reg(Commands.restartServer, () => d.service.restart());
    reg(Commands.showLog, () => d.log.show());
  }

  private requireEndpoint() {
    const endpoint = this.d.service.endpoint;
    if (!endpoint) throw new Error(t('The task runtime is not listening yet.'));
    return endpoint;
  }

  /** Asks first, whatever the caller passes; returns whether the config was copied, never the config itself. */
  async copyMcpConfig(): Promise<boolean> {
    const endpoint = this.requireEndpoint();
    const question = t(
      'Copy the MCP server configuration to the clipboard? It contains the access token: anything that reads the clipboard can then use this task runtime.',
    );
    if (!(await this.d.confirm(question, t('Copy')))) return false;
    const token = await this.d.tokens.get();
    const config = JSON.stringify(
      { servers: { 'task-runtime': { type: 'http', url: endpoint.mcpUrl, headers: { Authorization: `Bearer ${token}` } } } },
      null,
      2,
    );
    await vscode.env.clipboard.writeText(config);
    void vscode.window.showInformationMessage(t('MCP server configuration copied (it contains the access token).'));
    return true;
  }

  async copyLmspEndpoint(): Promise<string> {
    const endpoint = this.requireEndpoint();
    await vscode.env.clipboard.writeText(endpoint.lmspUrl);
    void vscode.window.setStatusBarMessage(t('LMSP endpoint copied: {0}', endpoint.lmspUrl), 3000);
    return endpoint.lmspUrl;
  }

  /**
   * An OpenAI client's settings (`baseURL` = the LMSP base, where /chat/completions, /responses and /models are;
   * `apiKey` = the access token) as JSON, after the user agreed to put the token on the clipboard. Undefined when not.
   */
  async copyOpenAiEndpoint(): Promise<string | undefined> {
    const endpoint = this.requireEndpoint();
    const question = t(
      'Copy the OpenAI-compatible endpoint with the access token to the clipboard? Any program that reads the clipboard can then use the token.',
    );
    if (!(await this.d.confirm(question, t('Copy with Token')))) return undefined;
    const snippet = JSON.stringify({ baseURL: endpoint.lmspUrl, apiKey: await this.d.tokens.get() }, null, 2);
    await vscode.env.clipboard.writeText(snippet);
    void vscode.window.showInformationMessage(t('OpenAI-compatible endpoint copied (baseURL and apiKey, which is the access token).'));
    return snippet;
  }

  /**
   * The completion webhook's signing secret (taskRuntime.webhook.url), for the receiver's verification: on the
   * clipboard after the user agreed; returns only whether it was copied.
   */
  async copyWebhookSecret(): Promise<boolean> {
    if (!this.d.webhookSecret) return false;
    const question = t(
      'Copy the completion webhook signing secret to the clipboard? Anything that reads the clipboard can then sign requests your webhook receiver accepts.',
    );
    if (!(await this.d.confirm(question, t('Copy')))) return false;
    await vscode.env.clipboard.writeText(await this.d.webhookSecret());
    void vscode.window.showInformationMessage(t('Webhook signing secret copied. Verify deliveries with it (Standard Webhooks).'));
    return true;
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
