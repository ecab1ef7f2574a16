// Validation of everything a client sends to the LMSP door (bodies, headers, query parameters).
// What is checked here is what needs no backend: shapes, ranges, sizes, and the rules OpenAI applies at the door
// (json_object needs the word "json"; only the include values we can honour). Whether a backend can enforce a schema's
// keywords or fit the prompt is its own check (ModelBackend.checkRequest), answered as a 400 by the runtime too.
// The sampling ranges of the `task_runtime` member follow llama.cpp's server (docs/lmsp.md, "Sampling").
import { z } from 'zod';
import { INCLUDE_OUTPUT_LOGPROBS, RESTART_POLICIES, type ResponseRequest } from '../../runtime/task';
import { HttpProblem } from '../http/problem';
import { jsonSchemaArg } from '../jsonSchemaArg';
import { DEFAULTS, EDITOR_ORIGIN, LMSP_TASK_STATUSES, TASK_TYPE_RESPONSE, VENDOR_MEMBER, type LmspTaskStatus } from './lmspConstants';

const text = z.string().max(1_000_000);

const inputTextPart = z.strictObject({ type: z.literal('input_text'), text });
const outputTextPart = z.strictObject({
  type: z.literal('output_text'),
  text,
  annotations: z.array(z.unknown()).max(0).optional(),
});

const messageItem = z.strictObject({
  type: z.literal('message').optional(),
  id: z.string().max(256).optional(),
  status: z.enum(['in_progress', 'completed', 'incomplete']).optional(),
  role: z.enum(['user', 'assistant', 'system', 'developer']),
  content: z.union([text, z.array(z.union([inputTextPart, outputTextPart])).min(1).max(DEFAULTS.maxInputItems)]),
});

const metadata = z
  .record(z.string().min(1).max(64), z.string().max(512))
  .refine((m) => Object.keys(m).length <= 16, { message: 'at most 16 metadata keys' });

/** `text.format` (OPENAI-WIRE §2.1): free text, any JSON object, or a document valid against a named schema. */
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

/** Up to 4 stop sequences (OpenAI's chat limit), each 1–256 characters. */
const stopSequence = z.string().min(1).max(256);

/**
 * Sampling the Responses API has no field for, named as llama.cpp's server and OpenAI's chat completions name them.
 * Ranges: seed any safe integer; top_k 0 (off)–1000; min_p 0 (off)–1; repeat_penalty in (0, 2] with 1 = off (llama.cpp
 * divides positive logits by it, so 0 is refused); frequency/presence penalties −2..2 as OpenAI's.
 */
export const samplingExtrasSchema = z.strictObject({
  seed: z.number().int().min(Number.MIN_SAFE_INTEGER).max(Number.MAX_SAFE_INTEGER).optional(),
  stop: z.union([stopSequence, z.array(stopSequence).min(1).max(4)]).optional(),
  top_k: z.number().int().min(0).max(1000).optional(),
  min_p: z.number().min(0).max(1).optional(),
  repeat_penalty: z.number().gt(0).max(2).optional(),
  frequency_penalty: z.number().min(-2).max(2).optional(),
  presence_penalty: z.number().min(-2).max(2).optional(),
});

/** Body of POST /lmsp/v1/responses (profile §6.1, the subset this runtime serves). */
export const responseCreateSchema = z.strictObject({
  model: z.string().min(1).max(256),
  input: z.union([text, z.array(messageItem).min(1).max(DEFAULTS.maxInputItems)]),
  instructions: text.nullable().optional(),
  stream: z.boolean().optional(),
  max_output_tokens: z.number().int().min(1).max(1_048_576).nullable().optional(),
  temperature: z.number().min(0).max(2).nullable().optional(),
  top_p: z.number().min(0).max(1).nullable().optional(),
  metadata: metadata.nullable().optional(),
  store: z.boolean().optional(),
  truncation: z.enum(['auto', 'disabled']).nullable().optional(),
  tools: z.array(z.unknown()).max(0, { message: 'tools are not supported' }).optional(),
  tool_choice: z.enum(['none', 'auto']).optional(),
  parallel_tool_calls: z.boolean().optional(),
  text: z.strictObject({ format: textFormat.optional() }).nullable().optional(),
  top_logprobs: z.number().int().min(0).max(20).nullable().optional(),
  include: z.array(z.string().max(256)).max(16).nullable().optional(),
  [VENDOR_MEMBER]: samplingExtrasSchema.optional(),
  user: z.string().max(256).optional(),
});
export type ResponseCreateBody = z.infer<typeof responseCreateSchema>;

/** Body of POST /lmsp/v1/tasks (ch.7 §7.1), plus the vendor member (only the editor's token may send it). */
export const taskCreateSchema = z.strictObject({
  type: z.literal(TASK_TYPE_RESPONSE),
  input: responseCreateSchema,
  on_restart: z.enum(RESTART_POLICIES).optional(),
  [VENDOR_MEMBER]: z.strictObject({ origin: z.literal(EDITOR_ORIGIN) }).optional(),
});
export type TaskCreateBody = z.infer<typeof taskCreateSchema>;

/** Fields the Responses API has that this runtime cannot honour: refused rather than silently ignored. */
const UNSUPPORTED_FIELDS: Record<string, (v: unknown) => boolean> = {
  previous_response_id: (v) => v !== undefined && v !== null,
  background: (v) => v === true,
  tools: (v) => Array.isArray(v) && v.length > 0,
  reasoning: (v) => v !== undefined && v !== null,
};

/** Refuses Responses features this runtime cannot honour; `at` is the param prefix ("" or "input."). */
export function rejectUnsupported(request: unknown, at = ''): void {
  if (!isRecord(request)) return;
  for (const [field, unsupported] of Object.entries(UNSUPPORTED_FIELDS)) {
    if (unsupported(request[field])) {
      throw new HttpProblem(400, 'unsupported_capability', `The field "${field}" is not supported by this server.`, {
        param: at + field,
      });
    }
  }
}

/**
 * The door's rules on a shape-valid request that OpenAI also applies before generating (`at`: "" or "input."):
 * only the include values this runtime can honour; json_object needs the word "json" in the prompt (OPENAI-WIRE §2.2),
 * else a model may emit whitespace until the token limit.
 */
export function checkRequestRules(body: ResponseCreateBody, at = ''): void {
  for (const [i, value] of (body.include ?? []).entries()) {
    if (value !== INCLUDE_OUTPUT_LOGPROBS) {
      throw new HttpProblem(400, 'unsupported_capability', `The include value "${value}" is not supported by this server (only "${INCLUDE_OUTPUT_LOGPROBS}").`, {
        param: `${at}include.${i}`,
      });
    }
  }
  if (body.text?.format?.type === 'json_object' && !/json/i.test(promptText(body))) {
    throw new HttpProblem(400, 'invalid_request', "The input or instructions must contain the word 'json' in some form to use 'text.format' of type 'json_object'.", {
      param: `${at}text.format`,
    });
  }
}

function promptText(body: ResponseCreateBody): string {
  const parts = [body.instructions ?? ''];
  if (typeof body.input === 'string') parts.push(body.input);
  else for (const item of body.input) parts.push(typeof item.content === 'string' ? item.content : item.content.map((c) => c.text).join('\n'));
  return parts.join('\n');
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
  const detail = issue.code === 'unrecognized_keys' ? `Unknown field "${param}".` : `Invalid value${param ? ` for "${param}"` : ''}: ${issue.message}.`;
  throw new HttpProblem(400, 'invalid_request', detail, { param });
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Idempotency-Key: an sf-string or a bare token of 1–255 visible ASCII characters (profile §9.2). */
export function parseIdempotencyKey(header: string | string[] | undefined): string | undefined {
  if (header === undefined) return undefined;
  const invalid = () => new HttpProblem(400, 'invalid_idempotency_key', 'Idempotency-Key must be 1-255 visible ASCII characters or a quoted string.', { param: 'Idempotency-Key' });
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
  const raw = header !== undefined ? header : query ?? undefined;
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
  return out as ResponseRequest;
}
