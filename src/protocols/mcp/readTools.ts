// The read-only helper tools: get_task_text and list_models. They never create tasks.
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { TaskRuntimeApi } from '../../runtime/api';
import { describeHardware } from '../../runtime/backend';
import { EVENT } from '../../runtime/responseEvents';
import type { TaskRecord } from '../../runtime/task';
import { answerText } from '../../runtime/responses';
import { mcpStatus, statusMessage } from './mcpTaskView';

/** Text generated so far: the final response when terminal, else the output_text deltas in the event log. */
export function textSoFar(runtime: TaskRuntimeApi, task: TaskRecord): string {
  if (task.response) return answerText(task.response);
  try {
    let text = '';
    for (const ev of runtime.readEvents(task.id, undefined, task.principal)) {
      if (ev.type === EVENT.outputTextDelta && typeof ev.data['delta'] === 'string') text += ev.data['delta'];
    }
    return text;
  } catch {
    return '';
  }
}

export function getTaskText(runtime: TaskRuntimeApi, principal: string, args: { taskId: string; maxChars?: number }): CallToolResult {
  const task = runtime.getTask(args.taskId, principal);
  if (!task) {
    // A tool execution error, so the calling model can correct the id itself.
    return {
      content: [{ type: 'text', text: `No task ${args.taskId} (unknown, expired, or not yours).` }],
      isError: true,
    };
  }
  const position = task.status === 'queued' ? runtime.queuePosition(task.id) : null;
  let text = textSoFar(runtime, task);
  const truncated = args.maxChars !== undefined && text.length > args.maxChars;
  if (truncated) text = text.slice(text.length - (args.maxChars ?? 0));
  const summary = statusMessage(task, position);
  const structured = {
    taskId: task.id,
    origin: task.origin,
    status: task.status,
    mcpStatus: mcpStatus(task.status),
    statusMessage: summary,
    model: task.model,
    title: task.title,
    outputTokens: task.outputTokens,
    createdAt: new Date(task.createdAt).toISOString(),
    lastUpdatedAt: new Date(task.updatedAt).toISOString(),
    text,
    truncated,
    error: task.error,
  };
  return {
    content: [{ type: 'text', text: `[${task.status}] ${summary}\n\n${text}` }],
    structuredContent: structured,
  };
}

export function listModels(runtime: TaskRuntimeApi): CallToolResult {
  const models = runtime.listModels();
  const lines = models.map(
    (m) =>
      `${m.id} (${m.state}${m.engine ? `, remote engine ${m.engine}` : ''}${m.demo ? ', demo weights' : ''})${m.hardware ? `: ${describeHardware(m.hardware)}` : ''}`,
  );
  return {
    content: [{ type: 'text', text: lines.length ? lines.join('\n') : 'No models configured.' }],
    // Only what a client needs: never `source` (a local path names the user's folders; an engine URL its network).
    structuredContent: {
      models: models.map((m) => ({
        id: m.id,
        state: m.state,
        demo: m.demo,
        maxContextLength: m.maxContextLength,
        contextLength: m.contextLength ?? null,
        ...(m.engine ? { engine: m.engine } : {}),
        ...(m.hardware ? { hardware: m.hardware } : {}),
      })),
    },
  };
}
