// The one backend the runtime sees when models come from more than one place: the in-process llama backend and the
// remote engines. Each model id belongs to the first backend that resolves it (remote ids are `NAME/model-id`, local
// ids never contain "/"), and every call for it goes there; the default model is the first backend's default.
import type { RestartPolicy } from '../runtime/task';
import {
  RequestRefusedError,
  type EmbedInput,
  type EmbedResult,
  type RerankResult,
  type GenerateOptions,
  type GenerateRequest,
  type GenerateResult,
  type LoadOptions,
  type ModelBackend,
  type ModelInfo,
} from '../runtime/backend';

export class CompositeBackend implements ModelBackend {
  readonly name: string;

  constructor(private readonly backends: ModelBackend[]) {
    this.name = backends.map((b) => b.name).join('+');
  }

  private owner(modelId: string): ModelBackend | undefined {
    return this.backends.find((b) => b.resolveModel(modelId) === modelId);
  }

  private must(modelId: string): ModelBackend {
    const b = this.owner(modelId);
    if (!b) throw new Error(`unknown model "${modelId}"`);
    return b;
  }

  listModels(): ModelInfo[] {
    return this.backends.flatMap((b) => b.listModels());
  }

  countPromptTokens(request: GenerateRequest): number | undefined {
    return this.owner(request.model)?.countPromptTokens?.(request);
  }

  countTokens(modelId: string, text: string): number | undefined {
    return this.owner(modelId)?.countTokens?.(modelId, text);
  }

  resolveModel(model: string | undefined): string | undefined {
    for (const b of this.backends) {
      const id = b.resolveModel(model);
      if (id !== undefined) return id;
    }
    return undefined;
  }

  async prepare(): Promise<void> {
    await Promise.all(this.backends.map((b) => b.prepare?.()));
  }

  checkRequest(request: GenerateRequest, task: { onRestart: RestartPolicy }): void {
    this.owner(request.model)?.checkRequest?.(request, task);
  }

  supportsResume(modelId?: string): boolean {
    if (modelId === undefined) return this.backends.some((b) => b.supportsResume());
    return this.owner(modelId)?.supportsResume(modelId) ?? false;
  }

  concurrency(modelId: string): { group: string; limit: number } | undefined {
    return this.owner(modelId)?.concurrency?.(modelId);
  }

  onCapacityChange(listener: () => void): void {
    for (const b of this.backends) b.onCapacityChange?.(listener);
  }

  isLoaded(modelId: string): boolean {
    return this.owner(modelId)?.isLoaded(modelId) ?? false;
  }

  load(modelId: string, options?: LoadOptions): Promise<void> {
    return this.must(modelId).load(modelId, options);
  }

  generate(request: GenerateRequest, options: GenerateOptions): Promise<GenerateResult> {
    return this.must(request.model).generate(request, options);
  }

  supportsEmbeddings(modelId: string): boolean {
    const b = this.owner(modelId);
    return !!b?.embed && (b.supportsEmbeddings?.(modelId) ?? true);
  }

  embed(modelId: string, inputs: EmbedInput[], options: { signal: AbortSignal }): Promise<EmbedResult> {
    const b = this.must(modelId);
    if (!b.embed || b.supportsEmbeddings?.(modelId) === false) {
      return Promise.reject(new RequestRefusedError('unsupported_capability', `The model "${modelId}" does not serve embeddings here.`, 'model'));
    }
    return b.embed(modelId, inputs, options);
  }

  supportsRerank(modelId: string): boolean {
    const b = this.owner(modelId);
    return !!b?.rerank && (b.supportsRerank?.(modelId) ?? true);
  }

  rerank(modelId: string, query: string, documents: string[], options: { signal: AbortSignal }): Promise<RerankResult> {
    const b = this.must(modelId);
    if (!b.rerank || b.supportsRerank?.(modelId) === false) {
      return Promise.reject(new RequestRefusedError('unsupported_capability', `The model "${modelId}" does not rerank here.`, 'model'));
    }
    return b.rerank(modelId, query, documents, options);
  }

  async dispose(): Promise<void> {
    await Promise.allSettled(this.backends.map((b) => b.dispose()));
  }
}
