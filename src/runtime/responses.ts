// Responses-shaped objects and events (OpenAI Responses / Open Responses vocabulary) built from a task.
import type { ChatMessage, GenerateRequest, TokenLogprob, ToolCall } from './backend';
import { itemObject, type OutputItem } from './outputItems';
import { INCLUDE_OUTPUT_LOGPROBS, type ResponseRequest, type ResponseSamplingExtras, type TaskRecord, type Usage } from './task';

export type ResponseStatus = 'queued' | 'in_progress' | 'completed' | 'incomplete' | 'failed' | 'cancelled';

const seconds = (ms: number) => Math.floor(ms / 1000);

export interface ResponseParts {
  status: ResponseStatus;
  text?: string;
  /** Log-probabilities of the output text's tokens, when asked for. */
  logprobs?: TokenLogprob[];
  messageId?: string;
  itemStatus?: 'in_progress' | 'completed' | 'incomplete';
  /** Reasoning and function-call items after the message (outputItems.ts). */
  items?: readonly OutputItem[];
  usage?: Usage | null;
  error?: { code: string; message: string } | null;
  incompleteReason?: string | null;
  completedAt?: number | null;
}

export function responseObject(task: TaskRecord, parts: ResponseParts): Record<string, unknown> {
  const input = task.input;
  const itemStatus = parts.itemStatus ?? 'completed';
  const output: Array<Record<string, unknown>> =
    parts.messageId !== undefined
      ? [
          {
            id: parts.messageId,
            type: 'message',
            status: itemStatus,
            role: 'assistant',
            content: [{ type: 'output_text', text: parts.text ?? '', annotations: [], logprobs: parts.logprobs ?? [] }],
          },
          ...(parts.items ?? []).map((item) => itemObject(item, itemStatus)),
        ]
      : [];
  const tools = input.tools ?? [];
  return {
    id: task.responseId,
    object: 'response',
    created_at: seconds(task.createdAt),
    status: parts.status,
    // Echoed from the request (OpenAI background mode; store defaults to true).
    background: input.background === true,
    completed_at: parts.completedAt ? seconds(parts.completedAt) : null,
    model: task.model,
    instructions: input.instructions ?? null,
    max_output_tokens: input.max_output_tokens ?? null,
    temperature: input.temperature ?? null,
    top_p: input.top_p ?? null,
    top_logprobs: input.top_logprobs ?? null,
    output,
    output_text: parts.text ?? '',
    parallel_tool_calls: input.parallel_tool_calls ?? true,
    tool_choice: input.tool_choice ?? (tools.length ? 'auto' : 'none'),
    tools: tools.map((t) => ({ type: 'function', name: t.name, description: t.description ?? null, parameters: t.parameters ?? null, strict: t.strict ?? null })),
    reasoning: input.reasoning ? { effort: input.reasoning.effort ?? null, summary: input.reasoning.summary ?? null } : null,
    // The request's format as it was given (OpenAI echoes it; a schema comes back whole).
    text: { format: input.text?.format ?? { type: 'text' } },
    truncation: 'disabled',
    previous_response_id: input.previous_response_id ?? null,
    store: input.store !== false,
    metadata: input.metadata ?? {},
    usage: parts.usage ?? null,
    error: parts.error ?? null,
    incomplete_details: parts.incompleteReason ? { reason: parts.incompleteReason } : null,
  };
}

/** Minimal LMSP-shaped task snapshot carried by `task_runtime:task.status` events. */
export function taskStatusSnapshot(task: TaskRecord): Record<string, unknown> {
  return {
    task: {
      id: task.id,
      object: 'task',
      status: task.status === 'input_required' ? 'running' : task.status,
      status_message: task.statusMessage,
      attempt: task.attempt,
      updated_at: seconds(task.updatedAt),
    },
  };
}

function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) {
    return content
      .map((part) => {
        if (part && typeof part === 'object' && 'text' in part && typeof (part as { text: unknown }).text === 'string') {
          return (part as { text: string }).text;
        }
        return '';
      })
      .join('');
  }
  return '';
}

/**
 * Chat messages for the backend from a Responses request (string input = one user message). A `function_call`
 * input item joins the assistant message just before it (or makes one), a `function_call_output` is a `tool`
 * message; reasoning items from an earlier turn are not given back to the model.
 */
export function toChatMessages(input: ResponseRequest): ChatMessage[] {
  if (typeof input.input === 'string') return [{ role: 'user', content: input.input }];
  const messages: ChatMessage[] = [];
  for (const item of input.input) {
    if (!item || typeof item !== 'object') continue;
    const it = item as { type?: string; role?: string; content?: unknown; output?: unknown; call_id?: unknown; name?: unknown; arguments?: unknown };
    if ((it.type === undefined || it.type === 'message') && typeof it.role === 'string') {
      const role = (['system', 'developer', 'user', 'assistant'] as const).find((r) => r === it.role) ?? 'user';
      messages.push({ role, content: contentText(it.content) });
    } else if (it.type === 'function_call') {
      const call: ToolCall = { callId: String(it.call_id ?? ''), name: String(it.name ?? ''), arguments: String(it.arguments ?? '') };
      const last = messages[messages.length - 1];
      if (last?.role === 'assistant') (last.toolCalls ??= []).push(call);
      else messages.push({ role: 'assistant', content: '', toolCalls: [call] });
    } else if (it.type === 'function_call_output') {
      const output = typeof it.output === 'string' ? it.output : contentText(it.output) || JSON.stringify(it.output ?? '');
      messages.push({ role: 'tool', callId: String(it.call_id ?? ''), content: output });
    }
  }
  return messages;
}

/**
 * The sampling fields of the request's vendor member `task_runtime`, by the GenerateRequest field each becomes: the
 * one table for the mapping and for the `param` a refusal names (`task_runtime.<name>`).
 */
export const SAMPLING_EXTRAS = {
  seed: 'seed',
  stop: 'stop',
  topK: 'top_k',
  minP: 'min_p',
  repeatPenalty: 'repeat_penalty',
  frequencyPenalty: 'frequency_penalty',
  presencePenalty: 'presence_penalty',
} as const satisfies Partial<Record<keyof GenerateRequest, keyof ResponseSamplingExtras>>;
export type SamplingField = keyof typeof SAMPLING_EXTRAS;

/** What the backend is asked for a stored request (its model already resolved). */
export function generateRequestOf(input: ResponseRequest, model: string): GenerateRequest {
  const x = input.task_runtime ?? {};
  const format = input.text?.format;
  const wantLogprobs = input.include?.includes(INCLUDE_OUTPUT_LOGPROBS) ?? false;
  const out: GenerateRequest = {
    model,
    instructions: input.instructions,
    messages: toChatMessages(input),
    maxOutputTokens: input.max_output_tokens,
    capMaxOutputTokens: x.cap_max_output_tokens === true && input.max_output_tokens !== undefined ? true : undefined,
    temperature: input.temperature,
    topP: input.top_p,
    topLogprobs: wantLogprobs ? (input.top_logprobs ?? 0) : undefined,
    format: format && format.type !== 'text' ? format : undefined,
    ...toolsOf(input),
    reasoningEffort: input.reasoning?.effort,
    cacheKey: input.prompt_cache_key,
  };
  const sampling = out as Record<SamplingField, unknown>;
  for (const [field, name] of Object.entries(SAMPLING_EXTRAS) as Array<[SamplingField, keyof ResponseSamplingExtras]>) sampling[field] = x[name];
  // `stop` is a string or a list on the wire, always a list (or absent) for a backend.
  if (typeof x.stop === 'string') out.stop = [x.stop];
  else if (!x.stop?.length) delete out.stop;
  for (const k of Object.keys(out) as Array<keyof GenerateRequest>) if (out[k] === undefined) delete out[k];
  return out;
}

/** The tools part of a GenerateRequest: none for tool_choice `none`. */
function toolsOf(input: ResponseRequest): Pick<GenerateRequest, 'tools' | 'toolChoice' | 'parallelToolCalls'> {
  const choice = input.tool_choice ?? 'auto';
  if (!input.tools?.length || choice === 'none') return {};
  return {
    tools: input.tools.map((t) => ({
      name: t.name,
      ...(t.description !== undefined ? { description: t.description } : {}),
      ...(t.parameters !== undefined ? { parameters: t.parameters } : {}),
      ...(t.strict !== undefined ? { strict: t.strict } : {}),
    })),
    toolChoice: typeof choice === 'object' ? { name: choice.name } : choice,
    ...(input.parallel_tool_calls !== undefined ? { parallelToolCalls: input.parallel_tool_calls } : {}),
  };
}

/** A short title from the last user message. */
export function titleOf(input: ResponseRequest): string {
  const messages = toChatMessages(input);
  const last = [...messages].reverse().find((m) => m.role === 'user') ?? messages[messages.length - 1];
  const text = (last?.content ?? '').replace(/\s+/g, ' ').trim();
  if (!text) return '(empty prompt)';
  return text.length > 80 ? `${text.slice(0, 77)}…` : text;
}
