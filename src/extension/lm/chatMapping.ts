// VS Code language-model chat requests as runtime tasks, and back: which models are chat models and with what limits,
// how VS Code's messages and tools become Responses input items, how a request is cut to the model's context, and
// which parts a finished response yields. Pure: no vscode. VS Code's part classes are read by shape (a text part has
// `value`, a tool call `callId`+`name`+`input`, a tool result `callId`+`content`), since a message may carry parts
// built by another extension's copy of the classes.
//
// Why trimming: Copilot Chat's agent mode sends a system prompt of several thousand tokens and dozens of tool
// schemas with every request (docs/editor.md); a local model with a 4 k context cannot
// take them, and the runtime refuses a prompt that leaves no room for output. What goes first, in order: older
// history, then tool definitions (last first), then the middle of long system text, then the front of the last user
// message; the newest user turn and the answers to the calls it follows stay.
import type { ModelSummary } from '../model/taskSource';
import type { ResponseFunctionTool, ResponseToolChoice } from '../../runtime/task';
import { isObject } from '../../runtime/jsonValues';
import { fieldProblem, SAMPLING_FIELD_NAMES, SAMPLING_FIELDS, type RequestField, type Sampling } from '../../runtime/requestFields';

/** Context assumed for a model whose context is not known yet (a local model before its first load). */
export const UNKNOWN_CONTEXT_TOKENS = 4096;
/** Output room kept out of a model's context: a quarter of it, at least 256 and at most 4096 tokens. */
export function outputReserve(context: number): number {
  return Math.min(4096, Math.max(256, Math.floor(context / 4)), Math.max(1, context - 1));
}
/** Tokens a message costs beyond its text (role markers of a chat template), as estimated here. */
export const MESSAGE_OVERHEAD_TOKENS = 4;

/** The estimate used where the model's tokenizer is not at hand: about four characters a token, as OpenAI's rule of thumb. */
export function estimateTokens(text: string): number {
  return Math.ceil(text.length / 4);
}

/** What VS Code's LanguageModelChatInformation needs (structurally the same). */
export interface ChatModelInfo {
  id: string;
  name: string;
  family: string;
  version: string;
  tooltip: string;
  detail: string;
  maxInputTokens: number;
  maxOutputTokens: number;
  capabilities: { toolCalling: boolean; imageInput: boolean };
}

/** The context a model runs with: the one it runs with once known, else the trained one, else the assumption. */
export function contextOf(m: Pick<ModelSummary, 'contextLength' | 'maxContextLength'>): number {
  return m.contextLength ?? m.maxContextLength ?? UNKNOWN_CONTEXT_TOKENS;
}

/**
 * Every local and every remote engine model as a chat model. Tool calling (what makes agent mode offer the model) is
 * what the runtime says of the model's generation (ModelSummary.capabilities, docs/lmsp.md "Model capabilities"); a
 * model not known yet (the editor reads no model file before its first load, to stay lazy) is offered with it, and
 * the list changes once the load says otherwise (an embedding model or a reranker).
 */
export function chatModelInfos(models: readonly ModelSummary[]): ChatModelInfo[] {
  return models.map((m) => {
    const context = contextOf(m);
    const reserve = outputReserve(context);
    const where = m.engine ? m.engine : m.demo ? 'demo' : 'local';
    const known = m.contextLength ?? m.maxContextLength;
    return {
      id: m.id,
      name: m.id,
      family: m.engine ?? 'task-runtime-local',
      version: m.id,
      detail: where,
      tooltip: `${m.id} (${where}) — ${known ? `${known} tokens of context` : 'context known after the first load'}${m.hardware ? `; ${m.hardware}` : ''}`,
      maxInputTokens: context - reserve,
      maxOutputTokens: reserve,
      capabilities: { toolCalling: m.capabilities?.tools ?? true, imageInput: false },
    };
  });
}

/** VS Code's LanguageModelChatMessageRole: User 1, Assistant 2; 3 is the proposed System role Copilot Chat sends. */
export type MessageRole = 'user' | 'assistant' | 'system';
export function roleOf(role: number): MessageRole {
  return role === 2 ? 'assistant' : role === 3 ? 'system' : 'user';
}

export interface ChatMessageLike {
  role: number;
  content: readonly unknown[];
}

function isTextPart(p: unknown): p is { value: string } {
  return isObject(p) && typeof p['value'] === 'string' && !('callId' in p);
}
function isToolCallPart(p: unknown): p is { callId: string; name: string; input: unknown } {
  return isObject(p) && typeof p['callId'] === 'string' && typeof p['name'] === 'string' && 'input' in p;
}
function isToolResultPart(p: unknown): p is { callId: string; content: readonly unknown[] } {
  return isObject(p) && typeof p['callId'] === 'string' && Array.isArray(p['content']);
}

/** The text of a tool result's content: text parts as they are, text-like data parts decoded, anything else as JSON. */
export function toolResultText(content: readonly unknown[]): string {
  const out: string[] = [];
  for (const c of content) {
    if (isTextPart(c)) out.push(c.value);
    else if (isObject(c) && typeof c['mimeType'] === 'string' && c['data'] instanceof Uint8Array) {
      const mime = c['mimeType'];
      out.push(/^text\/|json/.test(mime) ? new TextDecoder().decode(c['data']) : `[${mime} data]`);
    } else if (c !== undefined) out.push(JSON.stringify(c));
  }
  return out.join('');
}

/** One Responses input item the runtime accepts. */
export type InputItem =
  | { type: 'message'; role: MessageRole; content: Array<{ type: 'input_text' | 'output_text'; text: string }> }
  | { type: 'function_call'; call_id: string; name: string; arguments: string }
  | { type: 'function_call_output'; call_id: string; output: string };

function messageItem(role: MessageRole, text: string): InputItem {
  return { type: 'message', role, content: [{ type: role === 'assistant' ? 'output_text' : 'input_text', text }] };
}

/**
 * VS Code messages as input items: a message's text parts as one message item; an assistant's tool calls as
 * `function_call` items after its text; a user's tool results as `function_call_output` items before its text
 * (they answer the calls of the message before).
 */
export function toInputItems(messages: readonly ChatMessageLike[]): InputItem[] {
  const items: InputItem[] = [];
  for (const m of messages) {
    const role = roleOf(m.role);
    const text = m.content
      .filter(isTextPart)
      .map((p) => p.value)
      .join('');
    for (const p of m.content) {
      if (isToolResultPart(p) && !isToolCallPart(p))
        items.push({ type: 'function_call_output', call_id: p.callId, output: toolResultText(p.content) });
    }
    if (text) items.push(messageItem(role, text));
    for (const p of m.content) {
      if (isToolCallPart(p)) items.push({ type: 'function_call', call_id: p.callId, name: p.name, arguments: JSON.stringify(p.input ?? {}) });
    }
  }
  return items;
}

/** The text a message costs (its text, tool calls and results), for provideTokenCount of a message. */
export function messageText(m: ChatMessageLike): string {
  return toInputItems([m]).map(itemText).join('\n');
}

export function itemText(item: InputItem): string {
  if (item.type === 'message') return item.content.map((c) => c.text).join('');
  if (item.type === 'function_call') return `${item.name}(${item.arguments})`;
  return item.output;
}

/** The runtime's (and OpenAI's) function-name rule. */
export const TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;

export interface ChatToolLike {
  name: string;
  description?: string;
  inputSchema?: object | undefined;
}

/** VS Code tools as Responses function tools; a tool whose name the runtime would refuse is left out. */
export function toFunctionTools(tools: readonly ChatToolLike[] | undefined): ResponseFunctionTool[] {
  return (tools ?? [])
    .filter((t) => TOOL_NAME.test(t.name))
    .map((t) => ({
      type: 'function' as const,
      name: t.name,
      ...(t.description ? { description: t.description } : {}),
      parameters: (t.inputSchema as Record<string, unknown> | undefined) ?? { type: 'object', properties: {} },
      strict: false,
    }));
}

/** LanguageModelChatToolMode: Auto 1, Required 2. */
export function toToolChoice(toolMode: number | undefined): ResponseToolChoice {
  return toolMode === 2 ? 'required' : 'auto';
}

export interface FitResult {
  items: InputItem[];
  tools: ResponseFunctionTool[];
  /** What was taken out, for the log and the task title. */
  dropped: { items: number; tools: number; cutTokens: number };
  /** Tokens of what is left, as counted. */
  tokens: number;
}

/** Token counter: the model's tokenizer where it is at hand, else an estimate. */
export type CountTokens = (text: string) => Promise<number>;

/** Cuts `text` so that it counts at most `max` tokens: keeps its head (`keep: 'head'`) or its tail. */
async function cutText(text: string, max: number, count: CountTokens, keep: 'head' | 'tail'): Promise<string> {
  const marker = '\n[…]\n';
  if (max <= 0) return '';
  let chars = text.length;
  for (let i = 0; i < 6; i++) {
    const n = await count(text.slice(0, chars));
    if (n <= max) break;
    chars = Math.max(0, Math.floor((chars * max) / n) - 8);
  }
  return keep === 'head' ? text.slice(0, chars) + marker : marker + text.slice(text.length - chars);
}

/**
 * Makes items + tools fit `budget` tokens. `required`: the request must call a tool, so one tool stays. The newest
 * user message and everything after it are the turn being answered; older items are history.
 */
export async function fitToContext(
  itemsIn: readonly InputItem[],
  toolsIn: readonly ResponseFunctionTool[],
  budget: number,
  count: CountTokens,
  required = false,
): Promise<FitResult> {
  const items = [...itemsIn];
  const tools = [...toolsIn];
  const cost = async (i: InputItem) => (await count(itemText(i))) + MESSAGE_OVERHEAD_TOKENS;
  const itemCosts = await Promise.all(items.map(cost));
  const toolCosts = await Promise.all(tools.map((t) => count(JSON.stringify(t))));
  const total = () => itemCosts.reduce((a, b) => a + b, 0) + toolCosts.reduce((a, b) => a + b, 0);
  const dropped = { items: 0, tools: 0, cutTokens: 0 };
  const isSystem = (i: InputItem) => i.type === 'message' && i.role === 'system';
  let lastUser = -1;
  for (let i = items.length - 1; i >= 0; i--) {
    const it = items[i]!;
    if (it.type === 'message' && it.role === 'user') {
      lastUser = i;
      break;
    }
  }
  // 1. History, oldest first: items before the newest user message that are not system text. A call and its output
  //    go together (a dangling one would be refused).
  for (let i = 0; i < lastUser && total() > budget;) {
    const it = items[i]!;
    if (isSystem(it)) {
      i++;
      continue;
    }
    const callId = it.type === 'function_call' || it.type === 'function_call_output' ? it.call_id : undefined;
    const remove = (j: number) => {
      items.splice(j, 1);
      itemCosts.splice(j, 1);
      lastUser--;
      dropped.items++;
    };
    remove(i);
    if (callId !== undefined) {
      for (let j = items.length - 1; j >= 0; j--) {
        const o = items[j]!;
        if ((o.type === 'function_call' || o.type === 'function_call_output') && o.call_id === callId && j < lastUser) remove(j);
      }
    }
  }
  // 2. Tool definitions, the last first (one stays when a call is required).
  while (total() > budget && tools.length > (required ? 1 : 0)) {
    tools.pop();
    toolCosts.pop();
    dropped.tools++;
  }
  // 3. Long system text: cut the longest one's tail until it fits (at most down to a quarter of the budget each).
  for (let guard = 0; total() > budget && guard < items.length; guard++) {
    let longest = -1;
    for (let i = 0; i < items.length; i++) if (isSystem(items[i]!) && (longest < 0 || itemCosts[i]! > itemCosts[longest]!)) longest = i;
    if (longest < 0) break;
    const floor = Math.floor(budget / 4);
    const over = total() - budget;
    const target = Math.max(floor, itemCosts[longest]! - MESSAGE_OVERHEAD_TOKENS - over);
    if (target >= itemCosts[longest]! - MESSAGE_OVERHEAD_TOKENS) break;
    const it = items[longest] as Extract<InputItem, { type: 'message' }>;
    const text = await cutText(itemText(it), target, count, 'head');
    items[longest] = messageItem('system', text);
    const before = itemCosts[longest]!;
    itemCosts[longest] = await cost(items[longest]!);
    dropped.cutTokens += before - itemCosts[longest]!;
  }
  // 4. Still over: system text to nothing but its head, then the front of the newest user message.
  for (let i = 0; i < items.length && total() > budget; i++) {
    const it = items[i]!;
    if (it.type !== 'message') continue;
    if (isSystem(it) || i === lastUser) {
      const over = total() - budget;
      const target = Math.max(0, itemCosts[i]! - MESSAGE_OVERHEAD_TOKENS - over);
      const text = await cutText(itemText(it), target, count, isSystem(it) ? 'head' : 'tail');
      items[i] = messageItem(it.role, text);
      const before = itemCosts[i]!;
      itemCosts[i] = await cost(items[i]!);
      dropped.cutTokens += before - itemCosts[i]!;
    }
  }
  return { items, tools, dropped, tokens: total() };
}

/** A function call of a finished response (`output` items of type `function_call`). */
export interface FunctionCallOut {
  callId: string;
  name: string;
  input: object;
}

/** The arguments text as the object a LanguageModelToolCallPart carries (malformed JSON: kept under `arguments`). */
export function callInput(args: unknown): object {
  if (typeof args !== 'string' || !args.trim()) return {};
  try {
    const v = JSON.parse(args) as unknown;
    return isObject(v) ? v : { value: v };
  } catch {
    return { arguments: args };
  }
}

/** A `function_call` output item as a call, or undefined for any other item. */
export function functionCallOf(item: unknown): FunctionCallOut | undefined {
  if (!isObject(item) || item['type'] !== 'function_call') return undefined;
  const callId = typeof item['call_id'] === 'string' ? item['call_id'] : typeof item['id'] === 'string' ? item['id'] : undefined;
  if (!callId || typeof item['name'] !== 'string') return undefined;
  return { callId, name: item['name'], input: callInput(item['arguments']) };
}

/** The function calls in a response's `output`, in order. */
export function functionCallsOf(response: Record<string, unknown> | null): FunctionCallOut[] {
  const output = response?.['output'];
  if (!Array.isArray(output)) return [];
  return output.map(functionCallOf).filter((c): c is FunctionCallOut => !!c);
}

/**
 * Where Copilot Chat puts what the user typed inside its user message, after blocks of context (`<context>` with
 * the date, `<reminderInstructions>`, …; its bundled extension in VS Code 1.139 uses both tags).
 */
const USER_TURN_TAG = /<(userRequest|user_query)>([\s\S]*?)<\/\1>/;

/** The last user message's text (what the user typed, when a chat client wraps it in context), short, for the tree. */
export function chatTitle(items: readonly InputItem[]): string {
  const last = [...items].reverse().find((i) => i.type === 'message' && i.role === 'user');
  const whole = last ? itemText(last) : '';
  const text = (USER_TURN_TAG.exec(whole)?.[2] ?? whole).replace(/\s+/g, ' ').trim();
  const short = text.length > 60 ? `${text.slice(0, 57)}…` : text;
  return `Chat: ${short || '(tool results)'}`;
}

/**
 * The sampling a chat request's `modelOptions` asks for, by the keys the table gives VS Code (temperature, top_p,
 * seed, …). A value out of its range is an error naming the option, as an LMSP client gets a 400 for it.
 */
export function samplingFromModelOptions(modelOptions: Readonly<Record<string, unknown>> | undefined): Sampling {
  const out: Record<string, unknown> = {};
  for (const field of SAMPLING_FIELD_NAMES) {
    const key = (SAMPLING_FIELDS[field] as RequestField).vscode;
    const value = key === undefined ? undefined : modelOptions?.[key];
    if (value === undefined || value === null) continue;
    const problem = fieldProblem(field, value);
    if (problem) throw new Error(`modelOptions.${key} ${problem}.`);
    out[field] = value;
  }
  return out as Sampling;
}
