// A task's Responses object and events told as Anthropic Messages (docs/anthropic.md): the whole `Message`,
// or the stream's events translated one runtime event at a time, in the order the SDK's accumulator insists on
// (message_start once and first; blocks started 0, 1, 2 with empty seeds; each closed before the next opens;
// signature_delta just before a thinking block's stop; message_delta, then message_stop).
//
// Content order: the runtime stores the answer text as one message item and reasoning / calls as items after it, so
// the non-streamed Message lists thinking, then text, then tool_use; the stream gives blocks in the order they were
// generated, which is the same for the usual reasoning → answer → calls. A thinking block's signature seals its text
// (shared/reasoningSeal.ts), so the next turn can give the reasoning back. An output one of `stop_sequences` ended
// reports `stop_reason: "stop_sequence"` with that string: the runtime keeps it on the response as the vendor member
// `task_runtime.stop_sequence` (absent when the backend does not know which string it was: then `end_turn`).
import { createHash } from 'node:crypto';
import { answerTextDelta } from '../../runtime/responseEvents';
import { answerText } from '../../runtime/responses';
import type { TaskRecord } from '../../runtime/task';
import { anthropicErrorType } from '../http/problem';
import type { ReasoningSeal } from '../shared/reasoningSeal';
import { list, obj, str, type Obj } from '../../runtime/jsonValues';

const num = (v: unknown): number => (typeof v === 'number' ? v : 0);

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

function base62(n: bigint): string {
  let s = '';
  do {
    s = BASE62[Number(n % 62n)] + s;
    n /= 62n;
  } while (n > 0n);
  return s;
}

/** `toolu_` + base62 of the runtime's call id (its hex part, or a digest of any other id): the same id every time. */
export function toolUseId(callId: string): string {
  const hex = /^call_([0-9a-f]{1,64})$/.exec(callId)?.[1] ?? createHash('sha256').update(callId).digest('hex').slice(0, 32);
  return `toolu_${base62(BigInt(`0x${hex}`))}`;
}

/** `msg_…` of a task (`task_abc` → `msg_abc`). */
export function messageId(taskId: string): string {
  return `msg_${taskId.replace(/^task_/, '')}`;
}

export type StopReason = 'end_turn' | 'max_tokens' | 'tool_use' | 'stop_sequence';

/** `stop_reason` and `stop_sequence` of a finished response (the string only with `stop_sequence`). */
export function stopOf(response: Obj): { stop_reason: StopReason; stop_sequence: string | null } {
  if (list(response.output).some((i) => obj(i).type === 'function_call')) return { stop_reason: 'tool_use', stop_sequence: null };
  if (response.status === 'incomplete') return { stop_reason: 'max_tokens', stop_sequence: null };
  const matched = obj(response.task_runtime).stop_sequence;
  return typeof matched === 'string' ? { stop_reason: 'stop_sequence', stop_sequence: matched } : { stop_reason: 'end_turn', stop_sequence: null };
}

/**
 * Anthropic usage from Responses usage: input_tokens are the tokens evaluated now, cache_read_input_tokens the kept
 * prefix (cached_tokens), so their sum is the prompt as Claude Code adds it up. Nothing is ever written to a cache.
 */
export function usageOf(usage: unknown): {
  input_tokens: number;
  output_tokens: number;
  cache_creation_input_tokens: number;
  cache_read_input_tokens: number;
} {
  const u = obj(usage);
  const cached = num(obj(u.input_tokens_details).cached_tokens);
  return {
    input_tokens: Math.max(0, num(u.input_tokens) - cached),
    output_tokens: num(u.output_tokens),
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: cached,
  };
}

/** The call's arguments as the object `input` (a non-object document, which a grammar-bound call never gives, as {}). */
function inputOf(args: string): Obj {
  try {
    return obj(JSON.parse(args));
  } catch {
    return {};
  }
}

export interface FormatContext {
  seal: ReasoningSeal;
  /** thinking.display "omitted": an empty text, the signature still sealing the reasoning. */
  omitThinking: boolean;
}

function thinkingBlock(model: string, text: string, ctx: FormatContext): Obj {
  return { type: 'thinking', thinking: ctx.omitThinking ? '' : text, signature: ctx.seal.seal({ model, text }) };
}

/** The `Message` of a task that ended with a Responses object (completed or incomplete). */
export function messageOf(task: TaskRecord, ctx: FormatContext): Obj {
  const response = obj(task.response);
  const thinking: Obj[] = [];
  const calls: Obj[] = [];
  const text = answerText(response);
  for (const raw of list(response.output)) {
    const item = obj(raw);
    if (item.type === 'reasoning')
      thinking.push(
        thinkingBlock(
          task.model,
          list(item.content)
            .map((c) => str(obj(c).text))
            .join(''),
          ctx,
        ),
      );
    else if (item.type === 'function_call')
      calls.push({ type: 'tool_use', id: toolUseId(str(item.call_id)), name: str(item.name), input: inputOf(str(item.arguments)) });
  }
  return {
    id: messageId(task.id),
    type: 'message',
    role: 'assistant',
    model: task.model,
    content: [...thinking, ...(text ? [{ type: 'text', text }] : []), ...calls],
    ...stopOf(response),
    usage: usageOf(response.usage),
  };
}

/** An `error` event's data (or a body) for a task that ended without an answer. */
export function errorPayload(status: number, message: string): Obj {
  return { type: 'error', error: { type: anthropicErrorType(status), message } };
}

export interface StreamEvent {
  event: string;
  data: Obj;
}

type OpenBlock = { kind: 'text' } | { kind: 'thinking'; itemId: string; text: string } | { kind: 'tool_use'; itemId: string; sent: string };

/** Translates a task's Responses events into Messages stream events, one runtime event at a time. */
export class MessageStreamTranslator {
  private started = false;
  private next = 0;
  private open: OpenBlock | undefined;
  private error: { status: number; message: string } | undefined;

  constructor(
    private readonly task: Pick<TaskRecord, 'id' | 'model'>,
    /** The prompt's tokens as counted before generation (the real count comes in message_delta). */
    private readonly promptTokens: number,
    private readonly ctx: FormatContext,
  ) {}

  /** The events for one runtime event (often none). */
  translate(type: string, data: Obj): StreamEvent[] {
    const out = this.started ? [] : [this.messageStart()];
    this.started = true;
    out.push(...this.body(type, data));
    return out;
  }

  private messageStart(): StreamEvent {
    const usage = { input_tokens: this.promptTokens, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 };
    const message = {
      id: messageId(this.task.id),
      type: 'message',
      role: 'assistant',
      model: this.task.model,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage,
    };
    return { event: 'message_start', data: { type: 'message_start', message } };
  }

  private body(type: string, data: Obj): StreamEvent[] {
    switch (type) {
      case 'response.output_text.delta': {
        const text = answerTextDelta({ type, data });
        return text ? [...this.ensure({ kind: 'text' }), this.delta({ type: 'text_delta', text })] : [];
      }
      case 'response.output_item.added':
        return this.itemAdded(obj(data.item));
      case 'response.reasoning_text.delta':
        return this.thinkingDelta(str(data.item_id), str(data.delta));
      case 'response.function_call_arguments.delta':
        return this.argumentsDelta(str(data.item_id), str(data.delta), false);
      case 'response.function_call_arguments.done':
        return this.argumentsDelta(str(data.item_id), str(data.arguments), true);
      case 'response.output_item.done': {
        const item = obj(data.item);
        return item.type !== 'message' && this.openItem() === str(item.id) ? this.close() : [];
      }
      case 'error':
        this.error = { status: 500, message: str(data.message) || 'The task failed.' };
        if (str(data.code) === 'context_length_exceeded') this.error.status = 400;
        return [];
      case 'response.completed':
      case 'response.incomplete':
        return [...this.close(), ...this.end(obj(data.response))];
      case 'response.failed':
        return [{ event: 'error', data: errorPayload(this.error?.status ?? 500, this.error?.message ?? 'The task failed.') }];
      case 'response.cancelled':
        return [{ event: 'error', data: errorPayload(500, 'The task of this message was cancelled before it finished.') }];
      default:
        return [];
    }
  }

  private itemAdded(item: Obj): StreamEvent[] {
    if (item.type === 'reasoning') return this.ensure({ kind: 'thinking', itemId: str(item.id), text: '' });
    if (item.type !== 'function_call') return [];
    const args = str(item.arguments);
    const out = this.ensure({ kind: 'tool_use', itemId: str(item.id), sent: args }, { id: toolUseId(str(item.call_id)), name: str(item.name) });
    if (args) out.push(this.delta({ type: 'input_json_delta', partial_json: args }));
    return out;
  }

  private thinkingDelta(itemId: string, delta: string): StreamEvent[] {
    const out = this.ensure({ kind: 'thinking', itemId, text: '' });
    const open = this.open as Extract<OpenBlock, { kind: 'thinking' }>;
    open.text += delta;
    if (!this.ctx.omitThinking && delta) out.push(this.delta({ type: 'thinking_delta', thinking: delta }));
    return out;
  }

  /** A piece of a call's arguments; `whole`: the full arguments, of which only what was not sent goes out. */
  private argumentsDelta(itemId: string, text: string, whole: boolean): StreamEvent[] {
    const open = this.open;
    if (open?.kind !== 'tool_use' || open.itemId !== itemId) return [];
    const piece = whole ? (text.startsWith(open.sent) ? text.slice(open.sent.length) : '') : text;
    if (!piece) return [];
    open.sent += piece;
    return [this.delta({ type: 'input_json_delta', partial_json: piece })];
  }

  private openItem(): string | undefined {
    return this.open && this.open.kind !== 'text' ? this.open.itemId : undefined;
  }

  /** The block `want` open: the one open already when it is the same, else the open one closed and `want` started. */
  private ensure(want: OpenBlock, tool?: { id: string; name: string }): StreamEvent[] {
    const open = this.open;
    if (open && open.kind === want.kind && (open.kind === 'text' || open.itemId === (want as { itemId: string }).itemId)) return [];
    const out = this.close();
    const seed =
      want.kind === 'text'
        ? { type: 'text', text: '' }
        : want.kind === 'thinking'
          ? { type: 'thinking', thinking: '', signature: '' }
          : { type: 'tool_use', ...tool, input: {} };
    this.open = want;
    out.push({ event: 'content_block_start', data: { type: 'content_block_start', index: this.next, content_block: seed } });
    return out;
  }

  private delta(delta: Obj): StreamEvent {
    return { event: 'content_block_delta', data: { type: 'content_block_delta', index: this.next, delta } };
  }

  private close(): StreamEvent[] {
    const open = this.open;
    if (!open) return [];
    const out: StreamEvent[] = [];
    if (open.kind === 'thinking')
      out.push(this.delta({ type: 'signature_delta', signature: this.ctx.seal.seal({ model: this.task.model, text: open.text }) }));
    out.push({ event: 'content_block_stop', data: { type: 'content_block_stop', index: this.next } });
    this.open = undefined;
    this.next++;
    return out;
  }

  private end(response: Obj): StreamEvent[] {
    const delta = stopOf(response);
    return [
      { event: 'message_delta', data: { type: 'message_delta', delta, usage: usageOf(response.usage) } },
      { event: 'message_stop', data: { type: 'message_stop' } },
    ];
  }
}
