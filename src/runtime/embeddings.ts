// Embeddings and reranking as direct calls: the backend embeds the inputs (or scores the documents) while the caller
// waits, and nothing is stored (no task, no events). Embeddings as durable work are the Batch API's (issue 41 item 2;
// docs/batches.md). What the runtime adds to the backend's `embed` / `rerank`: the model resolved as a task's would
// be, the backend's refusals as RuntimeErrors, each principal's share of calls in flight (runtime/shares.ts; one
// count for both kinds of call: both hold the same model while the client waits), a `dimensions` other than the
// model's refused before any work when the backend lists the model's embedding size, and each embeddings call's end
// told to the metrics.
import { RequestRefusedError, type EmbedInput, type EmbedResult, type ModelBackend, type RerankResult } from './backend';
import { RuntimeError } from './errors';
import { DEFAULT_MAX_EMBEDDING_CALLS_PER_PRINCIPAL, LIMIT_NAMES, limitExceeded } from './shares';

export interface EmbedParams {
  principal: string;
  /** As a request names it; undefined = the default model. */
  model: string | undefined;
  inputs: EmbedInput[];
  /** The vector length the caller asked for: refused (param `dimensions`) when the model's is known and differs. */
  dimensions?: number;
  signal: AbortSignal;
}

/** Told at the end of each call on a model served here: its vectors and tokens, or that it failed. */
export type EmbeddingCallObserver = (model: string, outcome: { inputs: number; tokens: number } | 'failed') => void;

export interface EmbedOutcome extends EmbedResult {
  /** The model id that embedded. */
  model: string;
}

export interface RerankParams {
  principal: string;
  /** As a request names it; undefined = the default model. */
  model: string | undefined;
  query: string;
  documents: string[];
  signal: AbortSignal;
}

export interface RerankOutcome extends RerankResult {
  /** The model id that ranked. */
  model: string;
}

export class EmbeddingCalls {
  private readonly inFlight = new Map<string, number>();

  constructor(
    private readonly backend: ModelBackend,
    private readonly maxPerPrincipal = DEFAULT_MAX_EMBEDDING_CALLS_PER_PRINCIPAL,
    private readonly observe: EmbeddingCallObserver = () => {},
  ) {}

  async embed(p: EmbedParams): Promise<EmbedOutcome> {
    const id = this.resolve(p.model);
    const backend = this.backend;
    if (!backend.embed || backend.supportsEmbeddings?.(id) === false) {
      throw new RuntimeError('unsupported_capability', `The model "${id}" does not serve embeddings here.`, 'model');
    }
    try {
      const known = backend.listModels().find((m) => m.id === id)?.embeddingDimensions;
      if (p.dimensions !== undefined && typeof known === 'number' && p.dimensions !== known) {
        throw new RuntimeError(
          'unsupported_capability',
          `The model "${id}" gives ${known}-dimensional embeddings; other dimensions are not supported.`,
          'dimensions',
        );
      }
      const result = await this.share(p.principal, () => backend.embed!(id, p.inputs, { signal: p.signal }));
      this.observe(id, { inputs: result.vectors.length, tokens: result.tokens.reduce((a, b) => a + b, 0) });
      return { model: id, ...result };
    } catch (e) {
      this.observe(id, 'failed');
      throw e;
    }
  }

  async rerank(p: RerankParams): Promise<RerankOutcome> {
    const id = this.resolve(p.model);
    const backend = this.backend;
    if (!backend.rerank || backend.supportsRerank?.(id) === false) {
      throw new RuntimeError('unsupported_capability', `The model "${id}" does not rerank here.`, 'model');
    }
    const result = await this.share(p.principal, () => backend.rerank!(id, p.query, p.documents, { signal: p.signal }));
    return { model: id, ...result };
  }

  private resolve(model: string | undefined): string {
    const id = this.backend.resolveModel(model);
    if (id === undefined) {
      throw new RuntimeError(
        'model_not_found',
        model === undefined ? 'No default model is available.' : `The model "${model}" is not available.`,
        'model',
      );
    }
    return id;
  }

  /** Runs `call` as one of the principal's calls in flight (refused beyond the cap); refusals as RuntimeErrors. */
  private async share<T>(principal: string, call: () => Promise<T>): Promise<T> {
    const current = this.inFlight.get(principal) ?? 0;
    if (current >= this.maxPerPrincipal) {
      throw limitExceeded(
        { name: LIMIT_NAMES.embeddingCalls, max: this.maxPerPrincipal, current, unit: 'requests' },
        `Too many embeddings and rerank calls in flight for this client: ${current} of at most ${this.maxPerPrincipal}; wait for one to end`,
      );
    }
    this.inFlight.set(principal, current + 1);
    try {
      return await call();
    } catch (e) {
      if (e instanceof RequestRefusedError) throw new RuntimeError(e.code, e.message, e.param ?? undefined);
      throw e;
    } finally {
      const left = (this.inFlight.get(principal) ?? 1) - 1;
      if (left > 0) this.inFlight.set(principal, left);
      else this.inFlight.delete(principal);
    }
  }
}
