// Validation of everything a client sends to the LMSP door (bodies, headers, query parameters).
// What is checked here is what needs no backend: shapes, ranges, sizes, and the rules OpenAI applies at the door
// (json_object needs the word "json"; only the include values we can honour). Whether a backend can enforce a schema's
// keywords or fit the prompt is its own check (ModelBackend.checkRequest), answered as a 400 by the runtime too.
// The sampling ranges of the `task_runtime` member follow llama.cpp's server (docs/lmsp.md, "Sampling").
import { z } from 'zod';
import { flatToolName, isModelTool, MODEL_TOOL_TYPES } from '../../runtime/responseTools';
import { inputText } from '../../runtime/responses';
import { PRIORITY } from '../../runtime/queue';
import { BY_KIND_FIELDS, SAMPLING_FIELDS, type ByKindField } from '../../runtime/requestFields';
import { numericSamplingZod, samplingZod } from '../shared/sampling';
import {
  INCLUDE_OUTPUT_LOGPROBS,
  INCLUDE_REASONING_ENCRYPTED,
  RESTART_POLICIES,
  type ResponseNamespaceTool,
  type ResponseRequest,
  type ResponseSamplingExtras,
  type ResponseTool,
} from '../../runtime/task';
import { HttpProblem } from '../http/problem';
import { jsonSchemaArg } from '../jsonSchemaArg';
import { DEFAULTS, EDITOR_ORIGIN, LMSP_TASK_STATUSES, TASK_TYPE_RESPONSE, VENDOR_MEMBER, type LmspTaskStatus } from './lmspConstants';
import { isObject } from '../../runtime/jsonValues';

const text = z.string().max(1_000_000);

const inputTextPart = z.strictObject({ type: z.literal('input_text'), text });
const outputTextPart = z.strictObject({
  type: z.literal('output_text'),
  text,
  annotations: z.array(z.unknown()).max(0).optional(),
  // A response's output given back as input carries them (the openai SDK passes `response.output` as it is).
  logprobs: z.array(z.unknown()).max(100_000).optional(),
});

const messageItem = z.strictObject({
  type: z.literal('message').optional(),
  id: z.string().max(256).optional(),
  status: z.enum(['in_progress', 'completed', 'incomplete']).optional(),
  role: z.enum(['user', 'assistant', 'system', 'developer']),
  content: z.union([
    text,
    z
      .array(z.union([inputTextPart, outputTextPart]))
      .min(1)
      .max(DEFAULTS.maxInputItems),
  ]),
});

/** Longest description of a tool or namespace (the Messages door cuts longer ones to it rather than refuse). */
export const MAX_TOOL_DESCRIPTION_CHARS = 10_000;

/** A function's name, as OpenAI allows it. */
const toolName = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, { message: 'a function name must be 1-64 letters, digits, "_" or "-"' });
const itemStatus = z.enum(['in_progress', 'completed', 'incomplete']).optional();
const callId = z.string().min(1).max(256);

/** A function call the model made in an earlier turn (a `function_call` output item given back). */
const functionCallItem = z.strictObject({
  type: z.literal('function_call'),
  id: z.string().max(256).optional(),
  status: itemStatus,
  call_id: callId,
  name: toolName,
  /** The namespace tool the function belongs to (the model saw `<namespace>__<name>`). */
  namespace: toolName.optional(),
  arguments: text,
});

/** A freeform (custom) tool call of an earlier turn: its raw input. */
const customToolCallItem = z.strictObject({
  type: z.literal('custom_tool_call'),
  id: z.string().max(256).optional(),
  status: itemStatus,
  call_id: callId,
  name: toolName,
  namespace: toolName.optional(),
  input: text,
});

/** The result of a call, for the next turn. */
const functionCallOutputItem = z.strictObject({
  type: z.literal('function_call_output'),
  id: z.string().max(256).nullable().optional(),
  status: itemStatus.nullable(),
  call_id: callId,
  output: z.union([text, z.array(inputTextPart).min(1).max(DEFAULTS.maxInputItems)]),
});

/** The result of a custom tool call, for the next turn. */
const customToolCallOutputItem = functionCallOutputItem.extend({ type: z.literal('custom_tool_call_output') });

/**
 * A reasoning item of an earlier turn. Its text reaches the model only from an `encrypted_content` this server sealed
 * (the door opens it before the task is made; anything else is dropped); `summary` and `content` may be empty or absent.
 */
const reasoningItem = z.strictObject({
  type: z.literal('reasoning'),
  id: z.string().max(256).optional(),
  status: itemStatus,
  summary: z
    .array(z.strictObject({ type: z.literal('summary_text'), text }))
    .max(DEFAULTS.maxInputItems)
    .nullable()
    .optional(),
  content: z
    .array(z.strictObject({ type: z.literal('reasoning_text'), text }))
    .max(DEFAULTS.maxInputItems)
    .nullable()
    .optional(),
  encrypted_content: z.string().max(1_000_000).nullable().optional(),
});

const inputItem = z.union([messageItem, functionCallItem, functionCallOutputItem, customToolCallItem, customToolCallOutputItem, reasoningItem]);

/** A function tool (docs/lmsp.md): the Responses API's flat shape. `defer_loading` is accepted; every tool is offered. */
const functionTool = z.strictObject({
  type: z.literal('function'),
  name: toolName,
  description: z.string().max(MAX_TOOL_DESCRIPTION_CHARS).nullable().optional(),
  parameters: jsonSchemaArg.nullable().optional(),
  strict: z.boolean().nullable().optional(),
  defer_loading: z.boolean().optional(),
});

/** A freeform tool: the model writes raw text. A grammar is accepted and told to the model, not enforced (docs/lmsp.md). */
const customTool = z.strictObject({
  type: z.literal('custom'),
  name: toolName,
  description: z.string().max(MAX_TOOL_DESCRIPTION_CHARS).optional(),
  format: z
    .discriminatedUnion('type', [
      z.strictObject({ type: z.literal('text') }),
      z.strictObject({ type: z.literal('grammar'), syntax: z.enum(['lark', 'regex']), definition: z.string().max(100_000) }),
    ])
    .optional(),
  defer_loading: z.boolean().optional(),
});

/** Tools under one name (Codex's multi-agent tools): the model sees `<namespace>__<name>`. */
const namespaceTool = z.strictObject({
  type: z.literal('namespace'),
  name: toolName,
  description: z.string().max(MAX_TOOL_DESCRIPTION_CHARS).optional(),
  tools: z
    .array(z.union([functionTool, customTool]))
    .min(1)
    .max(128),
});

/** A tool type the model is not offered (OpenAI's hosted tools): accepted as sent and reported as ignored. */
const hostedTool = z.looseObject({
  type: z
    .string()
    .min(1)
    .max(64)
    .refine((t) => !MODEL_TOOL_TYPES.has(t)),
});

/** Most tools one request may offer (OpenAI allows 128 functions). */
export const MAX_TOOLS = 128;

const toolChoice = z.union([
  z.enum(['none', 'auto', 'required']),
  // A namespace's member by `namespace` + its name, or by the flattened name the model sees.
  z.strictObject({ type: z.enum(['function', 'custom']), name: z.string().min(1).max(200), namespace: toolName.optional() }),
  // A hosted tool's type (refused in checkTools: the model cannot call it).
  z.looseObject({ type: z.string().min(1).max(64) }),
]);

const reasoning = z.strictObject({
  effort: z.enum(['none', 'minimal', 'low', 'medium', 'high', 'xhigh']).nullable().optional(),
  summary: z.enum(['auto', 'concise', 'detailed']).nullable().optional(),
  /** Deprecated alias of `summary` (the SDK still has it). */
  generate_summary: z.enum(['auto', 'concise', 'detailed']).nullable().optional(),
});

const metadata = z
  .record(z.string().min(1).max(64), z.string().max(512))
  .refine((m) => Object.keys(m).length <= 16, { message: 'at most 16 metadata keys' });

/** `text.format` (docs/lmsp.md): free text, any JSON object, or a document valid against a named schema. */
const textFormat = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('text') }),
  z.strictObject({ type: z.literal('json_object') }),
  z.strictObject({
    type: z.literal('json_schema'),
    name: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, { message: 'name must be 1-64 letters, digits, "_" or "-"' }),
    schema: jsonSchemaArg,
    strict: z.boolean().nullable().optional(),
    description: z.string().max(10_000).optional(),
  }),
]);

/** A task's priority among its principal's queued tasks: higher runs first (runtime/queue.ts). */
export const prioritySchema = z.number().int().min(PRIORITY.min).max(PRIORITY.max);

/**
 * Sampling the Responses API has no field for, named as llama.cpp's server and OpenAI's chat completions name them.
 * Ranges: seed any safe integer; top_k 0 (off)–1000; min_p 0 (off)–1; repeat_penalty in (0, 2] with 1 = off (llama.cpp
 * divides positive logits by it, so 0 is refused); frequency/presence penalties −2..2 as OpenAI's.
 */
export const samplingExtrasSchema = z.strictObject({
  ...(Object.fromEntries(
    BY_KIND_FIELDS.filter((f) => SAMPLING_FIELDS[f].vendor).map((f) => [SAMPLING_FIELDS[f].wire, samplingZod(f).optional()]),
  ) as {
    [K in ByKindField as (typeof SAMPLING_FIELDS)[K]['wire']]: z.ZodOptional<
      z.ZodType<Exclude<ResponseSamplingExtras[(typeof SAMPLING_FIELDS)[K]['wire']], undefined>>
    >;
  }),
  // Not sampling: max_output_tokens as an "up to" budget, capped to the room instead of refused (task.ts).
  cap_max_output_tokens: z.boolean().optional(),
  // Not sampling: the task's priority among the caller's own queued tasks (runtime/queue.ts).
  priority: prioritySchema.optional(),
});

/** Body of POST /lmsp/v1/responses (profile §6.1, the subset this runtime serves). */
export const responseCreateSchema = z.strictObject({
  model: z.string().min(1).max(256),
  input: z.union([text, z.array(inputItem).min(1).max(DEFAULTS.maxInputItems)]),
  instructions: text.nullable().optional(),
  stream: z.boolean().optional(),
  max_output_tokens: z.number().int().min(1).max(1_048_576).nullable().optional(),
  temperature: numericSamplingZod('temperature').nullable().optional(),
  top_p: numericSamplingZod('topP').nullable().optional(),
  metadata: metadata.nullable().optional(),
  store: z.boolean().optional(),
  background: z.boolean().nullable().optional(),
  previous_response_id: z.string().min(1).max(256).nullable().optional(),
  truncation: z.enum(['auto', 'disabled']).nullable().optional(),
  tools: z
    .array(z.union([functionTool, customTool, namespaceTool, hostedTool]))
    .max(MAX_TOOLS)
    .nullable()
    .optional(),
  tool_choice: toolChoice.nullable().optional(),
  parallel_tool_calls: z.boolean().nullable().optional(),
  reasoning: reasoning.nullable().optional(),
  text: z
    .strictObject({ format: textFormat.optional(), verbosity: z.enum(['low', 'medium', 'high']).nullable().optional() })
    .nullable()
    .optional(),
  top_logprobs: z.number().int().min(0).max(20).nullable().optional(),
  include: z.array(z.string().max(256)).max(16).nullable().optional(),
  [VENDOR_MEMBER]: samplingExtrasSchema.optional(),
  user: z.string().max(256).optional(),
  // Accepted and kept on the task (its meta), never given to the model: Codex CLI sends them (docs/codex.md).
  client_metadata: z
    .record(z.string().min(1).max(256), z.string().max(16_384))
    .refine((m) => Object.keys(m).length <= 64, { message: 'at most 64 keys' })
    .nullable()
    .optional(),
  prompt_cache_key: z.string().max(256).nullable().optional(),
  safety_identifier: z.string().max(256).nullable().optional(),
  // Accepted; a local server has one tier, and every tool call is the model's to make.
  service_tier: z.enum(['auto', 'default', 'flex', 'scale', 'priority']).nullable().optional(),
  stream_options: z.strictObject({ include_obfuscation: z.boolean().optional() }).nullable().optional(),
  max_tool_calls: z.number().int().min(1).max(1024).nullable().optional(),
  prompt_cache_retention: z.enum(['in-memory', '24h']).nullable().optional(),
});
export type ResponseCreateBody = z.infer<typeof responseCreateSchema>;

/** Body of POST /lmsp/v1/tasks (ch.7 §7.1), plus the vendor member (only the editor's token may send it). */
export const taskCreateSchema = z.strictObject({
  type: z.literal(TASK_TYPE_RESPONSE),
  input: responseCreateSchema,
  on_restart: z.enum(RESTART_POLICIES).optional(),
  priority: prioritySchema.optional(),
  [VENDOR_MEMBER]: z.strictObject({ origin: z.literal(EDITOR_ORIGIN) }).optional(),
});
export type TaskCreateBody = z.infer<typeof taskCreateSchema>;

/** Body of POST /task_runtime/cancel: which of the caller's tasks (default: the queued ones), of which model. */
export const cancelFilterSchema = z.strictObject({
  status: z
    .array(z.enum(['queued', 'running']))
    .min(1)
    .max(2)
    .optional(),
  model: z.string().min(1).max(256).optional(),
});

/**
 * Refuses Responses features this runtime cannot honour, before the shape check; `at` is the param prefix ("" or
 * "input."). Hosted tools (web_search, file_search, mcp, …) are not refused: they are left out of what the model
 * sees and named in the response's `task_runtime.ignored_tools` (clients such as Codex CLI always send some).
 */
export function rejectUnsupported(request: unknown, at = ''): void {
  if (!isObject(request)) return;
  const choice = request.tool_choice;
  // A choice that names a hosted tool asks for a call the model cannot make.
  if (isObject(choice) && typeof choice.type === 'string' && !['function', 'custom', 'allowed_tools'].includes(choice.type)) {
    throw new HttpProblem(
      400,
      'unsupported_capability',
      `tool_choice names the hosted tool type "${choice.type.slice(0, 64)}", which this server cannot run; only function, custom and namespace tools are offered to the model.`,
      {
        param: `${at}tool_choice.type`,
      },
    );
  }
}

/**
 * The door's rules on a shape-valid request that OpenAI also applies before generating (`at`: "" or "input."):
 * only the include values this runtime can honour; json_object needs the word "json" in the prompt (docs/lmsp.md),
 * else a model may emit whitespace until the token limit.
 */
export function checkRequestRules(body: ResponseCreateBody, at = ''): void {
  for (const [i, value] of (body.include ?? []).entries()) {
    if (value !== INCLUDE_OUTPUT_LOGPROBS && value !== INCLUDE_REASONING_ENCRYPTED) {
      throw new HttpProblem(
        400,
        'unsupported_capability',
        `The include value "${value}" is not supported by this server (only "${INCLUDE_OUTPUT_LOGPROBS}" and "${INCLUDE_REASONING_ENCRYPTED}").`,
        {
          param: `${at}include.${i}`,
        },
      );
    }
  }
  checkTools(body, at);
  if (
    body.text?.format?.type === 'json_object' &&
    !/json/i.test(`${body.instructions ?? ''}\n${inputText(body as Pick<ResponseRequest, 'input'>, { calls: true })}`)
  ) {
    throw new HttpProblem(
      400,
      'invalid_request',
      "The input or instructions must contain the word 'json' in some form to use 'text.format' of type 'json_object'.",
      {
        param: `${at}text.format`,
      },
    );
  }
}

/**
 * Tools as OpenAI checks them: the names the model sees unique (a namespace's members as `<namespace>__<name>`, so
 * a member may not collide with a top-level tool of that name); a named or `required` choice needs the tools it
 * names (of its type: a custom tool is chosen as `custom`); every `function_call_output` answers a `function_call`
 * before it, every `custom_tool_call_output` a `custom_tool_call` (unless the calls are in the previous response).
 */
function checkTools(body: ResponseCreateBody, at: string): void {
  const tools = (body.tools ?? []) as ResponseTool[];
  const kinds = new Map<string, string>();
  for (const [i, t] of tools.entries()) {
    if (!isModelTool(t)) continue;
    const members =
      t.type === 'namespace'
        ? (t as ResponseNamespaceTool).tools.map((m, j) => ({ m, param: `${at}tools.${i}.tools.${j}.name`, ns: t.name }))
        : [{ m: t, param: `${at}tools.${i}.name`, ns: undefined }];
    for (const { m, param, ns } of members) {
      const flat = flatToolName(m.name, ns);
      if (kinds.has(flat)) {
        const what = ns ? `The function "${m.name}" of namespace "${ns}" is offered to the model as "${flat}", which` : `The function name "${flat}"`;
        throw new HttpProblem(400, 'invalid_request', `Duplicate function name: ${what} is already in tools.`, { param });
      }
      kinds.set(flat, m.type);
    }
  }
  const choice = body.tool_choice;
  if (choice === 'required' && kinds.size === 0) {
    throw new HttpProblem(400, 'invalid_request', 'tool_choice "required" needs at least one function, custom or namespace tool in "tools".', {
      param: `${at}tool_choice`,
    });
  }
  if (typeof choice === 'object' && choice !== null) {
    const c = choice as { type: string; name?: string; namespace?: string };
    if (c.type === 'allowed_tools')
      throw new HttpProblem(400, 'unsupported_capability', 'tool_choice "allowed_tools" is not supported by this server.', {
        param: `${at}tool_choice.type`,
      });
    const flat = flatToolName(String(c.name), c.namespace);
    if (kinds.get(flat) !== c.type) {
      const named = c.namespace ? `"${c.name}" of namespace "${c.namespace}"` : `"${c.name}"`;
      throw new HttpProblem(
        400,
        'invalid_request',
        `tool_choice names the ${c.type} tool ${named}, which is not in "tools"${kinds.has(flat) ? ` as a ${c.type} tool` : ''}.`,
        {
          param: `${at}tool_choice.name`,
        },
      );
    }
  }
  if (typeof body.input === 'string' || (isObject(body) && typeof (body as Record<string, unknown>).previous_response_id === 'string')) return;
  const calls = new Set<string>();
  for (const [i, item] of body.input.entries()) {
    if (item.type === 'function_call' || item.type === 'custom_tool_call') calls.add(`${item.type}:${item.call_id}`);
    else if (item.type === 'function_call_output' || item.type === 'custom_tool_call_output') {
      const call = item.type === 'function_call_output' ? 'function_call' : 'custom_tool_call';
      if (calls.has(`${call}:${item.call_id}`)) continue;
      const kind = call === 'function_call' ? 'function call' : 'custom tool call';
      throw new HttpProblem(400, 'invalid_request', `No ${kind} found for the ${item.type} with call_id "${item.call_id.slice(0, 64)}".`, {
        param: `${at}input.${i}.call_id`,
      });
    }
  }
}

export function parseBody<T>(schema: z.ZodType<T>, body: unknown): T {
  const parsed = schema.safeParse(body);
  if (parsed.success) return parsed.data;
  let issue = parsed.error.issues[0];
  let path: PropertyKey[] = [...(issue.path ?? [])];
  // For a union, point at the deepest problem among its branches (`input.0.role`, not just `input`); at equal depth,
  // the branch whose type matched (`at most 4 items`, not `expected string`).
  const typeMismatch = (i: z.core.$ZodIssue) => (i.code === 'invalid_type' ? 1 : 0);
  while (issue.code === 'invalid_union' && issue.errors.length) {
    const branch = issue.errors.flat().sort((a, b) => b.path.length - a.path.length || typeMismatch(a) - typeMismatch(b))[0];
    if (!branch) break;
    path = [...path, ...branch.path];
    issue = branch;
  }
  if (issue.code === 'unrecognized_keys') path.push(...issue.keys.slice(0, 1));
  const param = path.length ? path.map(String).join('.') : null;
  const detail =
    issue.code === 'unrecognized_keys' ? `Unknown field "${param}".` : `Invalid value${param ? ` for "${param}"` : ''}: ${issue.message}.`;
  throw new HttpProblem(400, 'invalid_request', detail, { param });
}

/** An object's members that are not null (OpenAI's nullable members mean "not given"). */
function withoutNulls<T extends object>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== null && v !== undefined)) as T;
}

/** Idempotency-Key: an sf-string or a bare token of 1–255 visible ASCII characters (profile §9.2). */
export function parseIdempotencyKey(header: string | string[] | undefined): string | undefined {
  if (header === undefined) return undefined;
  const invalid = () =>
    new HttpProblem(400, 'invalid_idempotency_key', 'Idempotency-Key must be 1-255 visible ASCII characters or a quoted string.', {
      param: 'Idempotency-Key',
    });
  if (Array.isArray(header)) throw invalid();
  const quoted = /^"((?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\["\\])*)"$/.exec(header);
  // A leading quote promises an sf-string; a bare token is any other run of visible ASCII.
  const bare = !header.startsWith('"') && /^[\x21-\x7e]+$/.test(header);
  const key = quoted ? quoted[1].replace(/\\(["\\])/g, '$1') : bare ? header : undefined;
  if (key === undefined || key.length < 1 || key.length > 255) throw invalid();
  return key;
}

/** Last-Event-ID header (wins) or ?after=: a non-negative integer event id. */
export function parseLastEventId(header: string | string[] | undefined, query: string | null): number | undefined {
  const raw = header !== undefined ? header : (query ?? undefined);
  if (raw === undefined) return undefined;
  const value = Array.isArray(raw) ? undefined : raw.trim();
  if (value === undefined || !/^(0|[1-9][0-9]{0,14})$/.test(value)) {
    throw new HttpProblem(400, 'invalid_last_event_id', 'Last-Event-ID must be a non-negative integer event id.', {
      param: header !== undefined ? 'Last-Event-ID' : 'after',
    });
  }
  return Number(value);
}

const listQuerySchema = z.strictObject({
  status: z.array(z.enum(LMSP_TASK_STATUSES)).optional(),
  limit: z.coerce.number().int().min(1).max(DEFAULTS.maxListLimit).optional(),
  cursor: z.string().min(1).max(512).optional(),
});

export interface ListQuery {
  status?: LmspTaskStatus[];
  limit?: number;
  cursor?: string;
}

export function parseListQuery(params: URLSearchParams): ListQuery {
  const raw: Record<string, unknown> = {};
  for (const key of new Set(params.keys())) {
    const values = params.getAll(key);
    if (key === 'status') raw.status = values.flatMap((v) => v.split(',')).filter((v) => v !== '');
    else if (values.length > 1) throw new HttpProblem(400, 'invalid_request', `Query parameter "${key}" given more than once.`, { param: key });
    else raw[key] = values[0];
  }
  return parseBody(listQuerySchema, raw);
}

/**
 * Deepest nesting a request body may have: far beyond any valid body (a json_schema is bounded at 64 levels), far
 * below what recursion over it could not take (the fingerprint is computed before the body is validated).
 */
export const MAX_BODY_DEPTH = 256;

/** Canonical JSON (sorted keys) for the idempotency fingerprint; a body nested deeper than MAX_BODY_DEPTH is a 400. */
export function canonicalJson(value: unknown, depth = 0): string {
  if (depth > MAX_BODY_DEPTH) {
    throw new HttpProblem(400, 'invalid_request', `The request body nests deeper than ${MAX_BODY_DEPTH} levels.`, { param: null });
  }
  if (Array.isArray(value)) return `[${value.map((v) => canonicalJson(v, depth + 1)).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.keys(value as object)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k], depth + 1)}`);
    return `{${entries.join(',')}}`;
  }
  return JSON.stringify(value);
}

/**
 * The one validation path of a /responses body (also what /chat/completions translates its body into): refused
 * features, shape and ranges, the door's rules; the request as the runtime takes it, and whether to stream.
 */
export function validateResponseBody(body: unknown): { stream: boolean; input: ResponseRequest } {
  rejectUnsupported(body);
  const parsed = parseBody(responseCreateSchema, body);
  checkRequestRules(parsed);
  return { stream: parsed.stream === true, input: toRuntimeRequest(parsed) };
}

/** The validated request as the runtime takes it: no `stream` (the door handles it), no null members. */
export function toRuntimeRequest(body: ResponseCreateBody): ResponseRequest {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(body)) if (k !== 'stream' && v !== null && v !== undefined) out[k] = v;
  const format = body.text?.format;
  if (format?.type === 'json_schema' && (format.strict === null || format.strict === undefined)) {
    const { strict: _unset, ...rest } = format;
    out.text = { ...body.text, format: rest };
  }
  if (body.tools) {
    out.tools = body.tools.map((t) => {
      if (t.type !== 'namespace') return withoutNulls(t);
      const ns = t as z.infer<typeof namespaceTool>;
      return { ...withoutNulls(ns), tools: ns.tools.map((m) => withoutNulls(m)) };
    });
  }
  if (body.reasoning) {
    const { generate_summary, ...r } = withoutNulls(body.reasoning);
    out.reasoning = { ...(generate_summary && !r.summary ? { summary: generate_summary } : {}), ...r };
  }
  if (body.text) out.text = withoutNulls({ ...(out.text as object) }) as ResponseCreateBody['text'];
  return out as ResponseRequest;
}
