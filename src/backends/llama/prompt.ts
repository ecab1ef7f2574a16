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
 * Chat history for a template-driven prompt, ending with the model turn to be completed: empty, or with
 * `openThought` an open thought segment (the chat wrapper renders its prefix).
 */
export function chatHistory(
  instructions: string | undefined,
  messages: readonly ChatMessage[],
  opts: { openThought?: boolean } = {},
): ChatHistoryItem[] {
  const history: ChatHistoryItem[] = [];
  const system = systemText(instructions, messages);
  if (system) history.push({ type: 'system', text: system });
  const { results, unpaired } = toolResults(messages);
  for (const m of messages) {
    if (m.role === 'user') history.push({ type: 'user', text: m.content });
    else if (m.role === 'assistant') {
      // Earlier reasoning first, as the model wrote it; the chat wrapper decides whether its template keeps it.
      const response: Array<string | FunctionCallItem | ThoughtSegment> = m.reasoning
        ? [{ type: 'segment', segmentType: 'thought', text: m.reasoning, ended: true }]
        : [];
      if (m.content) response.push(m.content);
      for (const c of m.toolCalls ?? []) {
        response.push({ type: 'functionCall', name: c.name, params: argumentsValue(c.arguments), result: results.get(c.callId) ?? '' });
      }
      history.push({ type: 'model', response });
    } else if (m.role === 'tool' && unpaired.has(m))
      history.push({ type: 'user', text: `Tool result${m.callId ? ` (${m.callId})` : ''}:\n${m.content}` });
  }
  history.push({ type: 'model', response: opts.openThought ? [{ type: 'segment', segmentType: 'thought', text: '', ended: false }] : [] });
  return history;
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
