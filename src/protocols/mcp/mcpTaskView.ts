// How a runtime task looks to an MCP client: status mapping (docs/architecture.md),
// status messages, and the tools/call outcome derived from the stored record.
import type { CallToolResult, Task as McpTask } from '@modelcontextprotocol/sdk/types.js';
import { ErrorCode } from '@modelcontextprotocol/sdk/types.js';
import { answerText } from '../../runtime/responses';
import { queueSummary, type QueueInfo } from '../../runtime/queue';
import { TERMINAL_STATUSES, type TaskRecord, type TaskStatus } from '../../runtime/task';

export type McpTaskStatus = McpTask['status'];

/**
 * The runtime's statuses as MCP task statuses, for both eras: 2025-11-25 shows exactly this; 2026-07-28 too, except
 * that an ended task's `completed` or `failed` follows its tool outcome (modern/modernTasks.ts).
 */
const MCP_STATUS: Record<TaskStatus, McpTaskStatus> = {
  queued: 'working',
  loading: 'working',
  running: 'working',
  input_required: 'input_required',
  cancelling: 'cancelled',
  cancelled: 'cancelled',
  succeeded: 'completed',
  failed: 'failed',
};
const MCP_TERMINAL: ReadonlySet<McpTaskStatus> = new Set(TERMINAL_STATUSES.map((s) => MCP_STATUS[s]));

export function mcpStatus(status: TaskStatus): McpTaskStatus {
  return MCP_STATUS[status];
}

export function isMcpTerminal(status: McpTaskStatus): boolean {
  return MCP_TERMINAL.has(status);
}

/** The runtime's cancel reason without its own status prefix. */
function cancelReason(task: TaskRecord): string {
  const reason = (task.statusMessage ?? '').replace(/^(cancelling|cancelled):?\s*/i, '').trim();
  return reason && reason !== 'cancelling' ? ` (${reason})` : '';
}

function tokens(n: number): string {
  return `${n} token${n === 1 ? '' : 's'}`;
}

/** VS Code shows this text while polling and, for failed tasks, as the only diagnostics it ever fetches. */
export function statusMessage(task: TaskRecord, queue: QueueInfo | null): string {
  switch (task.status) {
    case 'queued':
      return queueSummary(queue);
    case 'loading':
      return `loading model ${task.model} …`;
    case 'running':
      return `generating: ${tokens(task.outputTokens)}`;
    case 'input_required':
      return task.statusMessage ?? 'waiting for input';
    case 'cancelling':
      return `cancelled: stopping generation after ${tokens(task.outputTokens)}`;
    case 'cancelled':
      return `cancelled after ${tokens(task.outputTokens)}${cancelReason(task)}`;
    case 'succeeded':
      return `completed: ${tokens(task.outputTokens)}`;
    case 'failed':
      return failureDiagnostics(task);
  }
}

function failureDiagnostics(task: TaskRecord): string {
  const e = task.error;
  const what = (e ? `${e.code}: ${e.detail || e.title}` : (task.statusMessage ?? 'unknown error')).replace(/\.+$/, '');
  const hint = e && /restart|interrupt/i.test(`${e.code} ${e.detail}`) ? ' Re-issue the tool call to run it again.' : '';
  return `failed after ${tokens(task.outputTokens)}: ${what}.${hint}`;
}

export interface TaskViewOptions {
  pollIntervalMs: number;
}

export function toMcpTask(task: TaskRecord, queue: QueueInfo | null, opts: TaskViewOptions): McpTask {
  const status = mcpStatus(task.status);
  const view: McpTask = {
    taskId: task.id,
    status,
    statusMessage: statusMessage(task, queue),
    createdAt: new Date(task.createdAt).toISOString(),
    lastUpdatedAt: new Date(task.updatedAt).toISOString(),
    ttl: task.ttlMs,
  };
  if (!isMcpTerminal(status)) view.pollInterval = opts.pollIntervalMs;
  return view;
}

/** Runtime failure codes that mean the tools/call request itself was unacceptable: a JSON-RPC error, not a tool error. */
const REQUEST_ERROR_CODES = new Set([
  'invalid_request',
  'invalid_json_schema',
  'context_length_exceeded',
  'model_not_found',
  'unsupported_capability',
]);

/**
 * `_meta` key of a structured-output result: the task details that sit in structuredContent otherwise (there the
 * parsed answer must stand alone, to validate against the caller's schema).
 */
export const RUN_META_KEY = 'task-runtime/run';

export type ToolOutcome = { result: CallToolResult } | { error: { code: number; message: string; data?: unknown } };

/**
 * What the original tools/call would have returned, derived from the stored record alone (so it survives a
 * restart). Cancelled tasks answer an isError result carrying the partial text (decision in MCP-door notes).
 */
export function toolOutcome(task: TaskRecord): ToolOutcome | undefined {
  const text = answerText(task.response);
  const base = {
    taskId: task.id,
    model: task.model,
    outputTokens: task.outputTokens,
    usage: task.usage,
  };
  switch (task.status) {
    case 'succeeded':
      if (task.request.text?.format && task.request.text.format.type !== 'text') return structuredOutcome(task, text, base);
      return {
        result: {
          content: [{ type: 'text', text }],
          structuredContent: { status: 'completed', text, ...base },
          isError: false,
        },
      };
    case 'failed': {
      const problem = task.error;
      // The backend ended the request with a protocol-level error: that JSON-RPC error, as it gave it.
      if (problem?.code === 'request_error' && problem.requestError) {
        const { code, message, data } = problem.requestError;
        return { error: { code, message, ...(data !== undefined ? { data } : {}) } };
      }
      if (problem && REQUEST_ERROR_CODES.has(problem.code)) {
        return { error: { code: ErrorCode.InvalidParams, message: problem.detail || problem.title, data: { problem } } };
      }
      const diag = failureDiagnostics(task);
      return {
        result: {
          content: [{ type: 'text', text: text ? `${diag}\n\nPartial output:\n${text}` : diag }],
          structuredContent: { status: 'failed', error: problem, text, ...base },
          isError: true,
        },
      };
    }
    case 'cancelled': {
      const msg = `Task was cancelled after ${tokens(task.outputTokens)}${cancelReason(task)}.`;
      return {
        result: {
          content: [{ type: 'text', text: text ? `${msg}\n\nPartial output:\n${text}` : msg }],
          structuredContent: { status: 'cancelled', text, ...base },
          isError: true,
        },
      };
    }
    default:
      return undefined;
  }
}

/**
 * A generation asked for JSON (`output_schema`): structuredContent is the parsed answer, the text stays in content.
 * Output that does not parse — cut off at max_output_tokens, or from an engine that did not constrain it — is a tool
 * error with the text, never a structuredContent that fails the caller's schema.
 */
function structuredOutcome(task: TaskRecord, text: string, base: Record<string, unknown>): ToolOutcome {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  const incomplete = task.response?.['status'] === 'incomplete';
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    const why = incomplete ? 'it stopped at max_output_tokens; raise it' : 'it is not a JSON object';
    return {
      result: {
        content: [{ type: 'text', text: `The output does not follow output_schema: ${why}.\n\nOutput:\n${text}` }],
        structuredContent: { status: incomplete ? 'incomplete' : 'invalid_output', text, ...base },
        isError: true,
      },
    };
  }
  return {
    result: {
      content: [{ type: 'text', text }],
      structuredContent: parsed as Record<string, unknown>,
      isError: false,
      _meta: { [RUN_META_KEY]: { status: 'completed', ...base } },
    },
  };
}
