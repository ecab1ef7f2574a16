// Embeddings of a loaded model: one embedding context per loaded model, made on the first embeddings request (not at
// load: most models never embed) and disposed with the model. Its size is bounded (EMBEDDING_CONTEXT_MAX tokens, and
// never more than the model's generation context), so that it costs a fraction of what the tasks' context does. The
// model's pooling comes from its file (llama.cpp's; a model without one gives its last token's embedding). Inputs of
// one context run one at a time (node-llama-cpp locks its one sequence); vectors are L2-normalized, as OpenAI's and
// llama.cpp server's /v1/embeddings give them.

import type { LlamaEmbeddingContext, Token } from 'node-llama-cpp' with { 'resolution-mode': 'import' };
import { RequestRefusedError, type EmbedInput, type EmbedResult } from '../../runtime/backend';
import type { LoadedModel } from './loadedModel';

/** The most tokens one input may take (the embedding context's size when the model allows that much). */
export const EMBEDDING_CONTEXT_MAX = 8192;

/** The embedding context of a loaded model, made once (a failed make is tried again on the next request). */
export function embeddingContext(loaded: LoadedModel): Promise<LlamaEmbeddingContext> {
  if (!loaded.embedding) {
    const contextSize = embeddingContextSize(loaded);
    const threads = loaded.hardware.promptThreads ?? loaded.hardware.threads;
    const made = loaded.model.createEmbeddingContext({ contextSize, batchSize: contextSize, threads });
    loaded.embedding = made;
    made.catch(() => {
      if (loaded.embedding === made) loaded.embedding = undefined;
    });
  }
  return loaded.embedding;
}

/** The embedding context's size in tokens: bounded, and never more than the generation context. */
function embeddingContextSize(loaded: LoadedModel): number {
  return Math.min(EMBEDDING_CONTEXT_MAX, loaded.contextSize, loaded.trainContextSize);
}

/** Frees the model's embedding context, if one was made. */
export async function disposeEmbedding(loaded: LoadedModel): Promise<void> {
  const made = loaded.embedding;
  loaded.embedding = undefined;
  if (made) await (await made.catch(() => undefined))?.dispose().catch(() => undefined);
}

/** The model's vocabulary size, from its file (undefined without a vocabulary there). */
function vocabularySize(loaded: LoadedModel): number | undefined {
  const tokens = loaded.model.fileInfo.metadata.tokenizer?.ggml?.tokens as readonly unknown[] | undefined;
  return tokens?.length;
}

/**
 * Refuses what the model cannot embed before anything is evaluated: a token id outside its vocabulary, an input too
 * long. Returns each input's length as evaluated (BOS/EOS the model adds included). Token arrays are passed as copies
 * here and below: node-llama-cpp adds BOS/EOS to the array it is given.
 */
function checkInputs(loaded: LoadedModel, context: LlamaEmbeddingContext, inputs: EmbedInput[]): number[] {
  const vocab = vocabularySize(loaded);
  const size = embeddingContextSize(loaded);
  return inputs.map((input, i) => {
    const param = inputs.length === 1 ? 'input' : `input.${i}`;
    if (typeof input !== 'string' && vocab !== undefined) {
      const bad = input.findIndex((t) => t >= vocab);
      if (bad >= 0)
        throw new RequestRefusedError('invalid_request', `Token id ${input[bad]} is outside the model's vocabulary (${vocab} tokens).`, param);
    }
    const length = context.calculateInputLength(typeof input === 'string' ? input : ([...input] as Token[]));
    if (length >= size) {
      throw new RequestRefusedError(
        'context_length_exceeded',
        `Input ${i} takes ${length} tokens; this model embeds at most ${size - 1} tokens per input.`,
        param,
      );
    }
    return length;
  });
}

function normalized(vector: readonly number[]): Float32Array {
  let sum = 0;
  for (const v of vector) sum += v * v;
  const norm = Math.sqrt(sum);
  const out = new Float32Array(vector.length);
  for (let i = 0; i < vector.length; i++) out[i] = norm > 0 ? vector[i] / norm : 0;
  return out;
}

/** Embeds the inputs in order on the model's embedding context; checks `signal` between inputs. */
export async function embedInputs(loaded: LoadedModel, inputs: EmbedInput[], signal: AbortSignal): Promise<EmbedResult> {
  signal.throwIfAborted();
  const context = await embeddingContext(loaded);
  const tokens = checkInputs(loaded, context, inputs);
  const vectors: Float32Array[] = [];
  for (const input of inputs) {
    signal.throwIfAborted();
    const embedding = await context.getEmbeddingFor(typeof input === 'string' ? input : ([...input] as Token[]));
    vectors.push(normalized(embedding.vector));
  }
  return { vectors, tokens, dimensions: loaded.model.embeddingVectorSize };
}
