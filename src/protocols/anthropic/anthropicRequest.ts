// POST /v1/messages bodies (Anthropic Messages, docs/anthropic.md): checked in Anthropic's own shape for
// what only Messages has (content blocks, roles, tool and thinking forms), then translated into a /responses body and
// put through the LMSP door's very validation (schemas.ts validateResponseBody), as chat completions does, so every
// range and rule is checked in one place. A refusal of that second step is renamed into the Anthropic field it came
// from (`max_output_tokens` → `max_tokens`, `input.3` → `messages.1.content.2`).
//
// Policies (docs/anthropic.md): unknown top-level fields are ignored (Claude Code adds beta fields often; a 400 would
// end its turn); `cache_control` anywhere, `context_management`, `service_tier`, `container`, `metadata` are accepted
// and change nothing; the attribution block Claude Code puts first in `system` is dropped (it differs per
// conversation and sits at token 0, defeating prefix reuse); a `system` message inside `messages` is folded into the
// neighbouring user turn (the runtime hoists system messages to the head of the prompt); server tools (dated `type`)
// and `defer_loading` tools not surfaced by a `tool_reference` are left out of what the model sees; a thinking block
// whose signature we sealed gives its reasoning back as a reasoning item, any other is dropped; a final assistant
// turn (prefill) is refused, as the runtime always opens a new assistant turn and cannot continue one.
import { SAMPLING_FIELD_NAMES, SAMPLING_FIELDS, type AnthropicName, type RequestField } from '../../runtime/requestFields';
import { z } from 'zod';
import type { ResponseReasoning, ResponseRequest } from '../../runtime/task';
import { HttpProblem } from '../http/problem';
import { DEFAULTS, VENDOR_MEMBER } from '../lmsp/lmspConstants';
import { MAX_TOOL_DESCRIPTION_CHARS, parseBody, validateResponseBody } from '../lmsp/schemas';
import type { ReasoningSeal } from '../shared/reasoningSeal';

const text = z.string().max(1_000_000);
/** Blocks Anthropic has that a text-only local model cannot take: refused by name rather than as malformed. */
const UNSUPPORTED_BLOCKS = ['image', 'document', 'search_result', 'container_upload'] as const;
const textBlock = z.looseObject({ type: z.literal('text'), text });
const unsupportedBlock = z.looseObject({ type: z.enum(UNSUPPORTED_BLOCKS) });
const toolReference = z.looseObject({ type: z.literal('tool_reference'), tool_name: z.string().max(256) });
const toolResultContent = z.union([
  text,
  z.array(z.discriminatedUnion('type', [textBlock, toolReference, unsupportedBlock])).max(DEFAULTS.maxInputItems),
]);

const block = z.discriminatedUnion('type', [
  textBlock,
  unsupportedBlock,
  z.looseObject({
    type: z.literal('tool_use'),
    id: z.string().min(1).max(256),
    name: z.string().min(1).max(256),
    input: z.record(z.string(), z.unknown()),
  }),
  z.looseObject({
    type: z.literal('tool_result'),
    tool_use_id: z.string().min(1).max(256),
    content: toolResultContent.optional(),
    is_error: z.boolean().optional(),
  }),
  z.looseObject({ type: z.literal('thinking'), thinking: text, signature: z.string().max(4_000_000) }),
  z.looseObject({ type: z.literal('redacted_thinking'), data: z.string().max(4_000_000) }),
]);
type Block = z.infer<typeof block>;

const message = z.looseObject({
  role: z.enum(['user', 'assistant', 'system']),
  content: z.union([text, z.array(block).max(DEFAULTS.maxInputItems)]),
});

const tool = z.looseObject({
  name: z.string().min(1).max(256),
  type: z.string().max(128).optional(),
  description: z.string().max(1_000_000).optional(),
  input_schema: z.record(z.string(), z.unknown()).optional(),
  defer_loading: z.boolean().optional(),
  strict: z.boolean().optional(),
});

const toolChoice = z.discriminatedUnion('type', [
  z.looseObject({ type: z.literal('auto'), disable_parallel_tool_use: z.boolean().optional() }),
  z.looseObject({ type: z.literal('any'), disable_parallel_tool_use: z.boolean().optional() }),
  z.looseObject({ type: z.literal('tool'), name: z.string().min(1).max(256), disable_parallel_tool_use: z.boolean().optional() }),
  z.looseObject({ type: z.literal('none') }),
]);

const thinking = z.discriminatedUnion('type', [
  z.looseObject({ type: z.literal('enabled'), budget_tokens: z.number().int().min(1), display: z.enum(['summarized', 'omitted']).optional() }),
  z.looseObject({ type: z.literal('adaptive'), display: z.enum(['summarized', 'omitted']).optional() }),
  z.looseObject({ type: z.literal('disabled') }),
]);

const outputConfig = z.looseObject({
  effort: z.enum(['low', 'medium', 'high', 'xhigh', 'max']).nullable().optional(),
  format: z
    .looseObject({ type: z.literal('json_schema'), schema: z.record(z.string(), z.unknown()) })
    .nullable()
    .optional(),
});

/** What this door reads of a Messages body; every other member is accepted and ignored. */
const common = {
  model: z.string().min(1).max(256),
  messages: z.array(message).min(1).max(DEFAULTS.maxInputItems),
  system: z.union([text, z.array(textBlock).max(DEFAULTS.maxInputItems)]).optional(),
  tools: z.array(tool).max(256).optional(),
  tool_choice: toolChoice.optional(),
  thinking: thinking.optional(),
  output_config: outputConfig.optional(),
  // Vendor member, as on /responses (seed and other sampling Anthropic has no field for).
  [VENDOR_MEMBER]: z.record(z.string(), z.unknown()).optional(),
  // Read for `priority` only (Claude Code puts its session in `user_id`; anthropicDoor.ts).
  metadata: z.record(z.string(), z.unknown()).nullable().optional(),
};
/**
 * The sampling fields Messages has, by their Messages names (runtime/requestFields.ts); their ranges are checked
 * once the body is a Responses body.
 */
const messagesSampling = {
  stop_sequences: z.array(z.string()).optional(),
  temperature: z.number().optional(),
  top_p: z.number().optional(),
  top_k: z.number().int().optional(),
} satisfies Record<AnthropicName, z.ZodType>;
export const messagesSchema = z.looseObject({
  ...common,
  max_tokens: z.number().int().min(1),
  stream: z.boolean().optional(),
  ...messagesSampling,
});
export const countTokensSchema = z.looseObject(common);
type MessagesBody = z.infer<typeof messagesSchema>;
type CommonBody = z.infer<typeof countTokensSchema>;

/** Claude Code's attribution line (docs/anthropic.md); set CLAUDE_CODE_ATTRIBUTION_HEADER=0 to have none. */
export const BILLING_BLOCK_PREFIX = 'x-anthropic-billing-header';
/** Between the system blocks kept (fixed, so the prompt head is stable). */
const SYSTEM_SEPARATOR = '\n\n';

export interface MessagesRequest {
  stream: boolean;
  input: ResponseRequest;
  /** The reasoning effort thinking / output_config.effort ask for, applied only where the model has the control. */
  effort: ResponseReasoning['effort'];
  /** thinking.display "omitted": thinking blocks carry an empty text (the signature still holds the reasoning). */
  omitThinking: boolean;
  names: AnthropicNames;
}

/** How the Responses body's params read in the Messages body that became it. */
export interface AnthropicNames {
  /** For each input item: the Messages path it came from. */
  items: string[];
  /** For each Responses tool: its index in the Messages `tools`. */
  tools: number[];
}

/** Validates a Messages body; the runtime request it becomes (not yet created). */
export function validateMessagesBody(body: unknown, seal: ReasoningSeal): MessagesRequest {
  const m = parseBody(messagesSchema, body);
  const t = translate(m, seal);
  t.body.max_output_tokens = m.max_tokens;
  const extras = t.body[VENDOR_MEMBER] as Record<string, unknown>;
  // An "up to" budget: Claude Code asks 32000 of any model; the prompt's room caps it (never a 400).
  extras.cap_max_output_tokens = true;
  // The task's priority among the caller's queued tasks (runtime/queue.ts), where a Messages client can put it.
  const priority = m.metadata?.priority;
  if (priority !== undefined) extras.priority = priority;
  for (const f of SAMPLING_FIELD_NAMES) {
    const spec: RequestField = SAMPLING_FIELDS[f];
    const value = spec.anthropic === undefined ? undefined : (m as Record<string, unknown>)[spec.anthropic];
    if (value === undefined || (Array.isArray(value) && value.length === 0)) continue;
    (spec.vendor ? extras : t.body)[spec.wire] = value;
  }
  return { ...t.validated(), stream: m.stream === true };
}

/** The request a count_tokens body describes (max_tokens is not part of it). */
export function validateCountTokensBody(body: unknown, seal: ReasoningSeal): ResponseRequest {
  return translate(parseBody(countTokensSchema, body), seal).validated().input;
}

function translate(m: CommonBody, seal: ReasoningSeal) {
  const items: string[] = [];
  const input: unknown[] = [];
  const turns = foldTurns(m.messages);
  const surfaced = new Set<string>();
  for (const turn of turns) for (const b of turn.blocks) referencedTools(b.block, surfaced);
  for (const turn of turns) {
    for (const [item, at] of turnItems(turn, m.model, seal)) {
      input.push(item);
      items.push(at);
    }
  }
  const body: Record<string, unknown> = { model: m.model, input, [VENDOR_MEMBER]: { ...m[VENDOR_MEMBER] } };
  const system = systemText(m.system);
  if (system) body.instructions = system;
  const tools = toolsOf(m, surfaced);
  if (tools.list.length) body.tools = tools.list;
  Object.assign(body, toolChoiceOf(m.tool_choice, tools.list.length > 0));
  if (m.output_config?.format) body.text = { format: { type: 'json_schema', name: 'output', schema: m.output_config.format.schema, strict: true } };
  const names: AnthropicNames = { items, tools: tools.from };
  return {
    body,
    validated(): Omit<MessagesRequest, 'stream'> {
      try {
        const { input: request } = validateResponseBody(body);
        return { input: request, effort: effortOf(m), omitThinking: m.thinking?.type !== 'disabled' && m.thinking?.display === 'omitted', names };
      } catch (e) {
        throw inAnthropicTerms(e, names);
      }
    },
  };
}

/** The system blocks as one text: the attribution block dropped when it is first, the rest joined in order. */
export function systemText(system: CommonBody['system']): string {
  if (system === undefined) return '';
  if (typeof system === 'string') return system;
  const blocks = system.map((b) => b.text);
  if (blocks[0]?.startsWith(BILLING_BLOCK_PREFIX)) blocks.shift();
  return blocks.filter((b) => b !== '').join(SYSTEM_SEPARATOR);
}

interface PlacedBlock {
  block: Block;
  /** The Messages path of the block (`messages.2.content.1`, or `messages.2.content` for string content). */
  at: string;
}
interface Turn {
  role: 'user' | 'assistant';
  blocks: PlacedBlock[];
  /** Path of the message that opened it. */
  at: string;
}

function blocksOf(content: MessagesBody['messages'][number]['content'], at: string): PlacedBlock[] {
  if (typeof content === 'string') return [{ block: { type: 'text', text: content }, at: `${at}.content` }];
  return content.map((b, j) => ({ block: b, at: `${at}.content.${j}` }));
}

/**
 * Messages as alternating user/assistant turns: consecutive same-role messages merged; a `system` message's text
 * folded into the user turn before it, or, after an assistant turn, into the next user turn after its tool results
 * (never between a tool_use and its tool_result), or a user turn of its own at the end.
 */
function foldTurns(messages: MessagesBody['messages']): Turn[] {
  const turns: Turn[] = [];
  let pending: PlacedBlock[] = [];
  for (const [i, m] of messages.entries()) {
    const at = `messages.${i}`;
    const blocks = blocksOf(m.content, at);
    const last = turns[turns.length - 1];
    if (m.role === 'system') {
      const bad = blocks.find((b) => b.block.type !== 'text');
      if (bad) throw refusal('invalid_request', `A system message may hold only text blocks, not "${bad.block.type}".`, `${bad.at}.type`);
      if (last?.role === 'user') last.blocks.push(...blocks);
      else pending.push(...blocks);
      continue;
    }
    let turn = last;
    if (last?.role === m.role) last.blocks.push(...blocks);
    else turns.push((turn = { role: m.role, blocks, at }));
    if (m.role === 'user' && pending.length) {
      const firstOther = turn!.blocks.findIndex((b) => b.block.type !== 'tool_result');
      turn!.blocks.splice(firstOther < 0 ? turn!.blocks.length : firstOther, 0, ...pending);
      pending = [];
    }
  }
  if (pending.length) turns.push({ role: 'user', blocks: pending, at: pending[0].at.replace(/\.content.*$/, '') });
  const last = turns[turns.length - 1];
  if (last?.role === 'assistant') {
    throw refusal(
      'unsupported_capability',
      'A final assistant message (prefill) is not supported by this server: the model starts a new assistant turn and cannot continue one. End the conversation with a user message.',
      last.at,
    );
  }
  return turns;
}

function referencedTools(b: Block, into: Set<string>): void {
  if (b.type !== 'tool_result' || typeof b.content !== 'object') return;
  for (const c of b.content) if (c.type === 'tool_reference') into.add(c.tool_name);
}

/** The Responses input items of one turn, each with the Messages path it came from. */
function turnItems(turn: Turn, model: string, seal: ReasoningSeal): Array<[unknown, string]> {
  const out: Array<[unknown, string]> = [];
  const textPart = turn.role === 'user' ? 'input_text' : 'output_text';
  let texts: { parts: Array<{ type: string; text: string }>; at: string } | undefined;
  const flush = () => {
    if (texts) out.push([{ role: turn.role, content: texts.parts }, texts.at]);
    texts = undefined;
  };
  for (const { block: b, at } of turn.blocks) {
    if (b.type === 'text') {
      if (b.text === '') continue;
      texts ??= { parts: [], at };
      texts.parts.push({ type: textPart, text: b.text });
      continue;
    }
    flush();
    if (UNSUPPORTED_BLOCKS.includes(b.type as (typeof UNSUPPORTED_BLOCKS)[number])) {
      throw refusal('unsupported_capability', `Content blocks of type "${b.type}" are not supported by this server (text only).`, `${at}.type`);
    }
    if (b.type === 'tool_use') {
      if (turn.role !== 'assistant') throw refusal('invalid_request', 'tool_use blocks belong in assistant messages.', `${at}.type`);
      out.push([{ type: 'function_call', call_id: b.id, name: b.name, arguments: JSON.stringify(b.input) }, at]);
    } else if (b.type === 'tool_result') {
      if (turn.role !== 'user') throw refusal('invalid_request', 'tool_result blocks belong in user messages.', `${at}.type`);
      const result = toolResultText(b.content, at);
      out.push([{ type: 'function_call_output', call_id: b.tool_use_id, output: b.is_error ? `Error: ${result}` : result }, at]);
    } else if (b.type === 'thinking') {
      // Ours: the reasoning comes back (kept with the input; the runtime gives it to templates that take it).
      // Altered, foreign or another model's: dropped without a word, as Anthropic's docs ask clients not to rely on it.
      const opened = seal.unseal(b.signature);
      if (opened && opened.model === model && opened.text) {
        out.push([{ type: 'reasoning', summary: [], content: [{ type: 'reasoning_text', text: opened.text }] }, at]);
      }
    }
    // redacted_thinking: opaque to us, dropped.
  }
  flush();
  return out;
}

function toolResultText(content: z.infer<typeof toolResultContent> | undefined, at: string): string {
  if (content === undefined) return '';
  if (typeof content === 'string') return content;
  return content
    .map((c, k) => {
      if (c.type === 'text') return c.text;
      if (c.type === 'tool_reference') return `Tool "${c.tool_name}" is now available.`;
      throw refusal(
        'unsupported_capability',
        `Content blocks of type "${c.type}" are not supported by this server (text only).`,
        `${at}.content.${k}.type`,
      );
    })
    .join('\n');
}

/** Client tools as function tools; server tools and deferred tools nobody surfaced left out (docs/anthropic.md). */
function toolsOf(m: CommonBody, surfaced: ReadonlySet<string>): { list: Array<Record<string, unknown>>; from: number[] } {
  const list: Array<Record<string, unknown>> = [];
  const from: number[] = [];
  const forced = m.tool_choice?.type === 'tool' ? m.tool_choice.name : undefined;
  for (const [i, t] of (m.tools ?? []).entries()) {
    if (t.type !== undefined && t.type !== 'custom') continue; // a server tool (web_search_20250305, …)
    if (t.defer_loading && !surfaced.has(t.name) && t.name !== forced) continue;
    if (!t.input_schema) throw refusal('invalid_request', 'A custom tool needs an "input_schema".', `tools.${i}.input_schema`);
    const { $schema: _dialect, ...parameters } = t.input_schema;
    list.push({
      type: 'function',
      name: t.name,
      ...(t.description ? { description: t.description.slice(0, MAX_TOOL_DESCRIPTION_CHARS) } : {}),
      parameters: { type: 'object', ...parameters },
      ...(t.strict !== undefined ? { strict: t.strict } : {}),
    });
    from.push(i);
  }
  return { list, from };
}

function toolChoiceOf(choice: CommonBody['tool_choice'], haveTools: boolean): Record<string, unknown> {
  if (!choice) return {};
  const parallel = 'disable_parallel_tool_use' in choice && choice.disable_parallel_tool_use === true ? { parallel_tool_calls: false } : {};
  if (choice.type === 'none') return haveTools ? { tool_choice: 'none' } : {};
  if (choice.type === 'auto') return haveTools ? { tool_choice: 'auto', ...parallel } : {};
  if (choice.type === 'any') return { tool_choice: 'required', ...parallel };
  return { tool_choice: { type: 'function', name: choice.name }, ...parallel };
}

/** Thought tokens a budget asks for, as the runtime's efforts bound them (outputPlan.ts THOUGHT_BUDGETS). */
function effortOf(m: CommonBody): ResponseReasoning['effort'] {
  const t = m.thinking;
  if (t?.type === 'disabled') return 'none';
  if (t?.type === 'enabled') return t.budget_tokens <= 128 ? 'minimal' : t.budget_tokens <= 512 ? 'low' : t.budget_tokens <= 2048 ? 'medium' : 'high';
  const effort = m.output_config?.effort;
  if (!effort) return undefined;
  return effort === 'low' || effort === 'medium' ? effort : 'high';
}

function refusal(code: string, detail: string, param: string): HttpProblem {
  return new HttpProblem(400, code, detail, { param });
}

/** Responses params renamed into the Messages fields they came from (prefixes, longest first where they nest). */
const RENAMES: Array<[string, string]> = [
  ['max_output_tokens', 'max_tokens'],
  ['instructions', 'system'],
  ['text.format.schema', 'output_config.format.schema'],
  ['text.format', 'output_config.format'],
  ['text', 'output_config'],
  ['reasoning.effort', 'thinking'],
  ['reasoning', 'thinking'],
  ['parallel_tool_calls', 'tool_choice.disable_parallel_tool_use'],
  ['tool_choice.name', 'tool_choice.name'],
  [`${VENDOR_MEMBER}.stop`, 'stop_sequences'],
  [`${VENDOR_MEMBER}.top_k`, 'top_k'],
];

/** The Messages field a Responses param names (null stays null). */
export function anthropicParam(param: string | null | undefined, names: AnthropicNames): string | null {
  if (param === null || param === undefined) return null;
  const item = /^input\.(\d+)(\..*)?$/.exec(param);
  if (item) return names.items[Number(item[1])] ?? 'messages';
  if (param === 'input') return 'messages';
  const tool = /^tools\.(\d+)(\.name|\.description|\.strict)?(\.parameters(\..*)?)?$/.exec(param);
  if (tool) {
    const i = names.tools[Number(tool[1])] ?? Number(tool[1]);
    return `tools.${i}${tool[2] ?? ''}${tool[3] ? `.input_schema${tool[4] ?? ''}` : ''}`;
  }
  for (const [from, to] of RENAMES) if (param === from || param.startsWith(`${from}.`)) return to + param.slice(from.length);
  return param;
}

/**
 * A refusal told in the Messages body's fields; a prompt that does not fit the context in Anthropic's wording, which
 * Claude Code matches to compact the conversation ("prompt is too long: N tokens > M maximum").
 */
export function inAnthropicTerms(e: unknown, names: AnthropicNames): unknown {
  if (!(e instanceof HttpProblem)) return e;
  const from = e.extra.param;
  const to = anthropicParam(from, names);
  let detail = from && to ? e.detail.split(`"${from}"`).join(`"${to}"`).split(`'${from}'`).join(`'${to}'`) : e.detail;
  if (e.code === 'context_length_exceeded') detail = overflowWording(detail);
  if (to === from && detail === e.detail) return e;
  return new HttpProblem(e.status, e.code, detail, { ...e.extra, param: to });
}

/** contextFit.ts's message ("context is M tokens; the input is N tokens") in Anthropic's wording, the rest kept. */
export function overflowWording(detail: string): string {
  const m = /context is (\d+) tokens; the input is (\d+) tokens/.exec(detail);
  return m ? `prompt is too long: ${m[2]} tokens > ${Number(m[1]) - 1} maximum. ${detail}` : detail;
}
