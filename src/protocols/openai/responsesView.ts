// The Responses door's view of a task's output (Codex CLI's dialect, docs/lmsp.md "Codex dialect"). The runtime
// records calls under the names the model saw (`<namespace>__<name>`, a custom tool as a function with an `input`
// string) and reasoning as text, so that a restart reads its own events back unchanged and chat completions shows the
// flattened names it offered. Here, from the request's tools (stateless), a call becomes what the client offered:
// `function_call{name, namespace}` or `custom_tool_call{input}` with its `response.custom_tool_call_input.*` events,
// and, when the request asked for `reasoning.encrypted_content`, a reasoning item carries its text sealed for the
// client to give back (store: false keeps nothing here). On input, the other way: a sealed reasoning item of ours is
// opened for the model; anything else in a reasoning item is dropped. A synchronous stream always ends with
// response.completed, response.incomplete or response.failed (a cancel from elsewhere is shown as failed).
import { customCallInput, partialCustomInput, toolTargetsOf, type ToolTarget } from '../../runtime/responseTools';
import { INCLUDE_REASONING_ENCRYPTED, type ResponseRequest, type TaskEvent, type TaskRecord } from '../../runtime/task';
import type { ReasoningSeal } from '../shared/reasoningSeal';
import { EVENT } from '../../runtime/responseEvents';
import { isObject } from '../../runtime/jsonValues';

type Item = Record<string, unknown>;

/** Event types of a custom tool's input (OpenAI's names). */
export const CUSTOM_INPUT_EVENT = { delta: 'response.custom_tool_call_input.delta', done: 'response.custom_tool_call_input.done' } as const;

/** The model a sealed reasoning blob names: the one the client asked for (what it sends again next turn). */
function sealedModel(task: Pick<TaskRecord, 'request' | 'model'>): string {
  return task.request.model ?? task.model;
}

/** How one task's output is shown on the Responses door. */
export class ResponsesView {
  private readonly targets: Map<string, ToolTarget>;
  private readonly sealReasoning: boolean;
  /** Custom tool calls being streamed: their arguments so far and the input already sent. */
  private readonly custom = new Map<string, { args: string; sent: string }>();
  private readonly hasCustom: boolean;
  /** Function calls whose `added` this stream showed (their deltas pass as they are). */
  private readonly functions = new Set<string>();

  constructor(
    private readonly task: Pick<TaskRecord, 'request' | 'model'>,
    private readonly seal: ReasoningSeal,
  ) {
    this.targets = toolTargetsOf(task.request.tools);
    this.sealReasoning = task.request.include?.includes(INCLUDE_REASONING_ENCRYPTED) ?? false;
    this.hasCustom = [...this.targets.values()].some((t) => t.kind === 'custom');
  }

  /** A Responses object as the client offered its tools. */
  response(response: Item): Item {
    if (!Array.isArray(response.output)) return response;
    return { ...response, output: response.output.map((o) => (isObject(o) ? this.item(o, true) : o)) };
  }

  /**
   * An output item: a call under the name the client gave (and its namespace), a custom call as `custom_tool_call`;
   * a finished reasoning item (`final`) sealed when asked for.
   */
  item(item: Item, final: boolean): Item {
    if (item.type === 'function_call') {
      const target = this.targets.get(String(item.name));
      if (!target) return item;
      const ns = target.namespace !== undefined ? { namespace: target.namespace } : {};
      if (target.kind === 'function') return { ...item, name: target.name, ...ns };
      return {
        id: item.id,
        type: 'custom_tool_call',
        status: item.status,
        call_id: item.call_id,
        name: target.name,
        ...ns,
        input: customCallInput(String(item.arguments ?? '')),
      };
    }
    if (item.type === 'reasoning' && final && this.sealReasoning) {
      const text = Array.isArray(item.content) ? item.content.map((c) => (isObject(c) && typeof c.text === 'string' ? c.text : '')).join('') : '';
      return { ...item, encrypted_content: this.seal.seal({ model: sealedModel(this.task), text }) };
    }
    return item;
  }

  /** An event as the client sees it; undefined when it has nothing to show (a custom call's input not grown yet). */
  event(event: TaskEvent): TaskEvent | undefined {
    const d = event.data;
    if (event.type === EVENT.cancelled && this.task.request.background !== true && isObject(d.response)) {
      // A synchronous stream ends with one of OpenAI's terminal events (clients such as Codex CLI take any other end
      // for a dropped stream and send the request again): a cancel from elsewhere (the editor, /tasks) is a failure.
      const response = this.response(d.response);
      return {
        ...event,
        type: EVENT.failed,
        data: {
          ...d,
          response: { ...response, error: response.error ?? { code: 'cancelled', message: 'The response was cancelled before it finished.' } },
        },
      };
    }
    if (isObject(d.response)) return { ...event, data: { ...d, response: this.response(d.response) } };
    if ((event.type === EVENT.outputItemAdded || event.type === EVENT.outputItemDone) && isObject(d.item)) {
      const item = this.item(d.item, event.type === EVENT.outputItemDone);
      if (event.type === EVENT.outputItemAdded && item.type === 'custom_tool_call') this.custom.set(String(item.id), { args: '', sent: '' });
      else if (event.type === EVENT.outputItemAdded && item.type === 'function_call') this.functions.add(String(item.id));
      return { ...event, data: { ...d, item } };
    }
    if (event.type === EVENT.functionCallArgumentsDelta) {
      const id = String(d.item_id);
      const call = this.custom.get(id);
      if (!call) {
        // A stream resumed inside a call: a custom one's input deltas cannot be told from here; its done events carry it whole.
        return this.hasCustom && !this.functions.has(id) ? undefined : event;
      }
      call.args += String(d.delta ?? '');
      const input = partialCustomInput(call.args);
      if (input.length <= call.sent.length) return undefined;
      const delta = input.slice(call.sent.length);
      call.sent = input;
      return { ...event, type: CUSTOM_INPUT_EVENT.delta, data: { item_id: id, output_index: d.output_index, delta } };
    }
    if (event.type === EVENT.functionCallArgumentsDone) {
      const target = this.targets.get(String(d.name));
      if (!target) return event;
      if (target.kind === 'function') return { ...event, data: { ...d, name: target.name } };
      this.custom.delete(String(d.item_id));
      return {
        ...event,
        type: CUSTOM_INPUT_EVENT.done,
        data: { item_id: d.item_id, output_index: d.output_index, input: customCallInput(String(d.arguments ?? '')) },
      };
    }
    return event;
  }
}

/**
 * The request's reasoning items as the model may see them: the text of an `encrypted_content` this server sealed for
 * the same model becomes the item's `reasoning_text` (what toChatMessages gives back); anything else (a foreign or
 * altered blob, text the client wrote) is dropped without a word, as docs/anthropic.md and docs/codex.md say. The blob itself
 * is not kept: it has done its work.
 */
export function openSealedReasoning(request: ResponseRequest, seal: ReasoningSeal): ResponseRequest {
  if (typeof request.input === 'string' || !request.input.some((it) => isObject(it) && it.type === 'reasoning')) return request;
  const input = request.input.map((it) => {
    if (!isObject(it) || it.type !== 'reasoning') return it;
    const { encrypted_content: blob, content: _clientText, ...rest } = it;
    const opened = seal.unseal(blob);
    const text = opened && (request.model === undefined || opened.model === request.model) ? opened.text : '';
    return { ...rest, summary: Array.isArray(rest.summary) ? rest.summary : [], ...(text ? { content: [{ type: 'reasoning_text', text }] } : {}) };
  });
  return { ...request, input };
}
