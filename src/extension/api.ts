// What activate() returns. Other extensions get the public API; the test API (the task source, the view's rows, open
// panels, scripted answers to confirmations) is returned only when the editor test harness sets TEST_API_ENV. Pure:
// no vscode.
//
// Why the task source is not public: it shows every principal's tasks, prompts and outputs (agents' MCP
// tasks included) and can create and cancel them. VS Code does not tell an exported API who calls it, so "what the
// caller may see" cannot be decided here, and a confirmation could not name the extension asking. Other extensions
// run prompts through the language-model API instead (vendor `task-runtime`: vscode.lm.selectChatModels), which
// gives each request's caller its own answer and nothing else, or through the LMSP/MCP endpoints with a token the
// user handed them (Copy MCP Server Config asks first).
import { TEST_API_ENV } from './constants';
import type { IDisposable } from './lifecycle';
import type { TaskSource } from './model/taskSource';
import type { StartupFigures } from './startupProbe';

export interface TaskRuntimeExtensionApi {
  /** Where the runtime listens (no token: a client needs one the user gives it). */
  getEndpoint(): { url: string; lmspUrl: string; mcpUrl: string } | undefined;
  isOwner(): boolean;
  /** 'starting' | 'owner' | 'client' | 'waiting' | 'stopped' | 'failed' */
  getRole(): string;
  /**
   * Resolves once this window owns the store or is attached to the owner with its change feed connected (rejects
   * after a timeout).
   */
  whenReady(): Promise<void>;
}

export interface TreeItemSnapshot {
  id: string | undefined;
  label: string;
  description: string | undefined;
  contextValue: string | undefined;
  children: TreeItemSnapshot[];
}

/** Answers modal confirmations while it lives, and records what they asked. */
export interface ConfirmationStub extends IDisposable {
  readonly asked: readonly string[];
}

/** Only for the editor test harness: never returned to other extensions. */
export interface TaskRuntimeTestMembers {
  /** Every task of every principal, as the Tasks view sees them (see the header for why this is not public). */
  getTaskSource(): TaskSource;
  /** Task ids with an open events panel. */
  openEventPanels(): string[];
  /** What the Tasks view's data provider shows: groups with their (loaded) rows, as tree items. */
  getTreeSnapshot(): Promise<TreeItemSnapshot[]>;
  /** Modal confirmations (Clear Finished, Regenerate Token) answer `answer` instead of asking, until disposed. */
  stubConfirmations(answer: boolean): ConfirmationStub;
  /** How start-up went (startupProbe.ts): undefined until the runtime opened or attached, or failed. */
  startupFigures(): StartupFigures | undefined;
}

export type TaskRuntimeTestApi = TaskRuntimeExtensionApi & TaskRuntimeTestMembers;

/** True only when the harness asked for the test API (the variable set to exactly "1"). */
export function testApiEnabled(env: Record<string, string | undefined>): boolean {
  return env[TEST_API_ENV] === '1';
}

/** The public API, plus the test members when the environment asks for them. */
export function exportedApi(
  publicApi: TaskRuntimeExtensionApi,
  testMembers: () => TaskRuntimeTestMembers,
  env: Record<string, string | undefined>,
): TaskRuntimeExtensionApi | TaskRuntimeTestApi {
  return testApiEnabled(env) ? { ...publicApi, ...testMembers() } : publicApi;
}
