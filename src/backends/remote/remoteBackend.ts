// ModelBackend over named remote engines (OpenAI-compatible servers: llama.cpp server, vLLM, Ollama, LM Studio).
// Model ids are `NAME/model-id`. Tasks stay in our store; generation runs on the engine. Nothing is loaded here:
// a model is "loaded" while its engine has a healthy endpoint, and load() probes the engine (the runtime shows the
// task `loading` meanwhile; an unreachable engine sends it back to `queued` with a status message). A llama.cpp
// router is the exception: its models have states, and load() starts one it lists as not running (engine.ts
// loadOnRouter); a sleeping one counts as loaded (a request wakes it and waits). Which endpoint of a pool runs a
// request is the engine's choice (routing.ts: back where its prefix was served, else least-busy).
// on_restart "resume" is offered per engine (quirks.ts): by default for the kinds that continue a final assistant
// message (llama.cpp server, vLLM), for an unknown OpenAI-compatible server only when configured, never for Ollama
// and LM Studio. The delivered text is sent back as that message and the engine generates on, in the same output
// item. Elsewhere "resume" is refused at create with unsupported_capability. `retry` runs tasks again on a healthy
// endpoint.
// Sampling, output formats and log-probabilities go to the engine under the names its kind takes (quirks.ts
// ENGINE_PROFILES[kind].request); what its kind cannot honour is refused by checkRequest before the task is stored,
// so nothing is sent that the engine would ignore.
// Function tools and reasoning: tools, tool_choice and parallel_tool_calls go as chat/completions takes
// them (a named choice as the engine kind reads it, quirks.ts), the history's calls as assistant `tool_calls` and
// `role: "tool"` messages; the stream's tool_calls and reasoning deltas come back on their channels (chatStream.ts).
// "resume" is refused with tools or a reasoning effort, and a resume point inside a call or a thought fails: an
// engine continues a final assistant message's text only (llama.cpp server refuses to continue one with tool calls).
import type { RestartPolicy } from '../../runtime/task';
import {
  BackendError,
  RequestRefusedError,
  type ChatMessage,
  type EmbedInput,
  type EmbedResult,
  type GenerateOptions,
  type GenerateRequest,
  type GenerateResult,
  type LoadOptions,
  type ModelBackend,
  type ModelInfo,
  type OutputChannel,
  type RerankResult,
  type TokenLogprob,
} from '../../runtime/backend';
import { isObject } from '../../runtime/jsonValues';
import { checkEngineConfig, type EngineConfig } from './config';
import { RemoteEngine, type EngineRuntimeOptions } from './engine';
import { CONTINUE_FINAL_MESSAGE, DIRECT_CALLS, ENGINE_PROFILES, resumeOffered, SAMPLING_FIELDS, SAMPLING_PARAMS, type EngineKind } from './quirks';

export class RemoteBackend implements ModelBackend {
  readonly name = 'remote';
  readonly engines: RemoteEngine[];
  private readonly listeners = new Set<() => void>();

  constructor(configs: EngineConfig[], options: Omit<EngineRuntimeOptions, 'onCapacityChange'> = {}) {
    const names = new Set<string>();
    this.engines = configs.map((c) => {
      const checked = checkEngineConfig(c);
      if (names.has(checked.name)) throw new Error(`engine "${checked.name}" is configured twice`);
      names.add(checked.name);
      return new RemoteEngine(checked, { ...options, onCapacityChange: () => this.listeners.forEach((l) => l()) });
    });
  }

  /** Probes every engine (model lists, slots); never throws. Bounded by each engine's probe timeout. */
  async refresh(): Promise<void> {
    await Promise.all(this.engines.map((e) => e.refresh()));
  }

  private route(modelId: string): { engine: RemoteEngine; model: string } | undefined {
    const slash = modelId.indexOf('/');
    if (slash <= 0) return undefined;
    const engine = this.engines.find((e) => e.name === modelId.slice(0, slash));
    return engine ? { engine, model: modelId.slice(slash + 1) } : undefined;
  }

  listModels(): ModelInfo[] {
    return this.engines.flatMap((e) => e.listModels());
  }

  resolveModel(model: string | undefined): string | undefined {
    if (model === undefined || model === '') return this.listModels()[0]?.id;
    const r = this.route(model);
    return r && r.engine.accepts(r.model) ? model : undefined;
  }

  /** Engines that continue a final assistant message resume (generate() honours resumeFrom; no snapshots). */
  supportsResume(modelId?: string): boolean {
    if (modelId === undefined) return this.engines.some((e) => resumeOffered(e.config.kind, e.config.resume));
    const engine = this.route(modelId)?.engine;
    return !!engine && resumeOffered(engine.config.kind, engine.config.resume);
  }

  concurrency(modelId: string): { group: string; limit: number } | undefined {
    const r = this.route(modelId);
    return r ? { group: `engine:${r.engine.name}`, limit: r.engine.capacity() } : undefined;
  }

  onCapacityChange(listener: () => void): void {
    this.listeners.add(listener);
  }

  /**
   * Refuses sampling fields, formats and log-probabilities the model's engine kind does not honour, and on_restart
   * "resume" with a format: an engine continues a final assistant message without its grammar's state, so the
   * continued JSON could be invalid (the local backend resumes inside the grammar); likewise with tools or a
   * reasoning effort: an engine cannot continue a half-written call or thought.
   */
  checkRequest(request: GenerateRequest, task?: { onRestart: RestartPolicy }): void {
    const engine = this.route(request.model)?.engine;
    if (!engine) return;
    checkForKind(engine.config.kind ?? 'openai', request);
    if (request.format && task?.onRestart === 'resume') {
      throw new RequestRefusedError(
        'unsupported_capability',
        `on_restart "resume" cannot be combined with text.format on a remote engine (its continuation would start outside the format); use "retry".`,
        'on_restart',
      );
    }
    if ((request.tools?.length || request.reasoningEffort !== undefined) && task?.onRestart === 'resume') {
      const what = request.tools?.length ? 'tools' : 'reasoning.effort';
      throw new RequestRefusedError(
        'unsupported_capability',
        `on_restart "resume" cannot be combined with ${what} on a remote engine (it cannot continue a half-written function call or reasoning); use "retry".`,
        'on_restart',
      );
    }
  }

  isLoaded(modelId: string): boolean {
    const r = this.route(modelId);
    return !!r && r.engine.ready(r.model);
  }

  async load(modelId: string, options: LoadOptions = {}): Promise<void> {
    const r = this.route(modelId);
    if (!r) throw new BackendError('failed', 'model_not_found', `No engine serves "${modelId}".`);
    if (options.signal?.aborted) throw new Error('aborted');
    await r.engine.probeDue();
    // A llama.cpp router lists models it has not started (or that sleep, which take requests: waited for, not failed).
    if (!this.isLoaded(modelId)) await r.engine.loadOnRouter(r.model, options.signal);
    if (!this.isLoaded(modelId)) {
      if (r.engine.up.length) {
        throw new BackendError('failed', 'model_not_found', `Engine "${r.engine.name}" does not list the model "${r.model}".`);
      }
      throw r.engine.unavailable();
    }
    options.onProgress?.(1);
  }

  async generate(request: GenerateRequest, options: GenerateOptions): Promise<GenerateResult> {
    const r = this.route(request.model);
    if (!r) throw new BackendError('failed', 'model_not_found', `No engine serves "${request.model}".`);
    const resume = options.resumeFrom && resumeOffered(r.engine.config.kind, r.engine.config.resume) ? options.resumeFrom : undefined;
    const messages = chatMessages(request);
    const body: Record<string, unknown> = { messages, stream: true, stream_options: { include_usage: true } };
    const before = resume?.outputTokens ?? 0;
    if (resume) {
      // The engine continues the text clients already have; only what follows it is streamed (and emitted). Text on
      // other channels (a call's arguments, reasoning) cannot be handed back as a message the engine continues.
      if (resume.segments?.some((s) => s.channel)) {
        throw new BackendError(
          'failed',
          'backend_error',
          `Engine "${r.engine.name}" cannot resume inside a function call or reasoning; use on_restart "retry".`,
        );
      }
      messages.push({ role: 'assistant', content: resume.text });
      Object.assign(body, CONTINUE_FINAL_MESSAGE);
    }
    if (request.maxOutputTokens !== undefined) body.max_tokens = Math.max(1, request.maxOutputTokens - before);
    const kind = r.engine.config.kind ?? 'openai';
    try {
      // Checked at create; again here for a task stored before the engine's kind was configured otherwise.
      checkForKind(kind, request);
    } catch (e) {
      if (e instanceof RequestRefusedError) throw new BackendError('failed', e.code, e.message);
      throw e;
    }
    Object.assign(body, requestFields(kind, request));
    const top = request.topLogprobs;
    let counted = 0;
    try {
      const onDelta = (text: string, logprobs?: TokenLogprob[], channel?: OutputChannel) => {
        const n = logprobs?.length ? logprobs.length : 1;
        counted += n;
        if (channel) options.onText(text, n, undefined, channel);
        else if (top === undefined) options.onText(text, n);
        else
          options.onText(
            text,
            n,
            (logprobs ?? []).map((l) => (l.top_logprobs.length > top ? { ...l, top_logprobs: l.top_logprobs.slice(0, top) } : l)),
          );
      };
      const result = await r.engine.chat(r.model, body, options.signal, onDelta, top !== undefined, request.cacheKey);
      // The engine's word for which stop string it was, kept only when it is one of the request's.
      const stop = result.stopSequence;
      return {
        finishReason: result.finishReason,
        inputTokens: result.inputTokens ?? 0,
        outputTokens: before + (result.outputTokens ?? counted),
        ...(stop !== undefined && request.stop?.includes(stop) ? { stopSequence: stop } : {}),
      };
    } catch (e) {
      if (options.signal.aborted) return { finishReason: 'aborted', inputTokens: 0, outputTokens: before + counted };
      throw e;
    }
  }

  supportsEmbeddings(modelId: string): boolean {
    const engine = this.route(modelId)?.engine;
    return !!engine && DIRECT_CALLS[engine.config.kind ?? 'openai'].embeddings !== undefined;
  }

  supportsRerank(modelId: string): boolean {
    const engine = this.route(modelId)?.engine;
    return !!engine && DIRECT_CALLS[engine.config.kind ?? 'openai'].rerank !== undefined;
  }

  /** POST /v1/embeddings on the engine (float vectors), in the inputs' order. */
  async embed(modelId: string, inputs: EmbedInput[], options: { signal: AbortSignal }): Promise<EmbedResult> {
    const { engine, model, path } = this.direct(modelId, 'embeddings');
    const json = await engine.call(model, path, { input: inputs, encoding_format: 'float' }, options.signal);
    const data = isObject(json) && Array.isArray(json.data) ? json.data : undefined;
    const vectors: Float32Array[] = [];
    for (const d of data ?? []) {
      if (!isObject(d) || !Number.isSafeInteger(d.index) || !Array.isArray(d.embedding)) break;
      vectors[d.index as number] = normalized(d.embedding);
    }
    const dimensions = vectors[0]?.length ?? 0;
    if (vectors.length !== inputs.length || inputs.some((_, i) => vectors[i]?.length !== dimensions) || dimensions === 0) {
      throw new BackendError('failed', 'backend_error', `Engine "${engine.name}" answered embeddings that do not match the ${inputs.length} inputs.`);
    }
    return { vectors, tokens: usageSpread(json, inputs.length), dimensions };
  }

  /** POST /v1/rerank on the engine (llama.cpp server's and vLLM's shape); scores back in the documents' order. */
  async rerank(modelId: string, query: string, documents: string[], options: { signal: AbortSignal }): Promise<RerankResult> {
    const { engine, model, path } = this.direct(modelId, 'rerank');
    const json = await engine.call(model, path, { query, documents, top_n: documents.length }, options.signal);
    const results = isObject(json) && Array.isArray(json.results) ? json.results : [];
    const scores: number[] = [];
    for (const r of results) {
      if (!isObject(r) || !Number.isSafeInteger(r.index) || typeof r.relevance_score !== 'number') break;
      scores[r.index as number] = r.relevance_score;
    }
    if (scores.length !== documents.length || documents.some((_, i) => !Number.isFinite(scores[i]))) {
      throw new BackendError(
        'failed',
        'backend_error',
        `Engine "${engine.name}" answered scores that do not match the ${documents.length} documents.`,
      );
    }
    return { scores, tokens: usageSpread(json, documents.length) };
  }

  /** The engine, its model and the path of a direct call; refused unsupported_capability where its kind has none. */
  private direct(modelId: string, what: 'embeddings' | 'rerank'): { engine: RemoteEngine; model: string; path: string } {
    const r = this.route(modelId);
    if (!r) throw new BackendError('failed', 'model_not_found', `No engine serves "${modelId}".`);
    const kind = r.engine.config.kind ?? 'openai';
    const path = DIRECT_CALLS[kind][what];
    if (!path) {
      throw new RequestRefusedError(
        'unsupported_capability',
        `Engines of kind "${kind}" (${ENGINE_PROFILES[kind].label}) serve no ${what === 'rerank' ? 'rerank route' : 'embeddings'}.`,
        'model',
      );
    }
    return { ...r, path };
  }

  async dispose(): Promise<void> {
    this.listeners.clear();
  }
}

/** A vector as the engine gave it, L2-normalized; a non-number entry makes it unusable (NaN, caught by the caller). */
function normalized(values: readonly unknown[]): Float32Array {
  const out = Float32Array.from(values, (v) => (typeof v === 'number' ? v : NaN));
  let sum = 0;
  for (const v of out) sum += v * v;
  const norm = Math.sqrt(sum);
  if (!Number.isFinite(norm)) return new Float32Array(0);
  if (norm > 0) for (let i = 0; i < out.length; i++) out[i] /= norm;
  return out;
}

/** The engine's usage for the whole request (prompt_tokens, else total_tokens) as per-item counts: all on the first. */
function usageSpread(json: unknown, count: number): number[] {
  const usage = isObject(json) && isObject(json.usage) ? json.usage : {};
  const total = [usage.prompt_tokens, usage.total_tokens].find((v) => Number.isSafeInteger(v) && (v as number) >= 0) as number | undefined;
  return Array.from({ length: count }, (_, i) => (i === 0 ? (total ?? 0) : 0));
}

/** Throws RequestRefusedError for the first field of `request` that engines of `kind` cannot honour. */
export function checkForKind(kind: EngineKind, request: GenerateRequest): void {
  const { label, request: can } = ENGINE_PROFILES[kind];
  const refuse = (what: string, param: string): never => {
    throw new RequestRefusedError('unsupported_capability', `${what} is not supported by engines of kind "${kind}" (${label}).`, param);
  };
  for (const f of SAMPLING_FIELDS) {
    if (request[f] !== undefined && !can.sampling[f]) refuse(`"${SAMPLING_PARAMS[f]}"`, SAMPLING_PARAMS[f]);
  }
  if (request.format && !can.formats.includes(request.format.type)) refuse(`"text.format" of type "${request.format.type}"`, 'text.format');
  if (request.topLogprobs !== undefined && !can.logprobs) refuse('Log-probabilities ("top_logprobs")', 'top_logprobs');
  if (request.tools?.length) {
    const tools = can.tools;
    if (!tools) return refuse('Function tools ("tools")', 'tools');
    const choice = request.toolChoice ?? 'auto';
    if (choice === 'required' && !tools.choices.includes('required')) refuse('tool_choice "required"', 'tool_choice');
    if (typeof choice === 'object' && !tools.choices.includes('named')) refuse('A named tool_choice', 'tool_choice');
    if (request.parallelToolCalls === false && !tools.parallel) refuse('"parallel_tool_calls": false', 'parallel_tool_calls');
  }
  const effort = request.reasoningEffort;
  if (effort !== undefined && !can.reasoningEffort?.values.includes(effort)) {
    refuse(
      can.reasoningEffort ? `"reasoning.effort" "${effort}" (it takes ${can.reasoningEffort.values.join(', ')})` : '"reasoning.effort"',
      'reasoning.effort',
    );
  }
}

/** The chat/completions fields for `request`'s sampling, format and log-probabilities, named as `kind` takes them. */
export function requestFields(kind: EngineKind, request: GenerateRequest): Record<string, unknown> {
  const can = ENGINE_PROFILES[kind].request;
  const out: Record<string, unknown> = {};
  if (request.temperature !== undefined) out.temperature = request.temperature;
  if (request.topP !== undefined) out.top_p = request.topP;
  for (const f of SAMPLING_FIELDS) {
    const name = can.sampling[f];
    if (request[f] !== undefined && name) out[name] = request[f];
  }
  const format = request.format;
  if (format?.type === 'json_object') out.response_format = can.jsonObject ?? { type: 'json_object' };
  else if (format?.type === 'json_schema') {
    const js: Record<string, unknown> = { name: format.name, schema: format.schema };
    if (format.strict !== undefined) js.strict = format.strict;
    if (format.description !== undefined) js.description = format.description;
    out.response_format = { type: 'json_schema', json_schema: js };
  }
  if (request.topLogprobs !== undefined && can.logprobs) {
    out.logprobs = true;
    out.top_logprobs = Math.max(request.topLogprobs, can.logprobs.minTop);
  }
  if (request.tools?.length && can.tools) {
    const choice = request.toolChoice ?? 'auto';
    const named = typeof choice === 'object' ? choice.name : undefined;
    const onlyTool = named !== undefined && can.tools.named === 'only-tool';
    const tools = onlyTool ? request.tools.filter((t) => t.name === named) : request.tools;
    out.tools = tools.map((t) => {
      const fn: Record<string, unknown> = { name: t.name };
      if (t.description !== undefined) fn.description = t.description;
      if (t.parameters !== undefined) fn.parameters = t.parameters;
      if (t.strict !== undefined) fn.strict = t.strict;
      return { type: 'function', function: fn };
    });
    if (named !== undefined) out.tool_choice = onlyTool ? 'required' : { type: 'function', function: { name: named } };
    else if (choice === 'required') out.tool_choice = 'required';
    if (request.parallelToolCalls !== undefined && can.tools.parallel) out.parallel_tool_calls = request.parallelToolCalls;
  }
  if (request.reasoningEffort !== undefined && can.reasoningEffort) out[can.reasoningEffort.field] = request.reasoningEffort;
  return out;
}

/** One chat/completions message as sent. */
export interface ChatWireMessage {
  role: string;
  content: string | null;
  tool_calls?: Array<{ id: string; type: 'function'; function: { name: string; arguments: string } }>;
  tool_call_id?: string;
}

/**
 * Instructions become a leading system message; `developer` is sent as `system` (not every engine knows it); an
 * assistant turn's calls go as `tool_calls` (content null when it said nothing else), a call's output as a `tool`
 * message with its `tool_call_id`.
 */
export function chatMessages(request: GenerateRequest): ChatWireMessage[] {
  const out: ChatWireMessage[] = [];
  if (request.instructions) out.push({ role: 'system', content: request.instructions });
  for (const m of request.messages as ChatMessage[]) {
    if (m.role === 'assistant' && m.toolCalls?.length) {
      out.push({
        role: 'assistant',
        content: m.content ? m.content : null,
        tool_calls: m.toolCalls.map((c) => ({ id: c.callId, type: 'function', function: { name: c.name, arguments: c.arguments } })),
      });
    } else if (m.role === 'tool') out.push({ role: 'tool', content: m.content, tool_call_id: m.callId ?? '' });
    else out.push({ role: m.role === 'developer' ? 'system' : m.role, content: m.content });
  }
  return out;
}
