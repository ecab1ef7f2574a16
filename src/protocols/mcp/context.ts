// What every MCP handler needs, built once per door.
import type { TaskRuntimeApi } from '../../runtime/api';
import type { CreationGuard } from './limits';
import type { TaskNotifier } from './notifier';
import type { TaskViewOptions } from './mcpTaskView';
import type { WorkspaceIndexSource } from '../../workspaceIndex/reader';

export interface McpContext {
  runtime: TaskRuntimeApi;
  view: TaskViewOptions;
  guard: CreationGuard;
  notifier: TaskNotifier;
  /** tasks/list page size. */
  pageSize: number;
  log: (m: string) => void;
  /** The editor's workspace index, for search_workspace (searchWorkspaceTool.ts); absent: none is offered. */
  workspaceIndex?: WorkspaceIndexSource;
}

/** Per-request facts the handlers get from the session that received it. */
export interface CallerContext {
  principal: string;
  /** Aborted when the HTTP request carrying this JSON-RPC request goes away (or the request is cancelled). */
  signal: AbortSignal;
}
