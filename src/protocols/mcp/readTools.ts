// The helper tools: get_task_text and list_models (read-only), cancel_tasks, embed (a direct call: runtime/
// embeddings.ts). They never create tasks.
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { TaskRuntimeApi } from '../../runtime/api';
import { describeHardware } from '../../runtime/backend';
import { answerTextDelta } from '../../runtime/responseEvents';
import type { TaskRecord } from '../../runtime/task';
import { answerText } from '../../runtime/responses';
import { mcpStatus, statusMessage } from './mcpTaskView';
import type { EmbedArgs } from './tools';

/** Text generated so far: the final response when terminal, else the output_text deltas in the event log. */
export function textSoFar(runtime: TaskRuntimeApi, task: TaskRecord): string {
  if (task.response) return answerText(task.response);
  try {
    let text = '';
    for (const ev of runtime.readEvents(task.id, undefined, task.principal)) {
      text += answerTextDelta(ev);
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
  const queue = task.status === 'queued' ? runtime.queueInfo(task.id) : null;
  let text = textSoFar(runtime, task);
  const truncated = args.maxChars !== undefined && text.length > args.maxChars;
  if (truncated) text = text.slice(text.length - (args.maxChars ?? 0));
  const summary = statusMessage(task, queue);
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

/** cancel_tasks: the caller's tasks of the filter cancelled in one batch (runtime.cancelTasks). */
export function cancelTasks(
  runtime: TaskRuntimeApi,
  principal: string,
  args: { status?: Array<'queued' | 'running'>; model?: string },
): CallToolResult {
  const changed = runtime.cancelTasks({
    principal,
    statuses: args.status ?? ['queued'],
    model: args.model,
    reason: 'cancelled by the client (cancel_tasks)',
  });
  const lines = changed.map((t) => `${t.id} (${t.title}): ${t.status}`);
  return {
    content: [{ type: 'text', text: changed.length ? `Cancelled ${changed.length} task(s):\n${lines.join('\n')}` : 'No task to cancel.' }],
    structuredContent: { count: changed.length, tasks: changed.map((t) => ({ taskId: t.id, status: t.status, model: t.model, title: t.title })) },
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
        // As GET /models has them (docs/lmsp.md, "Model capabilities"): not known yet → false.
        capabilities: { tools: m.capabilities?.tools ?? false, reasoning: m.capabilities?.reasoning ?? false },
      })),
    },
  };
}

/**
 * embed: the vectors in structuredContent only; the text content says what came back (a client reading the text, or a
 * model shown it, needs no thousands of numbers). Refusals are the runtime's errors (-32602 naming the argument).
 */
export async function embed(runtime: TaskRuntimeApi, principal: string, signal: AbortSignal, args: EmbedArgs): Promise<CallToolResult> {
  const inputs = typeof args.input === 'string' ? [args.input] : args.input;
  const result = await runtime.embed({ principal, model: args.model, inputs, signal });
  const tokens = result.tokens.reduce((a, b) => a + b, 0);
  const count = result.vectors.length;
  return {
    content: [
      {
        type: 'text',
        text: `${count} vector${count === 1 ? '' : 's'} of ${result.dimensions} dimensions from ${result.model} (${tokens} tokens); the vectors are in structuredContent.data.`,
      },
    ],
    structuredContent: {
      model: result.model,
      dimensions: result.dimensions,
      data: result.vectors.map((v, index) => ({ index, embedding: Array.from(v) })),
      usage: { prompt_tokens: tokens, total_tokens: tokens },
    },
  };
}
