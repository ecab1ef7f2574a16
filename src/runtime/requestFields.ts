// The request's sampling fields in one table: the name each door gives a field, its type and range, and who honours
// it. Every door's schema, the chat-completions and Messages mappings, the MCP tool arguments, the VS Code provider's
// model options, the runtime's own check at create and the backend request derive from it, so a new field is one
// row here, one field of GenerateRequest (backend.ts) and what the backends do with it (docs/architecture.md, "Where
// each kind of change goes").
import type { GenerateRequest } from './backend';
import { RuntimeError } from './errors';
import type { ResponseRequest } from './task';

export type FieldRange =
  | { kind: 'number'; min: number; max: number; /** The minimum itself is not allowed. */ minExclusive?: boolean }
  | { kind: 'integer'; min: number; max: number }
  /** A stop string (1–256 characters) or a list of 1–4 of them. */
  | { kind: 'stop' };

export interface RequestField {
  /** Its name on /responses and LMSP tasks; `vendor`: inside the `task_runtime` member (Responses has no field). */
  wire: string;
  vendor: boolean;
  /** Its name on chat completions (top level, as llama.cpp's server names its extras). */
  chat: string;
  /** Its name on Anthropic Messages; absent: only through the vendor member there too. */
  anthropic?: string;
  /** The MCP generation tools' argument; absent: not offered there. */
  mcp?: string;
  /** The VS Code provider's `modelOptions` key; absent: not taken there. */
  vscode?: string;
  range: FieldRange;
  /**
   * Remote engines: `baseline` — every OpenAI-compatible engine takes it; `by kind` — only the engine kinds whose
   * quirks (backends/remote/quirks.ts) name it, else refused at create. The local engine honours every field.
   */
  remote: 'baseline' | 'by kind';
  description: string;
}

export const SAMPLING_FIELDS = {
  temperature: {
    wire: 'temperature',
    vendor: false,
    chat: 'temperature',
    anthropic: 'temperature',
    mcp: 'temperature',
    vscode: 'temperature',
    range: { kind: 'number', min: 0, max: 2 },
    remote: 'baseline',
    description: 'Sampling temperature, 0..2 (0: greedy).',
  },
  topP: {
    wire: 'top_p',
    vendor: false,
    chat: 'top_p',
    anthropic: 'top_p',
    vscode: 'top_p',
    range: { kind: 'number', min: 0, max: 1 },
    remote: 'baseline',
    description: 'Nucleus sampling: the smallest set of tokens whose probabilities add up to this.',
  },
  seed: {
    wire: 'seed',
    vendor: true,
    chat: 'seed',
    vscode: 'seed',
    range: { kind: 'integer', min: Number.MIN_SAFE_INTEGER, max: Number.MAX_SAFE_INTEGER },
    remote: 'by kind',
    description: 'The same seed, request and model give the same text.',
  },
  stop: {
    wire: 'stop',
    vendor: true,
    chat: 'stop',
    anthropic: 'stop_sequences',
    range: { kind: 'stop' },
    remote: 'by kind',
    description: 'Up to 4 strings that end the output (not included in it).',
  },
  topK: {
    wire: 'top_k',
    vendor: true,
    chat: 'top_k',
    anthropic: 'top_k',
    vscode: 'top_k',
    range: { kind: 'integer', min: 0, max: 1000 },
    remote: 'by kind',
    description: 'Sample among the K most likely tokens only (0: all).',
  },
  minP: {
    wire: 'min_p',
    vendor: true,
    chat: 'min_p',
    range: { kind: 'number', min: 0, max: 1 },
    remote: 'by kind',
    description: "Drop tokens less likely than this share of the top token's probability.",
  },
  repeatPenalty: {
    wire: 'repeat_penalty',
    vendor: true,
    chat: 'repeat_penalty',
    range: { kind: 'number', min: 0, max: 2, minExclusive: true },
    remote: 'by kind',
    description: 'Penalty on repeating recent tokens (1: off).',
  },
  frequencyPenalty: {
    wire: 'frequency_penalty',
    vendor: true,
    chat: 'frequency_penalty',
    vscode: 'frequency_penalty',
    range: { kind: 'number', min: -2, max: 2 },
    remote: 'by kind',
    description: 'Penalty by how often a token already occurred.',
  },
  presencePenalty: {
    wire: 'presence_penalty',
    vendor: true,
    chat: 'presence_penalty',
    vscode: 'presence_penalty',
    range: { kind: 'number', min: -2, max: 2 },
    remote: 'by kind',
    description: 'Penalty on tokens that already occurred.',
  },
} as const satisfies Partial<Record<keyof GenerateRequest, RequestField>>;
export type SamplingField = keyof typeof SAMPLING_FIELDS;
export const SAMPLING_FIELD_NAMES = Object.keys(SAMPLING_FIELDS) as SamplingField[];
/** The fields remote engines take only by kind (quirks.ts says which kind takes which, under what name). */
export type ByKindField = { [K in SamplingField]: (typeof SAMPLING_FIELDS)[K]['remote'] extends 'by kind' ? K : never }[SamplingField];
export const BY_KIND_FIELDS = SAMPLING_FIELD_NAMES.filter((f): f is ByKindField => SAMPLING_FIELDS[f].remote === 'by kind');
/** The fields' names on Anthropic Messages (those it has). */
export type AnthropicName = {
  [K in SamplingField]: (typeof SAMPLING_FIELDS)[K] extends { anthropic: infer N extends string } ? N : never;
}[SamplingField];
/** The sampling fields as a backend receives them. */
export type Sampling = Partial<Pick<GenerateRequest, SamplingField>>;

/** Where a field sits in a stored request: `temperature`, or `task_runtime.seed` (the `param` of a refusal). */
export function paramOf(field: SamplingField): string {
  const f: RequestField = SAMPLING_FIELDS[field];
  return f.vendor ? `task_runtime.${f.wire}` : f.wire;
}

/** What is wrong with `value` for `field`, or undefined when it is allowed. */
export function fieldProblem(field: SamplingField, value: unknown): string | undefined {
  const r: FieldRange = SAMPLING_FIELDS[field].range;
  if (r.kind === 'stop') {
    const ok = (s: unknown) => typeof s === 'string' && s.length >= 1 && s.length <= 256;
    return ok(value) || (Array.isArray(value) && value.length >= 1 && value.length <= 4 && value.every(ok))
      ? undefined
      : 'must be a string of 1 to 256 characters or a list of 1 to 4 of them';
  }
  const isInt = r.kind === 'integer';
  const exclusive = r.kind === 'number' && r.minExclusive === true;
  if (typeof value !== 'number' || !Number.isFinite(value) || (isInt && !Number.isInteger(value)))
    return `must be ${isInt ? 'an integer' : 'a number'}`;
  if (value < r.min || (exclusive && value === r.min) || value > r.max)
    return `must be ${exclusive ? 'greater than' : 'at least'} ${r.min} and at most ${r.max}`;
  return undefined;
}

/** Where the table puts `field` in a request: top level or the `task_runtime` member (undefined for null too). */
function storedValue(request: ResponseRequest, field: SamplingField): unknown {
  const f: RequestField = SAMPLING_FIELDS[field];
  const holder = (f.vendor ? (request.task_runtime ?? {}) : request) as Record<string, unknown>;
  return holder[f.wire] ?? undefined;
}

/** The sampling of a stored request, as the backend is asked for it (`stop` always a list, an empty one none). */
export function samplingOf(request: ResponseRequest): Sampling {
  const out: Record<string, unknown> = {};
  for (const field of SAMPLING_FIELD_NAMES) {
    const v = storedValue(request, field);
    if (v === undefined) continue;
    if (field !== 'stop') out[field] = v;
    else if (typeof v === 'string') out[field] = [v];
    else if ((v as string[]).length) out[field] = v;
  }
  return out as Sampling;
}

/** The sampling fields written into a request, each where the table puts it (top level or `task_runtime`). */
export function withSampling<T extends Record<string, unknown>>(request: T, sampling: Sampling): T {
  const out: Record<string, unknown> = { ...request };
  const vendor: Record<string, unknown> = { ...((request['task_runtime'] as Record<string, unknown> | undefined) ?? {}) };
  for (const field of SAMPLING_FIELD_NAMES) {
    const v = sampling[field];
    if (v === undefined) continue;
    const f: RequestField = SAMPLING_FIELDS[field];
    if (f.vendor) vendor[f.wire] = v;
    else out[f.wire] = v;
  }
  if (Object.keys(vendor).length) out['task_runtime'] = vendor;
  return out as T;
}

/**
 * The runtime's own check of a request at create, whoever calls it (a door has checked the same already; the
 * editor's local path has not): the input's shape, the output budget and every sampling field against the table.
 */
export function checkRequest(request: ResponseRequest): void {
  const refuse = (param: string, what: string) => {
    throw new RuntimeError('invalid_request', `${param} ${what}.`, param);
  };
  if (typeof request.input !== 'string' && !Array.isArray(request.input)) refuse('input', 'must be a string or a list of input items');
  const max = request.max_output_tokens;
  if (max !== undefined && max !== null && !(Number.isInteger(max) && max >= 1)) refuse('max_output_tokens', 'must be an integer of at least 1');
  const top = request.top_logprobs;
  if (top !== undefined && top !== null && !(Number.isInteger(top) && top >= 0 && top <= 20))
    refuse('top_logprobs', 'must be an integer from 0 to 20');
  for (const field of SAMPLING_FIELD_NAMES) {
    const v = storedValue(request, field);
    if (v === undefined) continue;
    const problem = fieldProblem(field, v);
    if (problem) refuse(paramOf(field), problem);
  }
}
