// ModelBackend over named remote engines (OpenAI-compatible servers: llama.cpp server, vLLM, Ollama, LM Studio).
// Model ids are `NAME/model-id`. Tasks stay in our store; generation runs on the engine. Nothing is loaded here:
// a model is "loaded" while its engine has a healthy endpoint, and load() probes the engine (the runtime shows the
// task `loading` meanwhile; an unreachable engine sends it back to `queued` with a status message).
// on_restart "resume" is offered per engine (quirks.ts): by default for the kinds that continue a final assistant
// message (llama.cpp server, vLLM), for an unknown OpenAI-compatible server only when configured, never for Ollama
// and LM Studio. The delivered text is sent back as that message and the engine generates on, in the same output
// item. Elsewhere "resume" is refused at create with unsupported_capability. `retry` runs tasks again on a healthy
// endpoint.
import {
  BackendError,
  type ChatMessage,
  type GenerateOptions,
  type GenerateRequest,
  type GenerateResult,
  type LoadOptions,
  type ModelBackend,
  type ModelInfo,
} from '../../runtime/backend';
import { checkEngineConfig, type EngineConfig } from './config';
import { RemoteEngine, type EngineRuntimeOptions } from './engine';
import { CONTINUE_FINAL_MESSAGE, resumeOffered } from './quirks';

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

  isLoaded(modelId: string): boolean {
    const r = this.route(modelId);
    return !!r && r.engine.up.some((e) => !e.models || e.models.some((m) => m.id === r.model));
  }

  async load(modelId: string, options: LoadOptions = {}): Promise<void> {
    const r = this.route(modelId);
    if (!r) throw new BackendError('failed', 'model_not_found', `No engine serves "${modelId}".`);
    if (options.signal?.aborted) throw new Error('aborted');
    await r.engine.probeDue();
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
      // The engine continues the text clients already have; only what follows it is streamed (and emitted).
      messages.push({ role: 'assistant', content: resume.text });
      Object.assign(body, CONTINUE_FINAL_MESSAGE);
    }
    if (request.maxOutputTokens !== undefined) body.max_tokens = Math.max(1, request.maxOutputTokens - before);
    if (request.temperature !== undefined) body.temperature = request.temperature;
    if (request.topP !== undefined) body.top_p = request.topP;
    if (request.seed !== undefined) body.seed = request.seed;
    let counted = 0;
    try {
      const result = await r.engine.chat(r.model, body, options.signal, (text) => {
        counted++;
        options.onText(text, 1);
      });
      return {
        finishReason: result.finishReason,
        inputTokens: result.inputTokens ?? 0,
        outputTokens: before + (result.outputTokens ?? counted),
      };
    } catch (e) {
      if (options.signal.aborted) return { finishReason: 'aborted', inputTokens: 0, outputTokens: before + counted };
      throw e;
    }
  }

  async dispose(): Promise<void> {
    this.listeners.clear();
  }
}

/** Instructions become a leading system message; `developer` is sent as `system` (not every engine knows it). */
export function chatMessages(request: GenerateRequest): Array<{ role: string; content: string }> {
  const out: Array<{ role: string; content: string }> = [];
  if (request.instructions) out.push({ role: 'system', content: request.instructions });
  for (const m of request.messages as ChatMessage[]) out.push({ role: m.role === 'developer' ? 'system' : m.role, content: m.content });
  return out;
}
