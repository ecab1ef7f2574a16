// Tells VS Code's agent mode where our MCP server is, with the bearer token, so no manual configuration is needed.
import * as vscode from 'vscode';
import { MCP_PROVIDER_ID, MCP_SERVER_LABEL } from './constants';
import type { TaskService } from './host/taskService';
import { Disposable } from './lifecycle';
import type { TokenStore } from './tokenStore';

export class McpServerProvider extends Disposable implements vscode.McpServerDefinitionProvider<vscode.McpHttpServerDefinition> {
  private readonly _onDidChange = this._register(new vscode.EventEmitter<void>());
  readonly onDidChangeMcpServerDefinitions = this._onDidChange.event;
  private lastKey: string | undefined;

  constructor(
    private readonly service: TaskService,
    private readonly tokens: TokenStore,
  ) {
    super();
    this._register(vscode.lm.registerMcpServerDefinitionProvider(MCP_PROVIDER_ID, this));
    this._register(this.service.onDidChangeState(() => void this.maybeFire()));
    this._register(this.tokens.onDidChange(() => void this.maybeFire()));
  }

  private async maybeFire(): Promise<void> {
    const url = this.service.endpoint?.mcpUrl;
    const key = url ? `${url}|${await this.tokens.get()}` : '';
    if (key === this.lastKey) return;
    this.lastKey = key;
    this._onDidChange.fire();
  }

  async provideMcpServerDefinitions(): Promise<vscode.McpHttpServerDefinition[]> {
    const url = this.service.endpoint?.mcpUrl;
    if (!url) return [];
    const token = await this.tokens.get();
    this.lastKey = `${url}|${token}`;
    return [new vscode.McpHttpServerDefinition(MCP_SERVER_LABEL, vscode.Uri.parse(url), { Authorization: `Bearer ${token}` })];
  }

  async resolveMcpServerDefinition(server: vscode.McpHttpServerDefinition): Promise<vscode.McpHttpServerDefinition | undefined> {
    // The server may have moved (restart, takeover) since the definition was handed out.
    const url = this.service.endpoint?.mcpUrl;
    if (!url) return server;
    const token = await this.tokens.get();
    server.uri = vscode.Uri.parse(url);
    server.headers = { ...server.headers, Authorization: `Bearer ${token}` };
    return server;
  }
}
