// Every id the manifest (package.json contributes) and the code share, in one place.

export const EXTENSION_ID = 'task-runtime.task-runtime';

export const VIEW_CONTAINER_ID = 'taskRuntime';
export const TASKS_VIEW_ID = 'taskRuntime.tasks';
export const OVERVIEW_VIEW_ID = 'taskRuntime.overview';
export const EVENTS_PANEL_VIEW_TYPE = 'taskRuntime.events';
export const RESULT_DOCUMENT_SCHEME = 'task-runtime-result';
export const TASK_URI_SCHEME = 'task-runtime';

export const MCP_PROVIDER_ID = 'taskRuntime.mcp';
/** Vendor of our language models (package.json `languageModelChatProviders`; vscode.lm.selectChatModels({vendor})). */
export const LM_VENDOR = 'task-runtime';
export const MCP_SERVER_LABEL = 'Task Runtime';

export const SECRET_TOKEN_KEY = 'taskRuntime.token';
/** SecretStorage key of the completion webhook's signing secret (webhookSecret.ts). */
export const SECRET_WEBHOOK_KEY = 'taskRuntime.webhookSecret';
export const CONFIG_SECTION = 'taskRuntime';

export const Commands = {
  createTask: 'taskRuntime.createTask',
  cancelTask: 'taskRuntime.cancelTask',
  runNext: 'taskRuntime.runNext',
  cancelQueued: 'taskRuntime.cancelQueued',
  fetchResult: 'taskRuntime.fetchResult',
  openEvents: 'taskRuntime.openEvents',
  retryTask: 'taskRuntime.retryTask',
  deleteTask: 'taskRuntime.deleteTask',
  clearFinished: 'taskRuntime.clearFinished',
  copyTaskId: 'taskRuntime.copyTaskId',
  selectModel: 'taskRuntime.selectModel',
  downloadModel: 'taskRuntime.downloadModel',
  buildNativeEngine: 'taskRuntime.buildNativeEngine',
  addRemoteEngine: 'taskRuntime.addRemoteEngine',
  copyMcpConfig: 'taskRuntime.copyMcpConfig',
  copyLmspEndpoint: 'taskRuntime.copyLmspEndpoint',
  copyOpenAiEndpoint: 'taskRuntime.copyOpenAiEndpoint',
  regenerateToken: 'taskRuntime.regenerateToken',
  copyWebhookSecret: 'taskRuntime.copyWebhookSecret',
  restartServer: 'taskRuntime.restartServer',
  showLog: 'taskRuntime.showLog',
  refresh: 'taskRuntime.refresh',
  loadMore: 'taskRuntime.loadMore',
  copyResult: 'taskRuntime.copyResult',
  showView: 'taskRuntime.showView',
  indexWorkspace: 'taskRuntime.indexWorkspace',
  searchWorkspace: 'taskRuntime.searchWorkspace',
  indexControl: 'taskRuntime.indexControl',
} as const;
export type CommandId = (typeof Commands)[keyof typeof Commands];

/** The principal the editor's token maps to; editor-created tasks and VS Code's MCP client share it. */
export const EDITOR_PRINCIPAL = 'editor';
/** File the owning window writes in the data directory once it listens: `{ pid, url, port }`. */
export const ENDPOINT_RECORD_FILE = 'endpoint.json';
/** Context keys for `when` clauses. */
export const ContextKeys = {
  role: 'taskRuntime.role',
  hasTasks: 'taskRuntime.hasTasks',
} as const;
export const OUTPUT_CHANNEL_NAME = 'Task Runtime';
/** SecretStorage key of a remote engine's API key (never in settings). */
export function engineKeySecret(name: string): string {
  return `taskRuntime.engineKey.${name}`;
}
/**
 * Environment variable the editor test harness sets (to "1") in the extension host: only then does activate() return
 * the test API (tree snapshot, open panels, scripted confirmations). Never set for users.
 */
export const TEST_API_ENV = 'TASK_RUNTIME_TEST_API';
