// Builds the prompt a generation starts from: the model's chat template when it has one, plain text otherwise.

import type { ChatMessage } from '../../runtime/backend';

/** Structural slice of node-llama-cpp's ChatHistoryItem (the package is ESM-only; types stay local). */
export type ChatHistoryItem =
  | { type: 'system'; text: string }
  | { type: 'user'; text: string }
  | { type: 'model'; response: string[] };

/** System text: instructions first, then system/developer messages in order. */
export function systemText(instructions: string | undefined, messages: readonly ChatMessage[]): string {
  const parts = [instructions, ...messages.filter((m) => m.role === 'system' || m.role === 'developer').map((m) => m.content)];
  return parts.filter((p): p is string => !!p && p.length > 0).join('\n\n');
}

/** Chat history for a template-driven prompt, ending with an empty model turn to be completed. */
export function chatHistory(instructions: string | undefined, messages: readonly ChatMessage[]): ChatHistoryItem[] {
  const history: ChatHistoryItem[] = [];
  const system = systemText(instructions, messages);
  if (system) history.push({ type: 'system', text: system });
  for (const m of messages) {
    if (m.role === 'user') history.push({ type: 'user', text: m.content });
    else if (m.role === 'assistant') history.push({ type: 'model', response: [m.content] });
  }
  history.push({ type: 'model', response: [] });
  return history;
}

/** Plain-text prompt for models without a chat template (such as the generated demo model). */
export function plainTextPrompt(instructions: string | undefined, messages: readonly ChatMessage[]): string {
  const lines: string[] = [];
  const system = systemText(instructions, messages);
  if (system) lines.push(system, '');
  for (const m of messages) {
    if (m.role === 'user') lines.push(`User: ${m.content}`);
    else if (m.role === 'assistant') lines.push(`Assistant: ${m.content}`);
  }
  lines.push('Assistant:');
  return lines.join('\n');
}
