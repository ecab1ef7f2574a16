// The runtime's view of a model backend. Backends live in src/backends and are handed to the runtime by a
// composition root; the runtime never imports one.
import type { InputRequest, InputResponse, RestartPolicy } from './task';
import type { FailureCode } from './problems';

export type ModelState = 'unloaded' | 'loading' | 'loaded' | 'error';

export interface ModelInfo {
  /** Stable id clients put in `model`. */
  id: string;
  /** Where the weights come from: a local path or a model URI. */
  source: string;
  state: ModelState;
  /** Trained context length when known (a local file's header, read when the runtime opens; else after load), else null. */
  maxContextLength: number | null;
  /** The context this model runs with (tokens) once known: prompt + output of one task must fit it. */
  contextLength?: number | null;
  /** True for the generated random-weight demo model. */
  demo: boolean;
  /** What the model runs on, once loaded (or why it fell back to the CPU). */
  hardware?: ModelHardware;
  /** The remote engine serving it (its configured name); absent for in-process models. */
  engine?: string;
  /** Tasks that generate on it at once (a local model's batched sequences), once known. */
  concurrency?: number;
  /**
   * The length of its embedding vectors when known before a call (a local file's header, read when the runtime
   * opens; else once loaded): a request's other `dimensions` is refused before any work. Absent: not known.
   */
  embeddingDimensions?: number;
  /**
   * What its generation supports, as far as the backend knows now (docs/lmsp.md, "Model capabilities"); absent:
   * not known yet (a model URI before its download) — the doors say false.
   */
  capabilities?: ModelCapabilities;
}

/** What a model's generation supports: GET /models `capabilities`, the VS Code provider's `toolCalling`. */
export interface ModelCapabilities {
  /** Function tools: calls forced by grammar (`required`, a named tool) and `auto` calls parsed from its output. */
  tools: boolean;
  /** A thought segment: its reasoning comes as reasoning items, and `reasoning.effort` is honoured. */
  reasoning: boolean;
}

/** The hardware a loaded model actually uses; shown to users (LMSP models, editor tooltip, serve log). */
export interface ModelHardware {
  /** 'cpu', or the GPU API in use: 'cuda' | 'vulkan' | 'metal'. */
  compute: string;
  /** GPU device names (empty on CPU). */
  devices: string[];
  /** Layers offloaded to the GPU, of totalLayers. */
  gpuLayers: number;
  totalLayers: number | null;
  /** GPU memory in bytes when a GPU is in use. */
  vram?: { total: number; used: number };
  /** CPU threads of a one-token step and how that number was chosen. */
  threads: number;
  threadsFrom: 'setting' | 'calibration' | 'cache' | 'default';
  /** The setting's number, when it is one: the bound the count was chosen under (prompts use it). */
  threadsCap?: number;
  /** CPU threads for a decode of a prompt's size (many tokens at once; `threads` for one-token steps). */
  promptThreads?: number;
  /** Decode tokens/s per measured thread count when calibrated (from this load or the cache). */
  threadTokensPerSecond?: Record<string, number>;
  /** Set when a GPU was wanted (setting or auto with a GPU build present) but the CPU is used, and why. */
  fallbackReason?: string;
  /** Warm-up generation done while loading (ms). */
  warmupMs?: number;
  /** Sequences of the model's one batched context (tasks decoding at once) and how that number was chosen. */
  sequences?: number;
  sequencesFrom?: 'setting' | 'auto';
  /**
   * Internals of the local engine this build relies on that are missing (a node-llama-cpp other than the pinned
   * one): the features they serve (batching, thread split, sampling guard, resume in a grammar) are off.
   */
  nativeSeamsMissing?: string[];
  /** Speculative decoding for this model: 'off', 'prompt lookup (auto|on)' or 'draft model <file>'. */
  speculation?: string;
  /**
   * Which llama.cpp binary the model runs on: node-llama-cpp's prebuilt one, or this machine's native build (OpenMP,
   * native CPU flags; docs/native-build.md) by its cache key; `reason`: why a native build is not used; `oneStep`:
   * each token's decode and sampling go to the native build in one call (its decode-and-sample patch).
   */
  build?: { kind: 'prebuilt' | 'native'; key?: string; reason?: string; oneStep?: boolean };
}

/** One line for logs: "vulkan (NVIDIA H200), 16/16 layers, VRAM 1.2/150.0 GB, 15 threads (calibration)". */
export function describeHardware(h: ModelHardware): string {
  const gb = (n: number) => (n / 1e9).toFixed(1);
  const parts = [h.compute === 'cpu' ? 'CPU' : `${h.compute}${h.devices.length ? ` (${h.devices.join(', ')})` : ''}`];
  if (h.compute !== 'cpu') parts.push(`${h.gpuLayers}/${h.totalLayers ?? '?'} layers on the GPU`);
  if (h.vram && h.vram.total > 0) parts.push(`VRAM ${gb(h.vram.used)}/${gb(h.vram.total)} GB`);
  parts.push(`${h.threads} thread(s) (${h.threadsFrom}${h.threadsCap !== undefined ? `, at most ${h.threadsCap}` : ''})`);
  if (h.promptThreads !== undefined && h.promptThreads !== h.threads) parts.push(`${h.promptThreads} for prompts`);
  if (h.sequences !== undefined) parts.push(`${h.sequences} sequence(s) batched (${h.sequencesFrom ?? 'setting'})`);
  if (h.speculation && h.speculation !== 'off') parts.push(`speculative: ${h.speculation}`);
  if (h.warmupMs !== undefined) parts.push(`warm-up ${Math.round(h.warmupMs)} ms`);
  if (h.build)
    parts.push(h.build.kind === 'native' ? `native build ${h.build.key ?? '?'}${h.build.oneStep ? ' (one step per token)' : ''}` : 'prebuilt binary');
  let s = parts.join(', ');
  if (h.fallbackReason) s += `; ${h.fallbackReason}`;
  if (h.nativeSeamsMissing?.length) s += `; engine internals missing: ${h.nativeSeamsMissing.join(', ')}`;
  return s;
}

export interface ChatMessage {
  role: 'system' | 'developer' | 'user' | 'assistant' | 'tool';
  content: string;
  /** role `assistant`: the function calls it made (after its text, if any). */
  toolCalls?: ToolCall[];
  /** role `tool`: the call this message answers (`function_call_output`). */
  callId?: string;
  /**
   * role `assistant`: the reasoning the model wrote before this turn's text and calls (a reasoning item given back;
   * the llama backend renders it as the turn's thought segment, where the chat template keeps one).
   */
  reasoning?: string;
}

/** A function call the model made (Responses `function_call` item). */
export interface ToolCall {
  callId: string;
  name: string;
  /** The arguments as the JSON text the model produced. */
  arguments: string;
}

/** A function the model may call. */
export interface ToolDefinition {
  name: string;
  description?: string;
  /** JSON Schema of the arguments object; absent: any object. */
  parameters?: Record<string, unknown>;
  /** Arguments must validate against `parameters` (local backends always constrain forced calls by grammar). */
  strict?: boolean;
}

/** `auto`: the model decides (its chat template's tool syntax); `required`: at least one call; a name: that call. */
export type ToolChoice = 'auto' | 'required' | { name: string };

/**
 * Where a piece of generated text goes: absent = the answer (the message item's output_text); `reasoning` = the
 * model's thought segment (a `reasoning` item); `function_call` = the raw JSON arguments of that call (one
 * `function_call` item per callId, in the order the calls were started).
 */
export type OutputChannel = { kind: 'reasoning' } | { kind: 'function_call'; callId: string; name: string };

/** Text delivered on one channel, in the order it was emitted (consecutive pieces of one channel joined). */
export interface OutputSegment {
  channel?: OutputChannel;
  text: string;
}

export interface GenerateRequest {
  model: string;
  instructions?: string;
  messages: ChatMessage[];
  /**
   * The output budget. As the caller gave it, prompt + budget must fit the context: a backend that knows the context
   * refuses more (checkRequest; context_length_exceeded, param max_output_tokens). With `capMaxOutputTokens` it is an
   * "up to" budget instead, capped to the room the prompt leaves (the output then ends `incomplete`). Absent: up to
   * the context.
   */
  maxOutputTokens?: number;
  /**
   * maxOutputTokens is a default the caller did not choose (the MCP tools' budgets, the editor's chat provider):
   * capped to the room, never refused for it (stored as `task_runtime.cap_max_output_tokens`).
   */
  capMaxOutputTokens?: boolean;
  /** 0–2; absent: the backend's default. */
  temperature?: number;
  /** 0–1. */
  topP?: number;
  /** The same seed, request and model give the same text (also with temperature > 0). */
  seed?: number;
  /** Sample only from the k most likely tokens (0 = off). */
  topK?: number;
  /** Drop tokens below this fraction of the most likely token's probability (0–1). */
  minP?: number;
  /** llama.cpp's repeat penalty over the recent tokens (1 = off). */
  repeatPenalty?: number;
  /** −2..2, OpenAI's meaning: by how often a token already appeared. */
  frequencyPenalty?: number;
  /** −2..2, OpenAI's meaning: whether a token already appeared. */
  presencePenalty?: number;
  /** Up to 4 strings that end the output when generated; they are not part of the text. */
  stop?: string[];
  /** Report log-probabilities of the generated tokens, with this many alternatives each (0–20); absent: none. */
  topLogprobs?: number;
  /** Constrain the output to JSON (any object, or a document valid against a schema); absent: free text. */
  format?: OutputFormat;
  /** Functions the model may call; absent or empty: none (also for tool_choice `none`: they are not offered). */
  tools?: ToolDefinition[];
  /** Absent: `auto` when tools are given. */
  toolChoice?: ToolChoice;
  /** At most one call per response when false (default true). */
  parallelToolCalls?: boolean;
  /**
   * Which conversation this is (the request's `prompt_cache_key`): a backend prefers where the key last ran, so that
   * its kept prompt prefix is there (a local model's sequence, a remote pool's endpoint). Never changes the output.
   */
  cacheKey?: string;
  /** Reasoning effort asked for (a backend refuses it in checkRequest when the model has no such control). */
  reasoningEffort?: 'none' | 'minimal' | 'low' | 'medium' | 'high';
}

/**
 * `json_object`: some JSON object. `json_schema`: a document valid against `schema` (the JSON Schema the client sent,
 * unchanged; a backend that cannot enforce part of it refuses the request in checkRequest, never ignores it).
 */
export type OutputFormat =
  { type: 'json_object' } | { type: 'json_schema'; name: string; schema: Record<string, unknown>; strict?: boolean; description?: string };

/** One generated token with its log-probability and the most likely alternatives (OpenAI's logprobs shape). */
export interface TokenLogprob {
  token: string;
  logprob: number;
  bytes: number[];
  top_logprobs: Array<{ token: string; logprob: number; bytes: number[] }>;
}

/**
 * A request a backend cannot run as asked, found before anything is stored: the door answers 400 with `code` and
 * `param` (the request field, in the wire's dotted form, e.g. `text.format.schema.properties.a.pattern`).
 */
export class RequestRefusedError extends Error {
  constructor(
    readonly code: 'invalid_request' | 'invalid_json_schema' | 'context_length_exceeded' | 'unsupported_capability',
    message: string,
    readonly param: string | null,
  ) {
    super(message);
    this.name = 'RequestRefusedError';
  }
}

/** Where a resumable generation stands; written by the backend, read back after a restart. */
export interface GenerationSnapshot {
  /** File the backend wrote its state to (context-sequence state). */
  statePath: string;
  /** Output text produced up to the snapshot. */
  text: string;
  /** Output tokens produced up to the snapshot. */
  outputTokens: number;
}

export interface GenerateOptions {
  signal: AbortSignal;
  /**
   * Called for every decoded piece of text, in order. `tokens` is the number of tokens the piece covers;
   * `logprobs`, when the request asked for them, one entry per token of the piece (answer text only). `channel`
   * says where the piece goes (absent: the answer): a function call's arguments are emitted as the raw JSON text,
   * its callId (unique in the response, e.g. `call_` + random) chosen by the backend when the call starts.
   */
  onText(text: string, tokens: number, logprobs?: TokenLogprob[], channel?: OutputChannel): void;
  /**
   * Continue an output that clients already received part of (only when `supportsResume`): the backend brings
   * the model to "prompt + delivered text" — from the snapshot plus the text after it when the snapshot is usable,
   * else by evaluating prompt + text again — and generates further without emitting the delivered text again.
   */
  resumeFrom?: ResumeFrom;
  /**
   * Ask the backend to save its state into `dir`, at most every `everyMs`, and only once evaluating again what the
   * last save does not cover would take longer than `minReevalMs` (estimated from this generation's own prompt
   * rate; 0 = on every `everyMs`). It calls `onSnapshot` after each save, with text/outputTokens covering
   * everything emitted through onText before the save.
   */
  snapshots?: { dir: string; everyMs: number; minReevalMs: number; onSnapshot(snapshot: GenerationSnapshot): void };
  /**
   * Asks the task's client for input and resolves with the answers, by the names given (always set by the runtime;
   * optional only so that direct callers of a backend need not provide it). Until every request is answered the task
   * is `input_required` with these requests (MCP: tasks/get `inputRequests`, answered by tasks/update), written in
   * one durable batch with the status change, after the text emitted so far. Requests are opaque to the runtime: give
   * what the client's protocol expects (MCP: `{method: "elicitation/create", params}`, `sampling/createMessage`,
   * `roots/list`). Names: 1–64 of [A-Za-z0-9_-], at most 16 per call. While the task waits it holds no concurrency
   * slot. Rejects with an AbortError when the run is stopped (cancel, deadline, shutdown) — end the generation then.
   * After a restart (on_restart `retry`/`resume`) a new attempt runs from the start, and rounds already answered are
   * replayed: a call that asks exactly what the same round asked before resolves at once with the stored answers,
   * so a deterministic backend gets back to where the answers left it. Once a call differs, no more is replayed.
   */
  requestInput?(requests: Record<string, InputRequest>, options?: { message?: string }): Promise<Record<string, InputResponse>>;
}

export interface ResumeFrom {
  /** State saved by an earlier run; used when its text is a prefix of `text`, else (or absent) prompt + text are evaluated. */
  snapshot?: GenerationSnapshot;
  /** All answer text clients received (the message item's text). */
  text: string;
  /**
   * Everything clients received, by channel, in emission order (answer text, reasoning, function-call arguments);
   * the backend re-feeds it in its own syntax so that the model continues where it stood (a call half written
   * continues inside its grammar, in the same item). Absent: everything was answer text (`text`).
   */
  segments?: OutputSegment[];
  /** Output tokens counted for that text. */
  outputTokens: number;
}

export type FinishReason = 'stop' | 'max_output_tokens' | 'aborted';

export interface GenerateResult {
  finishReason: FinishReason;
  inputTokens: number;
  outputTokens: number;
  /** Of inputTokens, those not evaluated again: a kept prompt prefix (usage.input_tokens_details.cached_tokens). */
  cachedInputTokens?: number;
  /**
   * The request's stop string that ended the output (finishReason `stop`), when the backend knows which: the llama
   * backend always does; a remote engine only when it says so. Absent when the output ended another way, or when the
   * engine does not say — never guessed (the response's `task_runtime.stop_sequence`, Anthropic's `stop_sequence`).
   */
  stopSequence?: string;
  /**
   * Speculative decoding in this generation, when it drafted anything: tokens evaluated as drafts and of those the
   * ones the model produced itself (usage.task_runtime.speculative).
   */
  speculative?: { drafted: number; accepted: number };
}

export interface LoadOptions {
  signal?: AbortSignal;
  onProgress?(progress: number): void;
}

/**
 * What a backend throws when generation could not run or was cut off by something outside the model (a remote
 * engine). The runtime decides what happens to the task from `kind`:
 * - `unavailable`: nothing was generated and it is safe to run again later (engine unreachable, 503/429): the task
 *   goes back to `queued` with a status message and is retried with backoff, a bounded number of times, then fails
 *   with `backend_unavailable`.
 * - `interrupted`: the engine went away mid-output: the task's on_restart policy decides (`retry` runs it again,
 *   `fail` fails it with `backend_interrupted`).
 * - `failed`: the engine answered with an error or with something that is not a valid stream: the task fails with
 *   `code`.
 * Messages are shown to clients: they must not contain secrets or local paths.
 */
export class BackendError extends Error {
  constructor(
    readonly kind: 'unavailable' | 'interrupted' | 'failed',
    readonly code: FailureCode,
    message: string,
    /** For `unavailable`: the earliest useful retry (e.g. from Retry-After), ms. */
    readonly retryAfterMs?: number,
  ) {
    super(message);
    this.name = 'BackendError';
  }
}

export function isBackendError(e: unknown): e is BackendError {
  return e instanceof BackendError;
}

/**
 * What a backend throws when the request fails as a request: a protocol-level error with a numeric code (JSON-RPC's
 * error object), as opposed to every other failure, which is an outcome of the task (MCP: a tool error, an `isError`
 * result). The task fails with problem code `request_error`, the error kept as given in `problem.requestError`, and
 * each door answers it as an error in its own protocol: MCP 2026-07-28 tasks/get → `failed` with this `error` inlined;
 * 2025-11-25 tasks/result and a synchronous tools/call → this JSON-RPC error; LMSP → a failed task with the problem.
 * The message and data are shown to clients: no secrets, no local paths.
 */
export class RequestError extends Error {
  constructor(
    /** JSON-RPC error code, e.g. -32603 (internal error) or -32602 (invalid params). */
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
    this.name = 'RequestError';
  }
}

export function isRequestError(e: unknown): e is RequestError {
  return e instanceof RequestError;
}

/** One input of an embeddings request: text, or the model's token ids as given (no BOS/EOS added twice). */
export type EmbedInput = string | number[];

export interface EmbedResult {
  /** One vector per input, in the inputs' order, L2-normalized (OpenAI's and llama.cpp server's convention). */
  vectors: Float32Array[];
  /** Tokens each input was evaluated as (BOS/EOS the model adds included): usage.prompt_tokens is their sum. */
  tokens: number[];
  /** The length of every vector (the model's embedding size). */
  dimensions: number;
}

/** A rerank call's answer: one score per document, in the documents' order. */
export interface RerankResult {
  /** How relevant each document is to the query: a probability in 0 … 1 (higher is more relevant). */
  scores: number[];
  /** Tokens each (query, document) pair was evaluated as (BOS/EOS/separators included): usage is their sum. */
  tokens: number[];
}

export interface ModelBackend {
  readonly name: string;
  /**
   * Whether on_restart "resume" can be honoured for this model (generate() honours `resumeFrom` and, where the
   * backend takes them, snapshots); without a model id, whether it can for some model this backend serves.
   */
  supportsResume(modelId?: string): boolean;
  /**
   * How many tasks may generate at once on the capacity this model uses, and which models share it (a remote
   * engine's endpoints serve all its models); absent or undefined → the runtime's per-model limit.
   */
  concurrency?(modelId: string): { group: string; limit: number } | undefined;
  /** Registers a callback for when `concurrency` may have grown (an engine endpoint came back). */
  onCapacityChange?(listener: () => void): void;
  /**
   * Checks a request before it is stored, from what the backend knows now (the formats and schema keywords it can
   * enforce, the sampling it supports; whether prompt + maxOutputTokens fit the context, as far as it knows the
   * context and the prompt's tokens): throws RequestRefusedError. Absent:
   * everything is accepted here and problems surface when the task runs.
   */
  checkRequest?(request: GenerateRequest, task: { onRestart: RestartPolicy }): void;
  /** Tokens the request's prompt takes as this backend would evaluate it; undefined when not at hand (not loaded). */
  countPromptTokens?(request: GenerateRequest): number | undefined;
  /**
   * Learns what checkRequest can know without loading a model (a local file's trained context, from its header).
   * `serve` awaits it before it listens, so its first create is checked with it; the editor does not call it
   * (node-llama-cpp stays lazy there until a model is needed: about 0.9 s to import on a loaded 2-core machine).
   * Never loads a model, never rejects.
   */
  prepare?(): Promise<void>;
  listModels(): ModelInfo[];
  /**
   * Tokens `text` takes in this model's own tokenizer, when the backend has it at hand now (a local model that is
   * loaded); undefined otherwise (not loaded, a remote engine): callers estimate then. Never loads a model.
   */
  countTokens?(modelId: string, text: string): number | undefined;
  /** Resolve a request's `model` (undefined = default) to a known model id, or undefined when unknown. */
  resolveModel(model: string | undefined): string | undefined;
  isLoaded(modelId: string): boolean;
  load(modelId: string, options?: LoadOptions): Promise<void>;
  generate(request: GenerateRequest, options: GenerateOptions): Promise<GenerateResult>;
  /**
   * Embeds each input with the model (its pooling, from the model file), loading the model first when it is not.
   * Absent: the backend serves no embeddings (refused as unsupported_capability). Throws RequestRefusedError for an
   * input the model cannot take (`param` = `input` or `input.N`: too long for its embedding context, a token id
   * outside its vocabulary). Rejects with an AbortError when `signal` aborts.
   */
  embed?(modelId: string, inputs: EmbedInput[], options: { signal: AbortSignal }): Promise<EmbedResult>;
  /** Whether `embed` serves this model (a backend of several kinds of models may serve some only). */
  supportsEmbeddings?(modelId: string): boolean;
  /**
   * Scores each document's relevance to the query with the model's rank head, loading the model first. Absent: the
   * backend ranks nothing (refused as unsupported_capability). Throws RequestRefusedError unsupported_capability
   * (param `model`) for a model without a rank head, context_length_exceeded (param `documents.N`) for a pair too long
   * for its context. Rejects with an AbortError when `signal` aborts.
   */
  rerank?(modelId: string, query: string, documents: string[], options: { signal: AbortSignal }): Promise<RerankResult>;
  /** Whether `rerank` may serve this model (false: refused before any work; true may still be refused on load). */
  supportsRerank?(modelId: string): boolean;
  dispose(): Promise<void>;
}
