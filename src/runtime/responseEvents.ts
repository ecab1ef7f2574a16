// The events of a task's stream: every type the runtime writes is named here once, and built here from the task
// (Responses events for the response, `task_runtime:` vendor events for the task around it). The lifecycle
// operations (transitions.ts) are the only writers; doors read the types from here, never spell them.
import { responseObject, taskStatusSnapshot } from './responses';
import type { TokenLogprob } from './backend';
import { itemObject, type OutputItem, type OutputStep } from './outputItems';
import type { NewEvent } from './taskStore';
import type { Problem, TaskRecord } from './task';
import { queueObject, type QueueInfo } from './queue';

export const EVENT = {
  created: 'response.created',
  queued: 'response.queued',
  inProgress: 'response.in_progress',
  outputItemAdded: 'response.output_item.added',
  contentPartAdded: 'response.content_part.added',
  outputTextDelta: 'response.output_text.delta',
  outputTextDone: 'response.output_text.done',
  contentPartDone: 'response.content_part.done',
  outputItemDone: 'response.output_item.done',
  functionCallArgumentsDelta: 'response.function_call_arguments.delta',
  functionCallArgumentsDone: 'response.function_call_arguments.done',
  reasoningTextDelta: 'response.reasoning_text.delta',
  reasoningTextDone: 'response.reasoning_text.done',
  completed: 'response.completed',
  incomplete: 'response.incomplete',
  failed: 'response.failed',
  cancelled: 'response.cancelled',
  /** The Responses stream's error event, written just before `response.failed`. */
  error: 'error',
  /** Vendor: the task's status, message or attempt changed (carries a small task snapshot). */
  taskStatus: 'task_runtime:task.status',
  /** Vendor: model load progress, 0..1. */
  modelLoading: 'task_runtime:model.loading',
  /** Vendor: a queued task's place moved (position, priority, expected start; runtime/queue.ts). */
  taskQueue: 'task_runtime:task.queue',
  /** Vendor: one try of the task's completion webhook and its outcome (webhooks.ts DeliveryLogEntry). */
  webhookDelivery: 'task_runtime:webhook.delivery',
} as const;

/**
 * The answer text an event adds: the delta of `response.output_text.delta` (the message item's text), '' for every
 * other event — reasoning deltas, call arguments, vendor events. The streaming side of responses.ts answerText: every
 * door and the editor that accumulates answer text from a task's stream reads it through this.
 */
export function answerTextDelta(event: { type: string; data: Record<string, unknown> }): string {
  if (event.type !== EVENT.outputTextDelta) return '';
  const delta = event.data['delta'];
  return typeof delta === 'string' ? delta : '';
}

/** The events that end a response: exactly one of them closes every attempt's stream that finishes. */
export const TERMINAL_EVENT_TYPES: ReadonlySet<string> = new Set([EVENT.completed, EVENT.incomplete, EVENT.failed, EVENT.cancelled]);

export function statusEvent(t: TaskRecord): NewEvent {
  return { type: EVENT.taskStatus, data: taskStatusSnapshot(t) };
}

export function queueEvent(info: QueueInfo): NewEvent {
  return { type: EVENT.taskQueue, data: queueObject(info) };
}

export function modelLoadingEvent(model: string, progress: number): NewEvent {
  return { type: EVENT.modelLoading, data: { model, progress: Math.min(1, Math.max(0, progress)) } };
}

/**
 * A new response waiting in the queue: `response.created` then `response.queued`. Both carry the same data object,
 * so a batch serialises it once (taskStore.createTaskOps).
 */
export function queuedEvents(t: TaskRecord): NewEvent[] {
  const data = { response: responseObject(t, { status: 'queued' }) };
  return [
    { type: EVENT.created, data },
    { type: EVENT.queued, data },
  ];
}

/** The events that open a response's output: in_progress, the message item, its text part. */
export function outputOpenedEvents(t: TaskRecord, messageId: string): NewEvent[] {
  return [
    { type: EVENT.inProgress, data: { response: responseObject(t, { status: 'in_progress' }) } },
    {
      type: EVENT.outputItemAdded,
      data: { output_index: 0, item: { id: messageId, type: 'message', status: 'in_progress', role: 'assistant', content: [] } },
    },
    {
      type: EVENT.contentPartAdded,
      data: { item_id: messageId, output_index: 0, content_index: 0, part: { type: 'output_text', text: '', annotations: [], logprobs: [] } },
    },
  ];
}

/** A piece of the output text; `logprobs`, when asked for, one entry per token of the piece (without `bytes`, as the Responses delta has them). */
export function textDeltaEvent(messageId: string, delta: string, logprobs?: TokenLogprob[]): NewEvent {
  const lp = logprobs
    ? logprobs.map((l) => ({ token: l.token, logprob: l.logprob, top_logprobs: l.top_logprobs.map((t) => ({ token: t.token, logprob: t.logprob })) }))
    : [];
  return { type: EVENT.outputTextDelta, data: { item_id: messageId, output_index: 0, content_index: 0, delta, logprobs: lp } };
}

/** The events of output steps (outputItems.ts), in order: answer text deltas and the items after the message. */
export function outputStepEvents(messageId: string, steps: readonly OutputStep[]): NewEvent[] {
  const events: NewEvent[] = [];
  for (const step of steps) {
    if (step.kind === 'text') {
      events.push(textDeltaEvent(messageId, step.delta, step.logprobs));
      continue;
    }
    const { index: output_index, item } = step;
    if (step.kind === 'open') {
      if (item.type === 'reasoning') {
        // OPENAI-WIRE §3.3: the item opens without content, then its reasoning_text part is added (the SDK's
        // accumulator appends reasoning_text deltas only to a part added so).
        events.push(
          { type: EVENT.outputItemAdded, data: { output_index, item: { ...itemObject(item), content: [] } } },
          { type: EVENT.contentPartAdded, data: { item_id: item.id, output_index, content_index: 0, part: { type: 'reasoning_text', text: '' } } },
        );
      } else events.push({ type: EVENT.outputItemAdded, data: { output_index, item: itemObject(item) } });
    } else if (step.kind === 'delta') {
      events.push(
        item.type === 'reasoning'
          ? { type: EVENT.reasoningTextDelta, data: { item_id: item.id, output_index, content_index: 0, delta: step.delta } }
          : { type: EVENT.functionCallArgumentsDelta, data: { item_id: item.id, output_index, delta: step.delta } },
      );
    } else {
      events.push(...itemDoneEvents(output_index, item));
    }
  }
  return events;
}

/**
 * An item's closing events: its text or arguments done (a reasoning item's text part done after its text), then the
 * item done (status from the item).
 */
function itemDoneEvents(output_index: number, item: OutputItem, open: 'completed' | 'incomplete' = 'completed'): NewEvent[] {
  const done: NewEvent[] =
    item.type === 'reasoning'
      ? [
          { type: EVENT.reasoningTextDone, data: { item_id: item.id, output_index, content_index: 0, text: item.text } },
          {
            type: EVENT.contentPartDone,
            data: { item_id: item.id, output_index, content_index: 0, part: { type: 'reasoning_text', text: item.text } },
          },
        ]
      : [{ type: EVENT.functionCallArgumentsDone, data: { item_id: item.id, output_index, name: item.name, arguments: item.arguments } }];
  return [...done, { type: EVENT.outputItemDone, data: { output_index, item: itemObject(item, open) } }];
}

/**
 * The events that close a finished output: an item still open after the message closed (completed, or incomplete
 * at the token limit), then text done, part done, message item done, then completed (or incomplete).
 * `logprobs`: every token's, when asked for.
 */
export function finishedEvents(
  t: TaskRecord,
  messageId: string,
  text: string,
  incomplete: boolean,
  logprobs: TokenLogprob[] = [],
  items: readonly OutputItem[] = [],
): NewEvent[] {
  const part = { type: 'output_text', text, annotations: [], logprobs };
  const open = items.findIndex((i) => !i.done);
  const closing = open >= 0 ? itemDoneEvents(1 + open, items[open], incomplete ? 'incomplete' : 'completed') : [];
  return [
    ...closing,
    { type: EVENT.outputTextDone, data: { item_id: messageId, output_index: 0, content_index: 0, text, logprobs } },
    { type: EVENT.contentPartDone, data: { item_id: messageId, output_index: 0, content_index: 0, part } },
    {
      type: EVENT.outputItemDone,
      data: {
        output_index: 0,
        item: { id: messageId, type: 'message', status: incomplete ? 'incomplete' : 'completed', role: 'assistant', content: [part] },
      },
    },
    { type: incomplete ? EVENT.incomplete : EVENT.completed, data: { response: t.response } },
  ];
}

export function failedEvents(t: TaskRecord, err: Problem): NewEvent[] {
  return [
    { type: EVENT.error, data: { code: err.code, message: err.detail, param: null } },
    { type: EVENT.failed, data: { response: t.response } },
  ];
}

export function cancelledEvents(t: TaskRecord): NewEvent[] {
  return [{ type: EVENT.cancelled, data: { response: t.response } }];
}
