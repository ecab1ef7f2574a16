// What OpenAI-compatible engines actually send and take, kept as data: engine kinds (what each one can do, which
// request fields it honours and under which names), the shapes of their error bodies, how each says "the prompt is
// longer than the context", their finish reasons and where one names the stop string it ended at. The stream
// reader (chatStream.ts), the pool (engine.ts) and the backend (remoteBackend.ts) read these tables; nothing else
// branches on an engine's name. Each row names the engine and version it comes from; each is covered by the
// scripted engine's flavours (test/fixtures/fakeEngine.ts, test/unit/backends/engineKinds.test.ts).
import type { GenerateRequest } from '../../runtime/backend';
import { BY_KIND_FIELDS, paramOf, type ByKindField } from '../../runtime/requestFields';
import { isObject } from '../../runtime/jsonValues';

/** Kinds of engine a configuration may name; `openai` is any other OpenAI-compatible server (the default). */
export const ENGINE_KINDS = ['llama.cpp', 'vllm', 'ollama', 'lmstudio', 'openai'] as const;
export type EngineKind = (typeof ENGINE_KINDS)[number];

export interface EngineProfile {
  label: string;
  /**
   * Path beside /v1 that reports the number of parallel slots (`total_slots`): llama.cpp server's GET /props. Absent:
   * not asked (Ollama and vLLM answer 404, LM Studio answers 200 with an error object for unknown routes).
   */
  slotsPath?: '/props';
  /**
   * Whether the engine continues a final assistant message, which on_restart "resume" needs:
   * `true` — it does (resume offered unless the configuration turns it off); `false` — it does not, and a
   * configuration asking for it is refused; `undefined` — unknown, offered only when the configuration says so.
   */
  continuesFinalMessage: boolean | undefined;
  /** Why not, for the configuration error (when continuesFinalMessage is false). */
  noResumeReason?: string;
  /** `owned_by` values of its GET /v1/models entries, to suggest a kind in the log when none is configured. */
  ownedBy: string[];
  /** The request fields beyond the OpenAI baseline (messages, max_tokens, temperature, top_p) it honours. */
  request: EngineRequestFields;
}

/** GenerateRequest's sampling fields that not every engine honours (the request's `task_runtime` member). */
export const SAMPLING_FIELDS = BY_KIND_FIELDS;
export type SamplingField = ByKindField;

/** Where each sampling field comes from in a stored request (the `param` of a refusal). */
export const SAMPLING_PARAMS = Object.fromEntries(SAMPLING_FIELDS.map((f) => [f, paramOf(f)])) as Record<SamplingField, string>;

/**
 * What an engine kind honours on POST /v1/chat/completions. A field it does not list is refused at create
 * (RequestRefusedError unsupported_capability), never sent and silently ignored.
 */
export interface EngineRequestFields {
  /** The chat/completions field each sampling field goes in; absent: the engine has none. */
  sampling: Partial<Record<SamplingField, string>>;
  /** The `response_format` types it constrains output with (the OpenAI chat shapes). */
  formats: ReadonlyArray<'json_object' | 'json_schema'>;
  /** The response_format sent for json_object where `{"type": "json_object"}` alone does not constrain the output. */
  jsonObject?: Record<string, unknown>;
  /**
   * `logprobs: true, top_logprobs: N` honoured on streams (each chunk's `choices[0].logprobs.content`); `minTop`:
   * the smallest N that still reports the chosen tokens (llama.cpp server reports nothing at 0); false: none.
   */
  logprobs: false | { minTop: number };
  /** Function tools (`tools`, `tool_choice`, `parallel_tool_calls`); false: the engine kind takes none. */
  tools: false | EngineToolFields;
  /** `reasoning.effort` values it takes, and under which field; absent: refused (unsupported_capability). */
  reasoningEffort?: { field: string; values: readonly ReasoningEffort[] };
}

export type ReasoningEffort = NonNullable<GenerateRequest['reasoningEffort']>;

/** How an engine kind takes function tools on chat/completions. */
export interface EngineToolFields {
  /** The tool_choice values it honours (`auto` is the default with tools, never sent); others are refused. */
  choices: ReadonlyArray<'required' | 'named'>;
  /**
   * How a named choice is sent: `object` — OpenAI's `{"type": "function", "function": {"name"}}`; `only-tool` — the
   * named tool alone with `"required"` (an engine that reads tool_choice only as a string).
   */
  named?: 'object' | 'only-tool';
  /** Whether it honours `parallel_tool_calls: false`; when not, asking for it is refused. */
  parallel: boolean;
}

/** OpenAI's chat/completions tool fields (platform.openai.com/docs/api-reference/chat/create). */
const OPENAI_TOOLS: EngineToolFields = { choices: ['required', 'named'], named: 'object', parallel: true };

/** OpenAI's own chat/completions fields for these (platform.openai.com/docs/api-reference/chat/create). */
const OPENAI_SAMPLING: Partial<Record<SamplingField, string>> = {
  seed: 'seed',
  stop: 'stop',
  frequencyPenalty: 'frequency_penalty',
  presencePenalty: 'presence_penalty',
};

/** The request fields that make an engine continue the final assistant message instead of starting a new turn. */
export const CONTINUE_FINAL_MESSAGE = { continue_final_message: true, add_generation_prompt: false } as const;

export const ENGINE_PROFILES: Record<EngineKind, EngineProfile> = {
  // llama.cpp server: assistant prefill is on by default (--no-prefill-assistant turns it off) and it parses
  // continue_final_message / add_generation_prompt; GET /props has total_slots; /v1/models entries carry
  // meta.n_ctx_train and owned_by "llamacpp".
  // Request fields (tools/server/README.md "POST /v1/chat/completions" and /completion options; server-common.cpp
  // of the bundled source): llama.cpp's own top_k, min_p, repeat_penalty (1 = off) next to OpenAI's; response_format
  // json_object and json_schema (json_schema.schema becomes a grammar); logprobs + top_logprobs become n_probs, and
  // with n_probs 0 no probabilities at all are reported, so at least 1 is asked and the alternatives trimmed. A bare
  // {"type": "json_object"} becomes the schema {} there, which is no grammar at all (an empty object counts as "no
  // schema"; measured on the bundled server in test/remote): json_object is sent with the schema of any object.
  // Tools (server-common.cpp oaicompat_chat_params_parse, common/chat.cpp; the jinja template engine is on by default
  // in this build, `--jinja`): tools go through the model's chat template, `required` constrains the call by grammar,
  // parallel_tool_calls is read; tool_choice is read only as a string ("auto" / "none" / "required" — an object is
  // taken as "auto" with a warning), so a named choice is sent as that tool alone with "required". Reasoning comes
  // as delta.reasoning_content (reasoning_format deepseek, the default); `reasoning_effort` is read: "none" turns
  // thinking off, any other value goes to the template as its reasoning_effort variable.
  'llama.cpp': {
    label: 'llama.cpp server',
    slotsPath: '/props',
    continuesFinalMessage: true,
    ownedBy: ['llamacpp'],
    request: {
      sampling: { ...OPENAI_SAMPLING, topK: 'top_k', minP: 'min_p', repeatPenalty: 'repeat_penalty' },
      formats: ['json_object', 'json_schema'],
      jsonObject: { type: 'json_object', schema: { type: 'object' } },
      logprobs: { minTop: 1 },
      tools: { choices: ['required', 'named'], named: 'only-tool', parallel: true },
      reasoningEffort: { field: 'reasoning_effort', values: ['none', 'minimal', 'low', 'medium', 'high'] },
    },
  },
  // vLLM: continue_final_message: true with add_generation_prompt: false (it refuses both true); /v1/models entries
  // carry max_model_len and owned_by "vllm"; no slot count (it batches; set concurrency).
  // Request fields (docs.vllm.ai "OpenAI-Compatible Server", Extra Parameters; vllm/entrypoints/openai/protocol.py
  // ChatCompletionRequest "chat-completion-sampling-params"): top_k, min_p and repetition_penalty (its name for the
  // multiplicative penalty, 1 = off); response_format json_object / json_schema (structured outputs); logprobs.
  // Tools (docs.vllm.ai "Tool Calling"): auto needs the server's --enable-auto-tool-choice and a parser, `required`
  // and named choices are constrained by structured outputs, parallel_tool_calls is read; reasoning parsers stream
  // delta.reasoning_content (delta.reasoning since 0.11); reasoning_effort low/medium/high (ChatCompletionRequest).
  vllm: {
    label: 'vLLM',
    continuesFinalMessage: true,
    ownedBy: ['vllm'],
    request: {
      sampling: { ...OPENAI_SAMPLING, topK: 'top_k', minP: 'min_p', repeatPenalty: 'repetition_penalty' },
      formats: ['json_object', 'json_schema'],
      logprobs: { minTop: 0 },
      tools: OPENAI_TOOLS,
      reasoningEffort: { field: 'reasoning_effort', values: ['low', 'medium', 'high'] },
    },
  },
  // Ollama's /v1: no continue_final_message parameter; whether a trailing assistant message is continued or answered
  // depends on each model's template, so a "resumed" text could silently start a new turn. /v1/models entries have
  // only id/object/created/owned_by (the model's namespace, "library" for official models); no /props.
  ollama: {
    label: 'Ollama',
    continuesFinalMessage: false,
    noResumeReason: "Ollama has no continue_final_message; whether it continues a final assistant message depends on the model's template",
    ownedBy: ['library'],
    // Request fields (docs/api/openai-compatibility.mdx, "Supported request fields"; openai/openai.go
    // ChatCompletionRequest): frequency_penalty, presence_penalty, response_format (JSON mode and json_schema), seed,
    // stop — no top_k, min_p or repeat penalty on /v1 (only in the native API's options). Logprobs since v0.12.11
    // (release notes; ollama#16867: the page's unchecked box is stale, openai.go reads logprobs/top_logprobs).
    // Tools: `tools` are taken, tool_choice and parallel_tool_calls are not read (openai.go ChatCompletionRequest has
    // neither), so only `auto` is offered; a call arrives whole in one delta; thinking streams as delta.reasoning, and
    // reasoning_effort (FromChatRequest: "high", "medium", "low", "none" = think off, else 400) becomes `think`.
    request: {
      sampling: { ...OPENAI_SAMPLING },
      formats: ['json_object', 'json_schema'],
      logprobs: { minTop: 0 },
      tools: { choices: [], parallel: false },
      reasoningEffort: { field: 'reasoning_effort', values: ['none', 'low', 'medium', 'high'] },
    },
  },
  // LM Studio: no documented way to continue a final assistant message; /v1/models entries have only id/object/
  // owned_by "organization_owner"; unknown routes answer 200 with {"error": "Unexpected endpoint or method. (…)"}.
  lmstudio: {
    label: 'LM Studio',
    continuesFinalMessage: false,
    noResumeReason: 'LM Studio does not document continuing a final assistant message',
    ownedBy: ['organization_owner'],
    // Request fields (lmstudio-ai/docs 1_developer/3_openai-compat/chat-completions.md, "Supported payload
    // parameters": top_p, top_k, stop, presence_penalty, frequency_penalty, logit_bias, repeat_penalty, seed — no
    // min_p, no logprobs); structured-output.md: response_format json_schema only — json_object is answered 400
    // "'response_format.type' must be 'json_schema' or 'text'" (lmstudio-bug-tracker#189, open).
    request: {
      sampling: { ...OPENAI_SAMPLING, topK: 'top_k', repeatPenalty: 'repeat_penalty' },
      formats: ['json_schema'],
      logprobs: false,
      // tools.md: `tools` in the OpenAI shape, calls parsed from the model's template (or its default format);
      // tool_choice and parallel_tool_calls are not among chat-completions.md's supported payload parameters, so only
      // `auto` is offered; reasoning_effort is documented for /v1/responses only (gpt-oss), so it is refused here.
      tools: { choices: [], parallel: false },
    },
  },
  // Any other OpenAI-compatible server: only what OpenAI's chat/completions defines (seed, stop, the two penalties,
  // response_format json_object / json_schema, logprobs) — a server-specific field could be ignored unseen.
  openai: {
    label: 'OpenAI-compatible server',
    slotsPath: '/props',
    continuesFinalMessage: undefined,
    ownedBy: [],
    request: {
      sampling: { ...OPENAI_SAMPLING },
      formats: ['json_object', 'json_schema'],
      logprobs: { minTop: 0 },
      tools: OPENAI_TOOLS,
      reasoningEffort: { field: 'reasoning_effort', values: ['none', 'minimal', 'low', 'medium', 'high'] },
    },
  },
};

/**
 * Where a chunk's reasoning text is, in the order read (the first present one is taken, never both):
 * `reasoning_content` — llama.cpp server, vLLM before 0.11, DeepSeek's API; `reasoning` — Ollama's /v1, LM Studio,
 * vLLM since 0.11, OpenRouter.
 */
export const REASONING_DELTA_FIELDS = ['reasoning_content', 'reasoning'] as const;

/**
 * Where a finishing choice names the stop string that ended the output, read only when it is text: `stop_reason` —
 * vLLM (ChatCompletionResponseStreamChoice: the stop string, or a stop token's id as a number, null for the end of
 * generation). llama.cpp server's chat stream does not say (tools/server/server-task.cpp: `stopping_word` only in the
 * native /completion answer, its Anthropic route and the `--verbose` debug member), nor do Ollama's /v1 and LM Studio:
 * their stop-string ends carry no string, and none is guessed.
 */
export const STOP_SEQUENCE_FIELDS = ['stop_reason'] as const;

export function isEngineKind(v: unknown): v is EngineKind {
  return typeof v === 'string' && (ENGINE_KINDS as readonly string[]).includes(v);
}

/** Whether on_restart "resume" is offered for an engine: its kind decides, the configuration may turn it off (or on, for unknown kinds). */
export function resumeOffered(kind: EngineKind | undefined, configured: boolean | undefined): boolean {
  const can = ENGINE_PROFILES[kind ?? 'openai'].continuesFinalMessage;
  return can === true ? configured !== false : can === undefined ? configured === true : false;
}

/** The kind whose `owned_by` a model list shows, if any (a hint for the log, never a decision). */
export function kindFromModelList(json: unknown): EngineKind | undefined {
  const data = isObject(json) && Array.isArray(json.data) ? json.data : [];
  const owners = new Set(data.filter(isObject).map((m) => m.owned_by));
  return ENGINE_KINDS.find((k) => ENGINE_PROFILES[k].ownedBy.some((o) => owners.has(o)));
}

/** What an engine said went wrong. */
export interface EngineErrorInfo {
  message: string;
  type?: string;
  code?: string;
}

/**
 * The error in an engine's JSON body or stream event, whatever its shape:
 *   {"error": {"message", "type", "code"}}  OpenAI, llama.cpp server, vLLM ≥ 0.10, Ollama's /v1, LM Studio
 *   {"error": "text"}                       LM Studio (400s, and 200 for unknown routes), Ollama's native API
 *   {"object": "error", "message", …}       vLLM before 0.10 (HTTP bodies)
 *   {"detail": "text" | [{loc, msg}]}       FastAPI request validation (vLLM 422)
 * Undefined when the body holds none of these.
 */
export function engineErrorOf(json: unknown): EngineErrorInfo | undefined {
  if (!isObject(json)) return undefined;
  const e = json.error;
  if (typeof e === 'string') return { message: e };
  if (isObject(e)) return { message: textOf(e.message) ?? JSON.stringify(e), type: textOf(e.type), code: textOf(e.code) };
  if (e !== undefined && e !== null) return { message: JSON.stringify(e) };
  if (json.object === 'error') return { message: textOf(json.message) ?? 'error', type: textOf(json.type), code: textOf(json.code) };
  const d = json.detail;
  if (typeof d === 'string') return { message: d };
  if (Array.isArray(d)) {
    const parts = d.filter(isObject).map((x) => {
      const loc = Array.isArray(x.loc) ? x.loc.map(String).join('.') : '';
      return `${loc ? `${loc}: ` : ''}${textOf(x.msg) ?? JSON.stringify(x)}`;
    });
    return { message: parts.join('; ') || JSON.stringify(d) };
  }
  return undefined;
}

/**
 * "The prompt (plus max_tokens) does not fit the context", as each engine says it. Such a request fails with
 * `context_length_exceeded` (LMSP), not a generic `invalid_request`. Ollama is absent: it truncates the prompt to
 * the model's num_ctx silently and answers.
 */
export const CONTEXT_OVERFLOW: ReadonlyArray<{ engine: string; test: (e: EngineErrorInfo) => boolean }> = [
  { engine: 'OpenAI', test: (e) => e.code === 'context_length_exceeded' },
  // {"error":{"code":400,"message":"request (30052 tokens) exceeds the available context size (2048 tokens), …","type":"exceed_context_size_error"}}
  { engine: 'llama.cpp server', test: (e) => e.type === 'exceed_context_size_error' || /exceeds the available context size/i.test(e.message) },
  // "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (…)" (and the newer
  // "'max_tokens' … is too large: … This model's maximum context length is …"); V1: "The decoder prompt (length 5000)
  // is longer than the maximum model length of 4096."
  { engine: 'vLLM', test: (e) => /maximum context length is \d+|longer than the maximum model length/i.test(e.message) },
  // "The number of tokens to keep from the initial prompt is greater than the context length (n_keep: 13055>= n_ctx:
  // 4096)…"; older: "Trying to keep the first N tokens when context the overflows. However, the model is loaded with
  // context length of only M tokens…"; MLX: "Context size has been exceeded".
  {
    engine: 'LM Studio',
    test: (e) =>
      /greater than the context length|context length of only \d+|context size has been exceeded|reached context length of \d+/i.test(e.message),
  },
];

export function isContextOverflow(e: EngineErrorInfo): boolean {
  return CONTEXT_OVERFLOW.some((r) => r.test(e));
}

/** Answers that mean "this URL is not the engine's OpenAI-style base" although the status may be 200 (LM Studio). */
export const WRONG_ROUTE: ReadonlyArray<{ engine: string; test: (e: EngineErrorInfo) => boolean }> = [
  { engine: 'LM Studio', test: (e) => /^Unexpected endpoint or method/i.test(e.message) },
];

export function isWrongRoute(e: EngineErrorInfo): boolean {
  return WRONG_ROUTE.some((r) => r.test(e));
}

/**
 * finish_reason values and what they mean for the task: `stop` → completed, `max_output_tokens` → incomplete,
 * `interrupted` → the engine gave up on the request (vLLM "abort": preempted or shut down) and the on_restart policy
 * decides, `error` → the engine failed it (vLLM "error"). Anything else ("tool_calls" after function calls,
 * "function_call", "content_filter", "eos", …) → completed.
 */
export const FINISH_REASONS: Readonly<Record<string, 'stop' | 'max_output_tokens' | 'interrupted' | 'error'>> = {
  stop: 'stop',
  length: 'max_output_tokens',
  abort: 'interrupted',
  error: 'error',
};

function textOf(v: unknown): string | undefined {
  return typeof v === 'string' ? v : typeof v === 'number' ? String(v) : undefined;
}

/**
 * llama.cpp server's router mode (one server, many models: `llama-server` started without a model, serving those of
 * --models-dir, --models-preset or its download cache; tools/server/server-models.cpp of the bundled source; its
 * default port is 8080 in the release we build, 9931 in later ones). Each GET /v1/models entry carries
 * `status: {value, failed?, exit_code?}`; a request for a model starts it (unless --no-models-autoload) after the
 * router's own queue and eviction (--models-max), a sleeping one (--sleep-idle-seconds) wakes on the next request and
 * the request waits. How each status reads here: `ready` takes requests now (a sleeping model too: the request waits
 * while it wakes), `loading` is on its way, `unloaded` needs a start. A failed start reads `failed`.
 */
export const ROUTER_MODEL_STATUS: Record<string, RouterModelStatus> = {
  loaded: 'ready',
  sleeping: 'ready',
  loading: 'loading',
  downloading: 'loading',
  downloaded: 'loading',
  unloaded: 'unloaded',
};
export type RouterModelStatus = 'ready' | 'loading' | 'unloaded' | 'failed';
/**
 * Starting a model and waiting for it: GET /props?model=ID with this query, which the router answers (the model's
 * own /props) once the model runs, also when it does not start models by itself (the per-request override).
 */
export const ROUTER_START_QUERY = 'autoload=true';
/** The router's 400 for a model that is not running when it does not start models by itself (--no-models-autoload). */
export const ROUTER_NOT_LOADED = /model is not loaded/i;
/** Its words when a model's process could not start, and for a model it does not have (else: try again later). */
export const ROUTER_START_FAILED = /failed to load/i;
export const ROUTER_UNKNOWN_MODEL = /not found/i;

/** A /v1/models entry's router status, when it has one (a router's entries do, no other engine's). */
export function routerStatusOf(entry: Record<string, unknown>): RouterModelStatus | undefined {
  const s = entry.status;
  if (!isObject(s) || typeof s.value !== 'string') return undefined;
  if (s.failed === true && s.value === 'unloaded') return 'failed';
  return Object.hasOwn(ROUTER_MODEL_STATUS, s.value) ? ROUTER_MODEL_STATUS[s.value] : 'loading';
}

/**
 * The direct calls (embeddings, reranking: runtime/embeddings.ts) each engine kind serves beside /v1, and where. Absent:
 * a model of that kind is refused unsupported_capability before anything is sent.
 * - llama.cpp server: POST /v1/embeddings when started with `--embeddings`, POST /v1/rerank with `--reranking`
 *   (tools/server/server.cpp of the bundled source); otherwise it answers HTTP 501 "not supported", which is mapped
 *   to unsupported_capability (NOT_SUPPORTED_STATUS).
 * - vLLM: POST /v1/embeddings for a pooling model, POST /v1/rerank (Jina/Cohere shape) for a cross-encoder.
 * - Ollama: POST /v1/embeddings (its OpenAI-compatible layer); no rerank route.
 * - LM Studio: POST /v1/embeddings; no rerank route.
 * - any other OpenAI-compatible server: /v1/embeddings (OpenAI's); rerank unknown, so not offered.
 */
export const DIRECT_CALLS: Record<EngineKind, { embeddings?: '/embeddings'; rerank?: '/rerank' }> = {
  'llama.cpp': { embeddings: '/embeddings', rerank: '/rerank' },
  vllm: { embeddings: '/embeddings', rerank: '/rerank' },
  ollama: { embeddings: '/embeddings' },
  lmstudio: { embeddings: '/embeddings' },
  openai: { embeddings: '/embeddings' },
};

/** The status llama.cpp server answers a route its start flags turned off with (ERROR_TYPE_NOT_SUPPORTED). */
export const NOT_SUPPORTED_STATUS = 501;
