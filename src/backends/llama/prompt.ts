// Builds the prompt a generation starts from: the model's chat template when it has one, plain text otherwise.
// Function calls in the history (assistant toolCalls, answered by `tool` messages with the same callId) become
// node-llama-cpp's ChatModelFunctionCall items, which the template renders in its own syntax; template-less models get
// the plain-text syntax of toolCalls.ts (PLAIN_CALL_SYNTAX), with the offered functions listed under "# Tools".

import type { ChatMessage, ToolDefinition } from '../../runtime/backend';

/** Structural slice of node-llama-cpp's ChatModelFunctionCall. */
export interface FunctionCallItem {
  type: 'functionCall';
  name: string;
  params: unknown;
  result: unknown;
}

/** Structural slice of node-llama-cpp's ChatHistoryItem (the package is ESM-only; types stay local). */
export type ChatHistoryItem =
  { type: 'system'; text: string } | { type: 'user'; text: string } | { type: 'model'; response: Array<string | FunctionCallItem | ThoughtSegment> };

/** Structural slice of node-llama-cpp's ChatModelSegment: earlier reasoning of a model turn. */
export interface ThoughtSegment {
  type: 'segment';
  segmentType: 'thought';
  text: string;
  ended: boolean;
}

/** System text: instructions first, then system/developer messages in order. */
export function systemText(instructions: string | undefined, messages: readonly ChatMessage[]): string {
  const parts = [instructions, ...messages.filter((m) => m.role === 'system' || m.role === 'developer').map((m) => m.content)];
  return parts.filter((p): p is string => !!p && p.length > 0).join('\n\n');
}

/** The arguments as a value (the JSON the model wrote), or the raw text when it is not JSON. */
function argumentsValue(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

/** Tool results by callId, and the tool messages that answer no call of the history (rendered as user text). */
function toolResults(messages: readonly ChatMessage[]): { results: Map<string, string>; unpaired: Set<ChatMessage> } {
  const calls = new Set(messages.flatMap((m) => (m.role === 'assistant' ? (m.toolCalls ?? []).map((c) => c.callId) : [])));
  const results = new Map<string, string>();
  const unpaired = new Set<ChatMessage>();
  for (const m of messages) {
    if (m.role !== 'tool') continue;
    if (m.callId && calls.has(m.callId) && !results.has(m.callId)) results.set(m.callId, m.content);
    else unpaired.add(m);
  }
  return { results, unpaired };
}

/**
 * Chat history for a template-driven prompt, ending with the model turn to be completed: an empty one (with
 * `thoughts.openThought` an open thought segment, whose prefix the chat wrapper renders), or the last one when its
 * calls were all answered. `thoughts.keep`: whether the template has a place for earlier reasoning; where it has none
 * the reasoning is left out, as llama.cpp's rendering of such a template leaves out `reasoning_content` (node-llama-cpp
 * would otherwise write it into the turn as text). `thoughts.after`: the text the template puts after a thought
 * (Qwen 3: `</think>` then a blank line).
 */
export function chatHistory(
  instructions: string | undefined,
  messages: readonly ChatMessage[],
  thoughts: { keep: boolean; after?: string; openThought?: boolean } = { keep: true },
): ChatHistoryItem[] {
  const history: ChatHistoryItem[] = [];
  const system = systemText(instructions, messages);
  if (system) history.push({ type: 'system', text: system });
  const { results, unpaired } = toolResults(messages);
  const lastUser = messages.map((m) => m.role).lastIndexOf('user');
  for (const [index, m] of messages.entries()) {
    if (m.role === 'user') history.push({ type: 'user', text: m.content });
    else if (m.role === 'assistant') {
      // Earlier reasoning first, as the model wrote it; the chat wrapper decides whether its template keeps it.
      const response: Array<string | FunctionCallItem | ThoughtSegment> =
        m.reasoning && thoughts.keep ? [{ type: 'segment', segmentType: 'thought', text: m.reasoning, ended: true }] : [];
      // What the template writes between the thought and the rest of the turn (the model wrote it after its thought,
      // so node-llama-cpp's wrappers expect it in the turn's text).
      // Such templates keep only the reasoning of the turn under way (after the last user message); node-llama-cpp's
      // wrapper drops the earlier ones itself, and the text after them with it must not be left.
      if (response.length && thoughts.after && index > lastUser && (m.content || m.toolCalls?.length)) response.push(thoughts.after);
      if (m.content) response.push(m.content);
      for (const c of m.toolCalls ?? []) {
        response.push({ type: 'functionCall', name: c.name, params: argumentsValue(c.arguments), result: results.get(c.callId) ?? '' });
      }
      history.push({ type: 'model', response });
    } else if (m.role === 'tool' && unpaired.has(m))
      history.push({ type: 'user', text: `Tool result${m.callId ? ` (${m.callId})` : ''}:\n${m.content}` });
  }
  // A turn whose calls were all answered goes on: the model continues that response after its results (as the
  // templates render it: the results, then the same assistant turn reopened), rather than starting a new one.
  const last = messages[messages.length - 1];
  const lastModel = history[history.length - 1];
  const continues = last?.role === 'tool' && !unpaired.has(last) && lastModel?.type === 'model' && answeredAfter(messages);
  if (!continues) {
    history.push({
      type: 'model',
      response: thoughts.openThought ? [{ type: 'segment', segmentType: 'thought', text: '', ended: false }] : [],
    });
  }
  return history;
}

/** Whether the messages end with the last assistant turn's calls, each answered by a tool message after it. */
function answeredAfter(messages: readonly ChatMessage[]): boolean {
  let i = messages.length - 1;
  while (i >= 0 && messages[i].role === 'tool') i--;
  const turn = messages[i];
  if (turn?.role !== 'assistant' || !turn.toolCalls?.length) return false;
  const answered = new Set(messages.slice(i + 1).map((m) => m.callId));
  return turn.toolCalls.every((c) => answered.has(c.callId));
}

/** node-llama-cpp's `availableFunctions` for the offered tools. */
export function availableFunctions(
  tools: readonly ToolDefinition[] | undefined,
): Record<string, { description?: string; params?: unknown }> | undefined {
  if (!tools || tools.length === 0) return undefined;
  return Object.fromEntries(
    tools.map((t) => [t.name, { ...(t.description ? { description: t.description } : {}), ...(t.parameters ? { params: t.parameters } : {}) }]),
  );
}

/** The "# Tools" section of a plain-text prompt: the functions and the call syntax (PLAIN_CALL_SYNTAX). */
function plainToolsSection(tools: readonly ToolDefinition[]): string {
  const signatures = tools.map((t) =>
    JSON.stringify({ name: t.name, ...(t.description ? { description: t.description } : {}), parameters: t.parameters ?? { type: 'object' } }),
  );
  return [
    '# Tools',
    '',
    'You may call one or more functions. Their signatures:',
    '<tools>',
    ...signatures,
    '</tools>',
    '',
    'To call a function, write:',
    '<tool_call>',
    '{"name": <function-name>, "arguments": <args-json-object>}',
    '</tool_call>',
  ].join('\n');
}

/** One call in the plain-text syntax (PLAIN_CALL_SYNTAX of toolCalls.ts). */
export function plainCallText(name: string, args: string): string {
  return `<tool_call>\n{"name": "${name}", "arguments": ${args}}\n</tool_call>`;
}

/** Plain-text prompt for models without a chat template (such as the generated demo model). */
export function plainTextPrompt(instructions: string | undefined, messages: readonly ChatMessage[], tools?: readonly ToolDefinition[]): string {
  const lines: string[] = [];
  const system = [systemText(instructions, messages), tools && tools.length ? plainToolsSection(tools) : ''].filter((s) => s).join('\n\n');
  if (system) lines.push(system, '');
  for (const m of messages) {
    if (m.role === 'user') lines.push(`User: ${m.content}`);
    else if (m.role === 'assistant') {
      const calls = (m.toolCalls ?? []).map((c) => plainCallText(c.name, c.arguments));
      lines.push(`Assistant: ${[m.content, ...calls].filter((s) => s).join('\n')}`);
    } else if (m.role === 'tool') lines.push(`Tool: <tool_response>\n${m.content}\n</tool_response>`);
  }
  lines.push('Assistant:');
  return lines.join('\n');
}
