// A response's output as it grows: the message item (output_index 0, opened when the attempt starts) and, after it,
// a `reasoning` or `function_call` item for each run of pieces a backend emits on another channel (backend.ts
// OutputChannel). The assembler turns pieces into steps (text delta, item opened, item delta, item closed), which
// the lifecycle writes as Responses events (responseEvents.ts outputStepEvents); it is also how a restart reads the
// items back: replaying the delivered segments gives the same items, with the same ids, so nothing about them is
// stored twice. An item closes when a piece of another channel arrives or the response ends; a call is never
// split across attempts (`resume` continues the open one, `retry` starts the response again).
import type { OutputChannel, OutputSegment, TokenLogprob } from './backend';

export type OutputItem =
  | { type: 'reasoning'; id: string; text: string; done: boolean }
  | { type: 'function_call'; id: string; callId: string; name: string; arguments: string; done: boolean };

/** One change of the output, in the order it happened; `index` is the item's output_index. */
export type OutputStep =
  | { kind: 'text'; delta: string; logprobs?: TokenLogprob[] }
  | { kind: 'open'; index: number; item: OutputItem }
  | { kind: 'delta'; index: number; item: OutputItem; delta: string }
  | { kind: 'close'; index: number; item: OutputItem };

/** Index of the first item after the message. */
const FIRST_ITEM_INDEX = 1;

export class OutputAssembler {
  private text_ = '';
  private readonly items_: OutputItem[] = [];
  private readonly segments_: OutputSegment[] = [];
  private reasoningCount = 0;

  constructor(
    private readonly messageId: string,
    delivered?: readonly OutputSegment[],
  ) {
    for (const s of delivered ?? []) this.push(s.text, s.channel);
  }

  /** Answer text so far. */
  get text(): string {
    return this.text_;
  }

  /** Items after the message, in output order (each a snapshot: do not keep across pushes). */
  get items(): readonly OutputItem[] {
    return this.items_;
  }

  /** Everything delivered by channel, in order: what a resume re-feeds. Absent when it was all answer text. */
  get segments(): OutputSegment[] | undefined {
    return this.segments_.some((s) => s.channel) ? this.segments_.map((s) => ({ ...s })) : undefined;
  }

  /** A piece on `channel` (absent: the answer): the steps it makes. */
  push(text: string, channel?: OutputChannel, logprobs?: TokenLogprob[]): OutputStep[] {
    const steps: OutputStep[] = [];
    const last = this.segments_[this.segments_.length - 1];
    const same = last !== undefined && sameChannel(last.channel, channel);
    if (same) last.text += text;
    else if (text || channel) this.segments_.push({ ...(channel ? { channel } : {}), text });
    const open = this.openItem();
    if (!channel) {
      if (open) steps.push(this.close(open));
      if (text || logprobs?.length) {
        this.text_ += text;
        steps.push({ kind: 'text', delta: text, ...(logprobs?.length ? { logprobs } : {}) });
      }
      return steps;
    }
    let item = same ? open : undefined;
    if (!item) {
      if (open) steps.push(this.close(open));
      item = this.newItem(channel);
      this.items_.push(item);
      steps.push({ kind: 'open', index: this.indexOf(item), item: { ...item } });
    }
    if (text) {
      if (item.type === 'reasoning') item.text += text;
      else item.arguments += text;
      steps.push({ kind: 'delta', index: this.indexOf(item), item: { ...item }, delta: text });
    }
    return steps;
  }

  /** Closes the item still open (the end of the response): its step, or none. */
  finish(): OutputStep[] {
    const open = this.openItem();
    return open ? [this.close(open)] : [];
  }

  private openItem(): OutputItem | undefined {
    const last = this.items_[this.items_.length - 1];
    return last && !last.done ? last : undefined;
  }

  private close(item: OutputItem): OutputStep {
    item.done = true;
    return { kind: 'close', index: this.indexOf(item), item: { ...item } };
  }

  private indexOf(item: OutputItem): number {
    return FIRST_ITEM_INDEX + this.items_.indexOf(item);
  }

  private newItem(channel: OutputChannel): OutputItem {
    // Ids follow from the message id and the order, so replaying the segments gives them back.
    const base = this.messageId.replace(/^msg_/, '');
    if (channel.kind === 'reasoning') return { type: 'reasoning', id: `rs_${base}_${++this.reasoningCount}`, text: '', done: false };
    const again = this.items_.filter((i) => i.type === 'function_call' && i.callId === channel.callId).length;
    const id = `fc_${channel.callId.replace(/^call_/, '')}${again ? `_${again + 1}` : ''}`;
    return { type: 'function_call', id, callId: channel.callId, name: channel.name, arguments: '', done: false };
  }
}

function sameChannel(a: OutputChannel | undefined, b: OutputChannel | undefined): boolean {
  if (!a || !b) return a === b;
  if (a.kind === 'reasoning' || b.kind === 'reasoning') return a.kind === b.kind;
  return a.callId === b.callId && a.name === b.name;
}

/** The items delivered segments make (for a response object after a restart, or a run that is gone). */
export function itemsOf(messageId: string, segments: readonly OutputSegment[] | undefined): readonly OutputItem[] {
  return segments?.length ? new OutputAssembler(messageId, segments).items : [];
}

/**
 * An item as the Responses API shows it. `status`: `completed` once closed, else what the response's end makes of
 * an item still open (`incomplete` when it failed or was cancelled, `in_progress` while it runs).
 */
export function itemObject(item: OutputItem, open: 'in_progress' | 'incomplete' | 'completed' = 'in_progress'): Record<string, unknown> {
  const status = item.done ? 'completed' : open;
  if (item.type === 'reasoning') {
    return { id: item.id, type: 'reasoning', status, summary: [], content: [{ type: 'reasoning_text', text: item.text }] };
  }
  return { id: item.id, type: 'function_call', status, call_id: item.callId, name: item.name, arguments: item.arguments };
}
