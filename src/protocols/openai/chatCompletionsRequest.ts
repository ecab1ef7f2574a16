// POST /lmsp/v1/chat/completions bodies: validated in chat's own shape (what only chat has: message roles, nested
// tools, response_format's wrapper, n, stream_options), then translated into a /responses body and put through the
// very same validation as /responses (schemas.ts validateResponseBody), so every range, limit and rule is checked in
// one place. A refusal from that second step names the Responses field; `chatParam` renames it back into the field
// the chat client sent (`max_output_tokens` → `max_tokens`, `input.3` → `messages.3`, `task_runtime.seed` → `seed`).
import { SAMPLING_FIELD_NAMES, SAMPLING_FIELDS, type RequestField, type SamplingField } from '../../runtime/requestFields';
import { z } from 'zod';
import { INCLUDE_OUTPUT_LOGPROBS, type ResponseRequest } from '../../runtime/task';
import { HttpProblem } from '../http/problem';
import { DEFAULTS, VENDOR_MEMBER } from '../lmsp/lmspConstants';
import { parseBody, prioritySchema, validateResponseBody } from '../lmsp/schemas';

const text = z.string().max(1_000_000);
/** Content parts: text is served; the others are named so that they are refused as unsupported, not as malformed. */
const UNSUPPORTED_PARTS = ['image_url', 'input_audio', 'file', 'refusal'] as const;
const contentPart = z.union([z.strictObject({ type: z.literal('text'), text }), z.looseObject({ type: z.enum(UNSUPPORTED_PARTS) })]);
const content = z.union([text, z.array(contentPart).min(1).max(DEFAULTS.maxInputItems)]);
const name = z.string().max(256).optional();

const toolCall = z.strictObject({
  id: z.string().min(1).max(256),
  type: z.literal('function'),
  function: z.strictObject({ name: z.string().max(256), arguments: text }),
});

const message = z.discriminatedUnion('role', [
  z.strictObject({ role: z.enum(['system', 'developer']), content, name }),
  z.strictObject({ role: z.literal('user'), content, name }),
  z.strictObject({
    role: z.literal('assistant'),
    content: content.nullable().optional(),
    refusal: z.string().max(1_000_000).nullable().optional(),
    tool_calls: z.array(toolCall).max(DEFAULTS.maxInputItems).optional(),
    name,
  }),
  z.strictObject({ role: z.literal('tool'), tool_call_id: z.string().min(1).max(256), content }),
]);

const tool = z.strictObject({
  type: z.literal('function'),
  function: z.strictObject({
    name: z.string().max(256),
    description: z.string().max(100_000).nullable().optional(),
    parameters: z.record(z.string(), z.unknown()).nullable().optional(),
    strict: z.boolean().nullable().optional(),
  }),
});

const toolChoice = z.union([
  z.enum(['none', 'auto', 'required']),
  z.strictObject({ type: z.literal('function'), function: z.strictObject({ name: z.string().max(256) }) }),
]);

const responseFormat = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('text') }),
  z.strictObject({ type: z.literal('json_object') }),
  z.strictObject({
    type: z.literal('json_schema'),
    json_schema: z.strictObject({
      name: z.unknown(),
      description: z.unknown().optional(),
      schema: z.unknown().optional(),
      strict: z.boolean().nullable().optional(),
    }),
  }),
]);

/** A field whose value the Responses validation checks (ranges, types); here only carried over. */
const carried = z.unknown().optional();

/** Body of POST /chat/completions (docs/lmsp.md, the part this runtime serves or refuses by name). */
export const chatCompletionSchema = z.strictObject({
  model: z.string().min(1).max(256),
  messages: z.array(message).min(1).max(DEFAULTS.maxInputItems),
  stream: z.boolean().nullable().optional(),
  stream_options: z.strictObject({ include_usage: z.boolean().optional(), include_obfuscation: z.boolean().optional() }).nullable().optional(),
  n: z.number().int().min(1).max(128).nullable().optional(),
  max_tokens: carried,
  max_completion_tokens: carried,
  // The sampling fields, OpenAI's and llama.cpp's server extras, by their chat names (runtime/requestFields.ts).
  ...(Object.fromEntries(SAMPLING_FIELD_NAMES.map((f) => [SAMPLING_FIELDS[f].chat, carried])) as Record<
    (typeof SAMPLING_FIELDS)[SamplingField]['chat'],
    typeof carried
  >),
  logprobs: z.boolean().nullable().optional(),
  top_logprobs: carried,
  response_format: responseFormat.optional(),
  tools: z.array(tool).max(128).optional(),
  tool_choice: toolChoice.optional(),
  parallel_tool_calls: z.boolean().nullable().optional(),
  reasoning_effort: carried,
  metadata: carried,
  user: carried,
  // Accepted and without effect here: they steer OpenAI's own service (storage for its dashboard, tiers, caching).
  store: z.boolean().nullable().optional(),
  service_tier: z.string().max(64).nullable().optional(),
  prompt_cache_key: z.string().max(256).nullable().optional(),
  safety_identifier: z.string().max(256).nullable().optional(),
  // Vendor member: what neither OpenAI nor llama.cpp has a chat field for (vLLM's top-level `priority` runs lower
  // first; ours, higher first among the caller's own tasks, sits here so that the two are never confused).
  [VENDOR_MEMBER]: z.strictObject({ priority: prioritySchema.optional() }).optional(),
  // Refused when set (UNSUPPORTED below): features this runtime does not have.
  logit_bias: carried,
  modalities: carried,
  audio: carried,
  prediction: carried,
  web_search_options: carried,
  verbosity: carried,
  functions: carried,
  function_call: carried,
});
export type ChatCompletionBody = z.infer<typeof chatCompletionSchema>;

/** Chat fields this runtime cannot honour, refused (400 unsupported_capability) when they ask for something. */
const UNSUPPORTED: Partial<Record<keyof ChatCompletionBody, (v: unknown) => boolean>> = {
  n: (v) => typeof v === 'number' && v > 1,
  logit_bias: (v) => v !== null && v !== undefined && !(typeof v === 'object' && Object.keys(v).length === 0),
  modalities: (v) => v !== null && v !== undefined && !(Array.isArray(v) && v.every((m) => m === 'text')),
  audio: (v) => v !== null && v !== undefined,
  prediction: (v) => v !== null && v !== undefined,
  web_search_options: (v) => v !== null && v !== undefined,
  verbosity: (v) => v !== null && v !== undefined,
  functions: (v) => v !== null && v !== undefined,
  function_call: (v) => v !== null && v !== undefined,
};

export interface ChatRequest {
  stream: boolean;
  includeUsage: boolean;
  input: ResponseRequest;
  /** For refusals of the runtime request later on (at create): how its params read in this body. */
  names: ChatNames;
}

/** Validates a chat completions body and gives the runtime request it becomes; every refusal names a chat field. */
export function validateChatBody(body: unknown): ChatRequest {
  const chat = parseBody(chatCompletionSchema, body);
  for (const [field, unsupported] of Object.entries(UNSUPPORTED)) {
    const value = chat[field as keyof ChatCompletionBody];
    if (unsupported(value)) throw unsupportedField(field, field === 'n' ? 'Only n = 1 is supported by this server.' : undefined);
  }
  const stream = chat.stream === true;
  if (chat.stream_options && !stream) {
    throw new HttpProblem(400, 'invalid_request', "The field 'stream_options' is only allowed when 'stream' is true.", { param: 'stream_options' });
  }
  if (chat.top_logprobs !== undefined && chat.top_logprobs !== null && chat.logprobs !== true) {
    throw new HttpProblem(400, 'invalid_request', "The field 'top_logprobs' needs 'logprobs' set to true.", { param: 'top_logprobs' });
  }
  const translated = toResponsesBody(chat);
  try {
    const input = validateResponseBody(translated.body).input;
    return { stream, includeUsage: chat.stream_options?.include_usage === true, input, names: translated.names };
  } catch (e) {
    throw inChatTerms(e, translated.names);
  }
}

function unsupportedField(param: string, detail?: string): HttpProblem {
  return new HttpProblem(400, 'unsupported_capability', detail ?? `The field "${param}" is not supported by this server.`, { param });
}

/** How the Responses body's params read in the chat body that became it. */
export interface ChatNames {
  /** For each input item: the chat path it came from (`messages.2`, `messages.2.tool_calls.0`). */
  items: string[];
  /** Which of max_tokens / max_completion_tokens was sent. */
  maxTokens: string;
}

interface Translated {
  body: Record<string, unknown>;
  names: ChatNames;
}

const present = <T>(v: T | null | undefined): v is T => v !== null && v !== undefined;

/** The /responses body a chat body means (not yet validated: that is validateResponseBody's). */
export function toResponsesBody(chat: ChatCompletionBody): Translated {
  const input: unknown[] = [];
  const items: string[] = [];
  const push = (item: unknown, at: string) => {
    input.push(item);
    items.push(at);
  };
  for (const [i, m] of chat.messages.entries()) {
    const at = `messages.${i}`;
    if (m.role === 'tool') {
      push({ type: 'function_call_output', call_id: m.tool_call_id, output: partsText(m.content, at) }, at);
      continue;
    }
    if (m.role === 'assistant') {
      const parts = present(m.content) ? messageContent(m.content, 'output_text', at) : undefined;
      // An assistant turn of only tool calls has no message item (as Responses input has it).
      if (parts !== undefined && !(m.tool_calls?.length && (parts === '' || (Array.isArray(parts) && parts.length === 0)))) {
        push({ role: 'assistant', content: parts }, at);
      }
      for (const [k, call] of (m.tool_calls ?? []).entries()) {
        push({ type: 'function_call', call_id: call.id, name: call.function.name, arguments: call.function.arguments }, `${at}.tool_calls.${k}`);
      }
      continue;
    }
    push({ role: m.role, content: messageContent(m.content, 'input_text', at) }, at);
  }

  const body: Record<string, unknown> = { model: chat.model, input };
  const maxTokens = present(chat.max_completion_tokens) ? 'max_completion_tokens' : 'max_tokens';
  const max = present(chat.max_completion_tokens) ? chat.max_completion_tokens : chat.max_tokens;
  if (present(max)) body.max_output_tokens = max;
  for (const k of ['metadata', 'user', 'parallel_tool_calls'] as const) if (present(chat[k])) body[k] = chat[k];
  if (chat.logprobs === true) {
    body.include = [INCLUDE_OUTPUT_LOGPROBS];
    if (present(chat.top_logprobs)) body.top_logprobs = chat.top_logprobs;
  }
  // Each sampling field where /responses has it: top level, or in the vendor member.
  const extras: Record<string, unknown> = {};
  for (const f of SAMPLING_FIELD_NAMES) {
    const spec: RequestField = SAMPLING_FIELDS[f];
    const value = (chat as Record<string, unknown>)[spec.chat];
    if (present(value)) (spec.vendor ? extras : body)[spec.wire] = value;
  }
  if (chat[VENDOR_MEMBER]?.priority !== undefined) extras.priority = chat[VENDOR_MEMBER].priority;
  if (Object.keys(extras).length) body[VENDOR_MEMBER] = extras;
  const format = chat.response_format;
  if (format) {
    body.text = {
      format:
        format.type === 'json_schema'
          ? { type: 'json_schema', ...Object.fromEntries(Object.entries(format.json_schema).filter(([, v]) => present(v))) }
          : { type: format.type },
    };
  }
  if (chat.tools) {
    body.tools = chat.tools.map((t) => ({
      type: 'function',
      name: t.function.name,
      ...(present(t.function.description) ? { description: t.function.description } : {}),
      ...(present(t.function.parameters) ? { parameters: t.function.parameters } : {}),
      ...(present(t.function.strict) ? { strict: t.function.strict } : {}),
    }));
  }
  if (chat.tool_choice !== undefined) {
    body.tool_choice = typeof chat.tool_choice === 'string' ? chat.tool_choice : { type: 'function', name: chat.tool_choice.function.name };
  }
  if (present(chat.reasoning_effort)) body.reasoning = { effort: chat.reasoning_effort };
  if (present(chat.prompt_cache_key)) body.prompt_cache_key = chat.prompt_cache_key;
  return { body, names: { items, maxTokens } };
}

type Content = ChatCompletionBody['messages'][number]['content'] & {};

/** Message content as a Responses message item has it: a string stays one; text parts become `partType` parts. */
function messageContent(c: Content, partType: 'input_text' | 'output_text', at: string): string | Array<{ type: string; text: string }> {
  if (typeof c === 'string') return c;
  return c.map((p, j) => {
    if (p.type !== 'text') throw unsupportedField(`${at}.content.${j}.type`, `Content parts of type "${p.type}" are not supported by this server.`);
    return { type: partType, text: (p as { text: string }).text };
  });
}

function partsText(c: Content, at: string): string {
  const parts = messageContent(c, 'input_text', at);
  return typeof parts === 'string' ? parts : parts.map((p) => p.text).join('');
}

/** Prefix renames of Responses params into the chat fields they came from (longest first where they nest). */
function renames(names: ChatNames): Array<[string, string]> {
  return [
    ['max_output_tokens', names.maxTokens],
    ['text.format.name', 'response_format.json_schema.name'],
    ['text.format.schema', 'response_format.json_schema.schema'],
    ['text.format.strict', 'response_format.json_schema.strict'],
    ['text.format.description', 'response_format.json_schema.description'],
    ['text.format', 'response_format'],
    ['text', 'response_format'],
    ['include', 'logprobs'],
    ['reasoning.effort', 'reasoning_effort'],
    ['reasoning', 'reasoning_effort'],
    ['tool_choice.name', 'tool_choice.function.name'],
    [VENDOR_MEMBER, ''],
  ];
}

/** The chat field a Responses param names (null stays null). */
export function chatParam(param: string | null | undefined, names: ChatNames): string | null {
  if (param === null || param === undefined) return null;
  const item = /^input\.(\d+)(\..*)?$/.exec(param);
  if (item) {
    const at = names.items[Number(item[1])];
    if (at === undefined) return 'messages';
    // A message item's own paths (role, content.N) are the chat message's; a tool call's fields are renamed, so point at the call.
    return at.includes('.tool_calls.') || !item[2] || /^\.(type|call_id|output|arguments|name)\b/.test(item[2]) ? at : at + item[2];
  }
  if (param === 'input') return 'messages';
  const tool = /^tools\.(\d+)\.(name|description|parameters|strict)(\..*)?$/.exec(param);
  if (tool) return `tools.${tool[1]}.function.${tool[2]}${tool[3] ?? ''}`;
  for (const [from, to] of renames(names)) {
    if (param === from || param.startsWith(`${from}.`)) {
      const rest = param.slice(from.length);
      return to === '' ? rest.replace(/^\./, '') || null : to + rest;
    }
  }
  return param;
}

/** A refusal of the translated body, told in the chat body's fields (param, and the field names in the detail). */
export function inChatTerms(e: unknown, names: ChatNames): unknown {
  if (!(e instanceof HttpProblem)) return e;
  const from = e.extra.param;
  const to = chatParam(from, names);
  if (!from || to === from) return e;
  let detail = e.detail.split(`"${from}"`).join(`"${to}"`).split(`'${from}'`).join(`'${to}'`);
  if (from === 'text.format' && /json/.test(detail)) detail = detail.replace('The input or instructions', "'messages'");
  return new HttpProblem(e.status, e.code, detail, { ...e.extra, param: to });
}
