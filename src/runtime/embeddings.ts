// Embeddings as direct calls: the backend embeds the inputs while the caller waits, and nothing is stored (no task,
// no events). Embeddings as durable work are the Batch API's (issue 41 item 2; docs/embeddings.md). What the runtime
// adds to the backend's `embed`: the model resolved as a task's would be, the backend's refusals as RuntimeErrors, and
// each principal's share of calls in flight (runtime/shares.ts).
import { RequestRefusedError, type EmbedInput, type EmbedResult, type ModelBackend } from './backend';
import { RuntimeError } from './errors';
import { DEFAULT_MAX_EMBEDDING_CALLS_PER_PRINCIPAL, LIMIT_NAMES, limitExceeded } from './shares';

export interface EmbedParams {
  principal: string;
  /** As a request names it; undefined = the default model. */
  model: string | undefined;
  inputs: EmbedInput[];
  signal: AbortSignal;
}

export interface EmbedOutcome extends EmbedResult {
  /** The model id that embedded. */
  model: string;
}

export class EmbeddingCalls {
  private readonly inFlight = new Map<string, number>();

  constructor(
    private readonly backend: ModelBackend,
    private readonly maxPerPrincipal = DEFAULT_MAX_EMBEDDING_CALLS_PER_PRINCIPAL,
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
    if (!this.backend.embed || this.backend.supportsEmbeddings?.(id) === false) {
      throw new RuntimeError('unsupported_capability', `The model "${id}" does not serve embeddings here.`, 'model');
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
