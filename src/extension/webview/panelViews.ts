// TaskInfo → the panel protocol's TaskView (no output body), the request as the panel shows it (InputView) and the
// model the task runs on (ModelView). Pure: no vscode, unit-tested on Node.
import type { InputItemView, InputView, ModelView, TaskView } from './protocol';
import { choiceName, modelToolsOf } from '../../runtime/responseTools';
import type { ResponseRequest } from '../../runtime/task';
import type { ModelSummary, TaskInfo } from '../model/taskSource';

/** Longest text of one input item or tool schema sent to the panel; the rest is cut with a note. */
export const INPUT_TEXT_LIMIT = 64_000;
const INPUT_ITEM_LIMIT = 200;

export function toTaskView(task: TaskInfo): TaskView {
  const input = task.input
    ? inputView(task.input)
    : task.prompt
      ? { instructions: null, items: [{ kind: 'message' as const, role: 'user', text: cut(task.prompt) }], options: [], tools: [], toolChoice: null }
      : undefined;
  return {
    id: task.id,
    title: task.title,
    status: task.status,
    statusMessage: task.statusMessage,
    origin: task.origin ?? 'unknown',
    model: task.model,
    createdAt: task.createdAt,
    updatedAt: task.updatedAt,
    attempt: task.attempt,
    outputTokens: task.outputTokens,
    usage: task.usage,
    error: task.error
      ? { type: task.error.type, title: task.error.title, status: task.error.status, detail: task.error.detail, code: task.error.code }
      : null,
    ...(input ? { input } : {}),
  };
}

function cut(text: string): string {
  return text.length > INPUT_TEXT_LIMIT ? `${text.slice(0, INPUT_TEXT_LIMIT)}\n… (${text.length - INPUT_TEXT_LIMIT} more characters)` : text;
}

/** JSON text pretty-printed when it parses, else as it is. */
export function prettyJson(value: unknown): string {
  if (typeof value === 'string') {
    try {
      return cut(JSON.stringify(JSON.parse(value), null, 2));
    } catch {
      return cut(value);
    }
  }
  return cut(JSON.stringify(value, null, 2) ?? String(value));
}

function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .map((p) => (p && typeof p === 'object' && typeof (p as { text?: unknown }).text === 'string' ? (p as { text: string }).text : ''))
    .join('');
}

/** The request as the panel lists it: each input item on its own, options as name/value pairs. */
export function inputView(req: ResponseRequest): InputView {
  const items: InputItemView[] = [];
  const input = typeof req.input === 'string' ? [{ role: 'user', content: req.input }] : Array.isArray(req.input) ? req.input : [];
  for (const raw of input.slice(0, INPUT_ITEM_LIMIT)) {
    if (!raw || typeof raw !== 'object') continue;
    const it = raw as Record<string, unknown>;
    if (it['type'] === 'function_call') {
      items.push({
        kind: 'function_call',
        callId: String(it['call_id'] ?? ''),
        name: String(it['name'] ?? ''),
        arguments: prettyJson(it['arguments'] ?? ''),
      });
    } else if (it['type'] === 'function_call_output') {
      items.push({ kind: 'function_call_output', callId: String(it['call_id'] ?? ''), output: prettyJson(it['output'] ?? '') });
    } else if (typeof it['role'] === 'string') {
      items.push({ kind: 'message', role: it['role'], text: cut(contentText(it['content'])) });
    }
  }
  const options: Array<[string, string]> = [];
  const add = (name: string, value: unknown) => {
    if (value === undefined || value === null) return;
    options.push([name, typeof value === 'string' ? value : JSON.stringify(value)]);
  };
  add('max_output_tokens', req.max_output_tokens);
  add('temperature', req.temperature);
  add('top_p', req.top_p);
  add('top_logprobs', req.top_logprobs);
  for (const [k, v] of Object.entries(req.task_runtime ?? {})) {
    if (k !== 'origin') add(`task_runtime.${k}`, v);
  }
  if (req.reasoning?.effort) add('reasoning.effort', req.reasoning.effort);
  if (req.parallel_tool_calls !== undefined) add('parallel_tool_calls', req.parallel_tool_calls);
  const format = req.text?.format;
  if (format && format.type !== 'text') {
    if (format.type === 'json_schema')
      options.push(['text.format', `json_schema ${format.name}${format.strict ? ' (strict)' : ''}\n${prettyJson(format.schema)}`]);
    else add('text.format', format.type);
  }
  if (req.previous_response_id) add('previous_response_id', req.previous_response_id);
  // The tools as the model saw them (namespace members flattened, hosted tools left out: runtime/responseTools.ts).
  const tools = modelToolsOf(req.tools)
    .slice(0, INPUT_ITEM_LIMIT)
    .map(({ definition: t }) => ({
      name: t.name,
      description: t.description ?? '',
      parameters: t.parameters ? prettyJson(t.parameters) : '',
    }));
  const choice = req.tool_choice;
  return {
    instructions: req.instructions ? cut(req.instructions) : null,
    items,
    options,
    tools,
    toolChoice: choice === undefined ? null : typeof choice === 'string' ? choice : `${choice.type} ${choiceName(choice)}`,
  };
}

/** The model the panel shows: where it runs, with how much context. */
export function toModelView(m: ModelSummary): ModelView {
  const h = m.hardwareInfo;
  return {
    id: m.id,
    state: m.state,
    compute: m.engine ? 'remote' : (h?.compute ?? ''),
    devices: h?.devices ?? [],
    gpuLayers: h && h.compute !== 'cpu' ? h.gpuLayers : null,
    totalLayers: h?.totalLayers ?? null,
    threads: h && !m.engine ? h.threads : null,
    contextLength: m.contextLength ?? null,
    engine: m.engine ?? null,
    summary: m.hardware ?? '',
  };
}
