// Embeddings as direct calls: the backend embeds the inputs while the caller waits, and nothing is stored (no task,
// no events). Embeddings as durable work are the Batch API's (issue 41 item 2; docs/embeddings.md). What the runtime
// adds to the backend's `embed`: the model resolved as a task's would be, the backend's refusals as RuntimeErrors, and
// each principal's share of calls in flight (runtime/shares.ts), a `dimensions` other than the model's refused before
// any work when the backend lists the model's embedding size, and each call's end told to the metrics.
import { RequestRefusedError, type EmbedInput, type EmbedResult, type ModelBackend } from './backend';
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

export class EmbeddingCalls {
  private readonly inFlight = new Map<string, number>();

  constructor(
    private readonly backend: ModelBackend,
    private readonly maxPerPrincipal = DEFAULT_MAX_EMBEDDING_CALLS_PER_PRINCIPAL,
    private readonly observe: EmbeddingCallObserver = () => {},
  ) {}

  async embed(p: EmbedParams): Promise<EmbedOutcome> {
    const id = this.backend.resolveModel(p.model);
    if (id === undefined) {
      throw new RuntimeError(
        'model_not_found',
        p.model === undefined ? 'No default model is available.' : `The model "${p.model}" is not available.`,
        'model',
      );
    }
    try {
      const result = await this.embedOn(id, p);
      this.observe(id, { inputs: result.vectors.length, tokens: result.tokens.reduce((a, b) => a + b, 0) });
      return result;
    } catch (e) {
      this.observe(id, 'failed');
      throw e;
    }
  }

  private async embedOn(id: string, p: EmbedParams): Promise<EmbedOutcome> {
    if (!this.backend.embed || this.backend.supportsEmbeddings?.(id) === false) {
      throw new RuntimeError('unsupported_capability', `The model "${id}" does not serve embeddings here.`, 'model');
    }
    const known = this.backend.listModels().find((m) => m.id === id)?.embeddingDimensions;
    if (p.dimensions !== undefined && typeof known === 'number' && p.dimensions !== known) {
      throw new RuntimeError(
        'unsupported_capability',
        `The model "${id}" gives ${known}-dimensional embeddings; other dimensions are not supported.`,
        'dimensions',
      );
    }
    const current = this.inFlight.get(p.principal) ?? 0;
    if (current >= this.maxPerPrincipal) {
      throw limitExceeded(
        { name: LIMIT_NAMES.embeddingCalls, max: this.maxPerPrincipal, current, unit: 'requests' },
        `Too many embeddings calls in flight for this client: ${current} of at most ${this.maxPerPrincipal}; wait for one to end`,
      );
    }
    this.inFlight.set(p.principal, current + 1);
    try {
      const result = await this.backend.embed(id, p.inputs, { signal: p.signal });
      return { model: id, ...result };
    } catch (e) {
      if (e instanceof RequestRefusedError) throw new RuntimeError(e.code, e.message, e.param ?? undefined);
      throw e;
    } finally {
      const left = (this.inFlight.get(p.principal) ?? 1) - 1;
      if (left > 0) this.inFlight.set(p.principal, left);
      else this.inFlight.delete(p.principal);
    }
  }
}
