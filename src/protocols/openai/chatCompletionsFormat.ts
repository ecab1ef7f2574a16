// A task's Responses object and events told as OpenAI chat completions (docs/lmsp.md): the whole
// `chat.completion`, or `chat.completion.chunk`s translated one event at a time as the task's stream delivers them.
// Pure functions of what the runtime stored, so the mapping is tested over recorded objects (tool calls included,
// whose events are the runtime's Responses vocabulary: output_item.added / function_call_arguments.delta / .done).
import type { TokenLogprob } from '../../runtime/backend';
import { answerTextDelta } from '../../runtime/responseEvents';
import { answerText, readLogprobs } from '../../runtime/responses';
import { INCLUDE_OUTPUT_LOGPROBS, type TaskRecord } from '../../runtime/task';
import { HttpProblem, problemBody } from '../http/problem';
import { list, obj, str, type Obj } from '../../runtime/jsonValues';
import { CHAT_COMPLETION_ID_PREFIX, CODES, HEADERS, OBJECTS, type LmspCode } from '../lmsp/lmspConstants';

const TASK_ID_PREFIX = 'task_';

/** `chatcmpl-abc…` for task `task_abc…`: the one rule both ways (lmspConstants CHAT_COMPLETION_ID_PREFIX). */
export function chatCompletionId(taskId: string): string {
  return CHAT_COMPLETION_ID_PREFIX + (taskId.startsWith(TASK_ID_PREFIX) ? taskId.slice(TASK_ID_PREFIX.length) : taskId);
}

export function taskIdOfChatCompletion(id: string): string | undefined {
  return id.startsWith(CHAT_COMPLETION_ID_PREFIX) ? TASK_ID_PREFIX + id.slice(CHAT_COMPLETION_ID_PREFIX.length) : undefined;
}

export type FinishReason = 'stop' | 'length' | 'tool_calls' | 'content_filter';

/** What a completed or incomplete Responses object's end means in chat terms. */
export function finishReasonOf(response: Obj): FinishReason {
  if (list(response.output).some((item) => obj(item).type === 'function_call')) return 'tool_calls';
  if (response.status !== 'incomplete') return 'stop';
  return obj(response.incomplete_details).reason === 'content_filter' ? 'content_filter' : 'length';
}

/** Responses usage (input/output tokens) as chat's prompt/completion tokens; null when there is none. */
export function chatUsage(usage: unknown): Obj | null {
  const u = obj(usage);
  if (typeof u.input_tokens !== 'number' || typeof u.output_tokens !== 'number') return null;
  const out: Obj = {
    prompt_tokens: u.input_tokens,
    completion_tokens: u.output_tokens,
    total_tokens: typeof u.total_tokens === 'number' ? u.total_tokens : u.input_tokens + u.output_tokens,
  };
  const cached = obj(u.input_tokens_details).cached_tokens;
  if (typeof cached === 'number') out.prompt_tokens_details = { cached_tokens: cached };
  const reasoning = obj(u.output_tokens_details).reasoning_tokens;
  const details: Obj = typeof reasoning === 'number' ? { reasoning_tokens: reasoning } : {};
  // Speculative decoding's drafts in chat's Predicted Outputs terms: drafts the model kept, and those it refused.
  const spec = obj(obj(u.task_runtime).speculative);
  if (typeof spec.drafted === 'number' && typeof spec.accepted === 'number') {
    details.accepted_prediction_tokens = spec.accepted;
    details.rejected_prediction_tokens = spec.drafted - spec.accepted;
  }
  if (Object.keys(details).length) out.completion_tokens_details = details;
  return out;
}

export interface ChatToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

/**
 * The assistant message of a Responses object's output: its text (the one answer reader, responses.ts answerText:
 * never a reasoning item's), refusal, tool calls and text log-probs.
 */
function assistantOutput(response: Obj): { content: string; refusal: string | null; toolCalls: ChatToolCall[]; logprobs: TokenLogprob[] } {
  const content = answerText(response);
  let refusal: string | null = null;
  const toolCalls: ChatToolCall[] = [];
  const logprobs: TokenLogprob[] = [];
  for (const raw of list(response.output)) {
    const item = obj(raw);
    if (item.type === 'function_call') {
      toolCalls.push({ id: str(item.call_id), type: 'function', function: { name: str(item.name), arguments: str(item.arguments) } });
    } else if (item.type === 'message') {
      for (const rawPart of list(item.content)) {
        const part = obj(rawPart);
        if (part.type === 'output_text') logprobs.push(...readLogprobs(part.logprobs));
        else if (part.type === 'refusal') refusal = (refusal ?? '') + str(part.refusal);
      }
    }
  }
  return { content, refusal, toolCalls, logprobs };
}

/** The `chat.completion` of a task that ended with a Responses object (completed or incomplete). */
export function chatCompletionOf(task: TaskRecord): Obj {
  const response = obj(task.response);
  const out = assistantOutput(response);
  const message: Obj = {
    role: 'assistant',
    // As OpenAI: no content beside tool calls when the model said nothing.
    content: out.toolCalls.length && out.content === '' ? null : out.content,
    refusal: out.refusal,
  };
  if (out.toolCalls.length) message.tool_calls = out.toolCalls;
  return {
    id: chatCompletionId(task.id),
    object: OBJECTS.chatCompletion,
    created: Math.floor(task.createdAt / 1000),
    model: task.model,
    choices: [
      { index: 0, message, logprobs: wantsLogprobs(task) ? { content: out.logprobs, refusal: null } : null, finish_reason: finishReasonOf(response) },
    ],
    usage: chatUsage(response.usage),
    system_fingerprint: null,
  };
}

export function wantsLogprobs(task: Pick<TaskRecord, 'request'>): boolean {
  return task.request.include?.includes(INCLUDE_OUTPUT_LOGPROBS) ?? false;
}

/** The problem a task that did not end with an answer is told as (failed: its error; cancelled: task_cancelled). */
export function endProblem(task: Pick<TaskRecord, 'status' | 'error'>): HttpProblem {
  if (task.status === 'cancelled') {
    return new HttpProblem(CODES.task_cancelled, 'task_cancelled', 'The task of this chat completion was cancelled before it finished.', {
      headers: { [HEADERS.shouldRetry]: 'false' },
    });
  }
  const e = task.error;
  const status = e && e.status >= 400 ? e.status : 500;
  return new HttpProblem(status, e?.code ?? 'internal_error', e?.detail ?? 'The task failed.', { param: e?.param ?? null });
}

/** `{error: {message, type, param, code}}` as a chunk (the OpenAI SDK throws an APIError on one). */
function errorChunk(code: string, message: string, param: unknown): Obj {
  const status = CODES[code as LmspCode] ?? 500;
  return { error: problemBody(new HttpProblem(status, code, message, { param: typeof param === 'string' ? param : null })).error };
}

export interface ChunkContext {
  taskId: string;
  /** Unix ms of the task's creation. */
  createdAt: number;
  model: string;
  includeUsage: boolean;
  logprobs: boolean;
}

interface CallState {
  index: number;
  sent: string;
}

/**
 * Translates a task's Responses events into chat chunks, one event at a time: the first chunk carries the role, text
 * deltas become `delta.content`, a function call gets an index (id, type and name on its first delta, as the SDK's
 * accumulator needs) and its argument pieces; the terminal event gives the finish_reason chunk, then the usage chunk
 * (with include_usage). A failed or cancelled response ends with an error chunk instead.
 */
export class ChatChunkTranslator {
  private readonly base: Obj;
  private readonly calls = new Map<number, CallState>();
  private readonly itemIndex = new Map<string, number>();
  private error: { code: string; message: string; param: unknown } | undefined;

  constructor(private readonly ctx: ChunkContext) {
    this.base = {
      id: chatCompletionId(ctx.taskId),
      object: OBJECTS.chatCompletionChunk,
      created: Math.floor(ctx.createdAt / 1000),
      model: ctx.model,
      system_fingerprint: null,
    };
  }

  /** The chunks for one event (often none). */
  next(type: string, data: Obj): Obj[] {
    switch (type) {
      case 'response.created':
        return [this.chunk({ role: 'assistant', content: '' })];
      case 'response.output_text.delta': {
        const delta = answerTextDelta({ type, data });
        if (delta === '') return [];
        return [this.chunk({ content: delta }, null, this.ctx.logprobs ? { content: readLogprobs(data.logprobs), refusal: null } : null)];
      }
      case 'response.refusal.delta':
        return [this.chunk({ refusal: str(data.delta) })];
      case 'response.output_item.added':
      case 'response.output_item.done': {
        const item = obj(data.item);
        if (item.type !== 'function_call') return [];
        return this.callChunks(data, item, str(item.arguments), type === 'response.output_item.done');
      }
      case 'response.function_call_arguments.delta':
        return this.argumentChunks(data, str(data.delta), false);
      case 'response.function_call_arguments.done':
        return this.argumentChunks(data, str(data.arguments), true);
      case 'error':
        this.error = { code: str(data.code) || 'internal_error', message: str(data.message) || 'The task failed.', param: data.param };
        return [];
      case 'response.completed':
      case 'response.incomplete': {
        const response = obj(data.response);
        const reason = this.calls.size ? 'tool_calls' : finishReasonOf(response);
        const out = [this.chunk({}, reason)];
        if (this.ctx.includeUsage) out.push({ ...this.base, choices: [], usage: chatUsage(response.usage) });
        return out;
      }
      case 'response.failed': {
        const e = this.error ?? {
          code: str(obj(obj(data.response).error).code) || 'internal_error',
          message: str(obj(obj(data.response).error).message) || 'The task failed.',
          param: null,
        };
        return [errorChunk(e.code, e.message, e.param)];
      }
      case 'response.cancelled':
        return [errorChunk('task_cancelled', 'The task of this chat completion was cancelled before it finished.', null)];
      default:
        return [];
    }
  }

  private chunk(delta: Obj, finishReason: FinishReason | null = null, logprobs: Obj | null = null): Obj {
    const c: Obj = { ...this.base, choices: [{ index: 0, delta, logprobs, finish_reason: finishReason }] };
    if (this.ctx.includeUsage) c.usage = null;
    return c;
  }

  private outputIndexOf(data: Obj): number | undefined {
    if (typeof data.output_index === 'number') return data.output_index;
    return typeof data.item_id === 'string' ? this.itemIndex.get(data.item_id) : undefined;
  }

  /** A call's first appearance (id, type, name, any arguments already there), or what its done item adds. */
  private callChunks(data: Obj, item: Obj, args: string, done: boolean): Obj[] {
    const at = this.outputIndexOf(data);
    if (at === undefined) return [];
    if (typeof item.id === 'string') this.itemIndex.set(item.id, at);
    if (this.calls.has(at)) return done ? this.argumentChunks(data, args, true) : [];
    const state: CallState = { index: this.calls.size, sent: args };
    this.calls.set(at, state);
    return [
      this.chunk({
        tool_calls: [{ index: state.index, id: str(item.call_id), type: 'function', function: { name: str(item.name), arguments: args } }],
      }),
    ];
  }

  /** A piece of a call's arguments; `whole`: the full arguments, of which only what was not sent yet goes out. */
  private argumentChunks(data: Obj, text: string, whole: boolean): Obj[] {
    const at = this.outputIndexOf(data);
    const state = at === undefined ? undefined : this.calls.get(at);
    if (!state) return [];
    const piece = whole ? (text.startsWith(state.sent) ? text.slice(state.sent.length) : '') : text;
    if (piece === '') return [];
    state.sent += piece;
    return [this.chunk({ tool_calls: [{ index: state.index, function: { arguments: piece } }] })];
  }
}
