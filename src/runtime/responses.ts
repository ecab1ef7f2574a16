// Responses-shaped objects and events (OpenAI Responses / Open Responses vocabulary) built from a task.
import type { ChatMessage, GenerateRequest, TokenLogprob, ToolCall } from './backend';
import { deepFreeze, isObject, list } from './jsonValues';
import { samplingOf } from './requestFields';
import { itemObject, type OutputItem } from './outputItems';
import { choiceName, customCallArguments, flatToolName, ignoredToolsOf, modelToolsOf } from './responseTools';
import { INCLUDE_OUTPUT_LOGPROBS, type ResponseRequest, type TaskRecord, type Usage } from './task';

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
  /** The request's stop string that ended the output, when the backend said which (GenerateResult.stopSequence). */
  stopSequence?: string;
}

/** The members of a response object that echo its request and may be large: stored in events as references. */
export const REQUEST_ECHO_KEYS = ['instructions', 'tools', 'text'] as const;
export type RequestEcho = Readonly<Record<(typeof REQUEST_ECHO_KEYS)[number], unknown>>;

const echoes = new WeakMap<ResponseRequest, RequestEcho>();

/**
 * The request's echo in every response object of its task, built once per request object and frozen: each
 * response object shares it, so the store can tell an echo by identity and keep it out of the events
 * (taskStore.ts, "Echoes of the request").
 */
export function requestEcho(input: ResponseRequest): RequestEcho {
  let echo = echoes.get(input);
  if (!echo) {
    const tools = input.tools ?? [];
    echo = deepFreeze({
      instructions: input.instructions ?? null,
      // Function tools in OpenAI's echo shape; the others (namespace, custom, hosted) as they were given.
      tools: tools.map((t) =>
        t.type === 'function'
          ? { type: 'function', name: t.name, description: t.description ?? null, parameters: t.parameters ?? null, strict: t.strict ?? null }
          : t,
      ),
      // The request's format as it was given (OpenAI echoes it; a schema comes back whole).
      text: { format: input.text?.format ?? { type: 'text' }, ...(input.text?.verbosity ? { verbosity: input.text.verbosity } : {}) },
    });
    echoes.set(input, echo);
  }
  return echo;
}

export function responseObject(task: TaskRecord, parts: ResponseParts): Record<string, unknown> {
  const input = task.request;
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
  const echo = requestEcho(input);
  const ignored = ignoredToolsOf(tools);
  // Vendor member: the hosted tools the model was not offered (docs/lmsp.md, "Codex dialect"), the stop string that
  // ended the output (docs/lmsp.md, "Vendor members of the response"). Absent when it would be empty.
  const vendor: Record<string, unknown> = {
    ...(ignored.length ? { ignored_tools: ignored } : {}),
    ...(parts.stopSequence !== undefined ? { stop_sequence: parts.stopSequence } : {}),
  };
  return {
    id: task.responseId,
    object: 'response',
    created_at: seconds(task.createdAt),
    status: parts.status,
    // Echoed from the request (OpenAI background mode; store defaults to true).
    background: input.background === true,
    completed_at: parts.completedAt ? seconds(parts.completedAt) : null,
    model: task.model,
    instructions: echo.instructions,
    max_output_tokens: input.max_output_tokens ?? null,
    temperature: input.temperature ?? null,
    top_p: input.top_p ?? null,
    top_logprobs: input.top_logprobs ?? null,
    output,
    output_text: parts.text ?? '',
    parallel_tool_calls: input.parallel_tool_calls ?? true,
    tool_choice: input.tool_choice ?? (tools.length ? 'auto' : 'none'),
    tools: echo.tools,
    reasoning: input.reasoning ? { effort: input.reasoning.effort ?? null, summary: input.reasoning.summary ?? null } : null,
    text: echo.text,
    ...echoed(input),
    truncation: 'disabled',
    previous_response_id: input.previous_response_id ?? null,
    store: input.store !== false,
    metadata: input.metadata ?? {},
    usage: parts.usage ?? null,
    error: parts.error ?? null,
    incomplete_details: parts.incompleteReason ? { reason: parts.incompleteReason } : null,
    ...(Object.keys(vendor).length ? { task_runtime: vendor } : {}),
  };
}

/** Request members OpenAI's response object repeats, when the request has them. */
function echoed(input: ResponseRequest): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const k of ['prompt_cache_key', 'safety_identifier', 'service_tier', 'max_tool_calls', 'user'] as const)
    if (input[k] !== undefined) out[k] = input[k];
  return out;
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
 * The text of a request's input, the one reader of it (what a task shows as its prompt, what a retry sends again,
 * where the word "json" is looked for): the messages' text, only `roles` when given; with `calls`, tool calls'
 * arguments and tool results too. Reasoning is never part of it. Joined by `separator` (default a newline).
 */
export function inputText(
  request: Pick<ResponseRequest, 'input'>,
  opts: { roles?: readonly ChatMessage['role'][]; calls?: boolean; separator?: string } = {},
): string {
  const texts: string[] = [];
  for (const m of toChatMessages(request as ResponseRequest)) {
    if (m.role === 'tool') {
      if (opts.calls) texts.push(m.content);
      continue;
    }
    if (!opts.roles || opts.roles.includes(m.role)) {
      if (m.content) texts.push(m.content);
    }
    if (opts.calls) for (const c of m.toolCalls ?? []) texts.push(c.arguments);
  }
  return texts.join(opts.separator ?? '\n');
}

/**
 * Chat messages for the backend from a Responses request (string input = one user message). A `function_call` or
 * `custom_tool_call` input item joins the assistant message just before it (or makes one), under the name the model
 * was offered (`<namespace>__<name>`; a custom call's input as its `input` argument); a `function_call_output` or
 * `custom_tool_call_output` is a `tool` message. A reasoning item's `reasoning_text` (the door has put there the text
 * of a sealed `encrypted_content` of ours) opens the assistant turn it belongs to as its earlier reasoning; a reasoning
 * item without text gives nothing.
 */
export function toChatMessages(input: ResponseRequest): ChatMessage[] {
  if (typeof input.input === 'string') return [{ role: 'user', content: input.input }];
  const messages: ChatMessage[] = [];
  /** The assistant turn the next assistant part joins: the last message when it is one. */
  const assistant = (): ChatMessage => {
    const last = messages[messages.length - 1];
    if (last?.role === 'assistant') return last;
    const m: ChatMessage = { role: 'assistant', content: '' };
    messages.push(m);
    return m;
  };
  for (const item of input.input) {
    if (!item || typeof item !== 'object') continue;
    const it = item as {
      type?: string;
      role?: string;
      content?: unknown;
      output?: unknown;
      call_id?: unknown;
      name?: unknown;
      namespace?: unknown;
      arguments?: unknown;
      input?: unknown;
    };
    const namespace = typeof it.namespace === 'string' ? it.namespace : undefined;
    if ((it.type === undefined || it.type === 'message') && typeof it.role === 'string') {
      const role = (['system', 'developer', 'user', 'assistant'] as const).find((r) => r === it.role) ?? 'user';
      const last = messages[messages.length - 1];
      // The answer after its reasoning item is the same turn.
      if (role === 'assistant' && last?.role === 'assistant' && last.reasoning !== undefined && !last.content && !last.toolCalls)
        last.content = contentText(it.content);
      else messages.push({ role, content: contentText(it.content) });
    } else if (it.type === 'function_call' || it.type === 'custom_tool_call') {
      const args = it.type === 'custom_tool_call' ? customCallArguments(String(it.input ?? '')) : String(it.arguments ?? '');
      const call: ToolCall = { callId: String(it.call_id ?? ''), name: flatToolName(String(it.name ?? ''), namespace), arguments: args };
      (assistant().toolCalls ??= []).push(call);
    } else if (it.type === 'function_call_output' || it.type === 'custom_tool_call_output') {
      const output = typeof it.output === 'string' ? it.output : contentText(it.output) || JSON.stringify(it.output ?? '');
      messages.push({ role: 'tool', callId: String(it.call_id ?? ''), content: output });
    } else if (it.type === 'reasoning') {
      const text = contentText(it.content);
      if (!text) continue;
      const last = messages[messages.length - 1];
      const turn = last?.role === 'assistant' && !last.content && !last.toolCalls ? last : undefined;
      if (turn) turn.reasoning = `${turn.reasoning ?? ''}${text}`;
      else messages.push({ role: 'assistant', content: '', reasoning: text });
    }
  }
  return messages;
}

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
    topLogprobs: wantLogprobs ? (input.top_logprobs ?? 0) : undefined,
    format: format && format.type !== 'text' ? format : undefined,
    ...toolsOf(input),
    reasoningEffort: input.reasoning?.effort === 'xhigh' ? 'high' : input.reasoning?.effort,
    cacheKey: input.prompt_cache_key,
  };
  Object.assign(out, samplingOf(input));
  for (const k of Object.keys(out) as Array<keyof GenerateRequest>) if (out[k] === undefined) delete out[k];
  return out;
}

/** The tools part of a GenerateRequest: none for tool_choice `none`. */
function toolsOf(input: ResponseRequest): Pick<GenerateRequest, 'tools' | 'toolChoice' | 'parallelToolCalls'> {
  const choice = input.tool_choice ?? 'auto';
  const tools = modelToolsOf(input.tools).map((t) => t.definition);
  if (!tools.length || choice === 'none') return {};
  return {
    tools,
    toolChoice: typeof choice === 'object' ? { name: choiceName(choice) } : choice,
    ...(input.parallel_tool_calls !== undefined ? { parallelToolCalls: input.parallel_tool_calls } : {}),
  };
}

/**
 * The answer text of a Responses object: the `output_text` parts of its `message` items, in order — never a reasoning
 * item's thoughts, a function call's arguments or a custom call's input. The one reader every door and the editor
 * use (MCP tool results and get_task_text, Open Result, Copy Text); a response without `output` gives its
 * `output_text`.
 */
export function answerText(response: Record<string, unknown> | null | undefined): string {
  if (!response) return '';
  const output = response['output'];
  if (!Array.isArray(output)) return typeof response['output_text'] === 'string' ? response['output_text'] : '';
  let text = '';
  for (const item of output) {
    if (!item || typeof item !== 'object' || (item as { type?: unknown }).type !== 'message') continue;
    const content = (item as { content?: unknown }).content;
    if (!Array.isArray(content)) continue;
    for (const part of content) {
      if (
        part &&
        typeof part === 'object' &&
        (part as { type?: unknown }).type === 'output_text' &&
        typeof (part as { text?: unknown }).text === 'string'
      ) {
        text += (part as { text: string }).text;
      }
    }
  }
  return text;
}

/** A short title from the last user message. */
export function titleOf(input: ResponseRequest): string {
  const messages = toChatMessages(input);
  const last = [...messages].reverse().find((m) => m.role === 'user') ?? messages[messages.length - 1];
  const text = (last?.content ?? '').replace(/\s+/g, ' ').trim();
  if (!text) return '(empty prompt)';
  return text.length > 80 ? `${text.slice(0, 77)}…` : text;
}

/**
 * Log-probabilities as the runtime stored them (a delta event's `logprobs`, an output part's), read leniently: an
 * entry without a token or a numeric logprob is skipped, and `bytes` absent (the store keeps none: they follow from
 * the token) are the token's UTF-8. The one reader for the runtime and every door; what an engine sends is checked
 * strictly where it arrives (backends/remote/chatStream.ts).
 */
export function readLogprobs(raw: unknown): TokenLogprob[] {
  const bytesOf = (e: Record<string, unknown>, token: string) =>
    Array.isArray(e.bytes) && e.bytes.every((b) => Number.isInteger(b)) ? (e.bytes as number[]) : [...Buffer.from(token, 'utf8')];
  const entry = (e: unknown) =>
    isObject(e) && typeof e.token === 'string' && typeof e.logprob === 'number'
      ? { token: e.token, logprob: e.logprob, bytes: bytesOf(e, e.token) }
      : undefined;
  const out: TokenLogprob[] = [];
  for (const e of list(raw)) {
    const head = entry(e);
    if (!head) continue;
    const top = list(isObject(e) ? e.top_logprobs : undefined)
      .map(entry)
      .filter((t) => t !== undefined);
    out.push({ ...head, top_logprobs: top });
  }
  return out;
}
