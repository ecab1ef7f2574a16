// Reranking with a loaded model's rank head (a reranker GGUF: pooling `rank` and a `cls` / `cls.output` head): one
// ranking context per loaded model, made on the first rerank request and disposed with the model, like the embedding
// context (embedding.ts) and bounded the same way. The query and each document are tokenized as llama.cpp server
// tokenizes them (llama.cpp's own tokenizer defaults, so a SentencePiece vocabulary gets its leading space) and
// evaluated as one input each, BOS query EOS [SEP] document EOS, or through the model's rerank template when its
// file has one (node-llama-cpp's layout). A score is a probability: node-llama-cpp's sigmoid of the head's logit
// (llama.cpp server answers the raw logit there), or the head's own softmax for Qwen3 rerankers (the same number as
// llama.cpp server's). Documents run one at a time on the context's one sequence; `signal` is checked between them.

import type { LlamaRankingContext, Token } from 'node-llama-cpp' with { 'resolution-mode': 'import' };
import { RequestRefusedError, type RerankResult } from '../../runtime/backend';
import { EMBEDDING_CONTEXT_MAX } from './embedding';
import type { LoadedModel } from './loadedModel';

/** Whether the model's file has a rank head node-llama-cpp can evaluate. */
export function canRank(loaded: LoadedModel): boolean {
  return loaded.model.fileInsights.supportsRanking;
}

/** The ranking context's size in tokens: bounded, and never more than the generation context. */
function rankingContextSize(loaded: LoadedModel): number {
  return Math.min(EMBEDDING_CONTEXT_MAX, loaded.contextSize, loaded.trainContextSize);
}

/** The ranking context of a loaded model, made once (a failed make is tried again on the next request). */
function rankingContext(loaded: LoadedModel): Promise<LlamaRankingContext> {
  if (!loaded.ranking) {
    const contextSize = rankingContextSize(loaded);
    const threads = loaded.hardware.promptThreads ?? loaded.hardware.threads;
    const made = loaded.model.createRankingContext({ contextSize, batchSize: contextSize, threads });
    loaded.ranking = made;
    made.catch(() => {
      if (loaded.ranking === made) loaded.ranking = undefined;
    });
  }
  return loaded.ranking;
}

/** Frees the model's ranking context, if one was made. */
export async function disposeRanking(loaded: LoadedModel): Promise<void> {
  const made = loaded.ranking;
  loaded.ranking = undefined;
  if (made) await (await made.catch(() => undefined))?.dispose().catch(() => undefined);
}

/** Scores each document against the query, in order; refuses a model without a rank head and a pair too long. */
export async function rankDocuments(
  loaded: LoadedModel,
  modelId: string,
  query: string,
  documents: string[],
  signal: AbortSignal,
): Promise<RerankResult> {
  signal.throwIfAborted();
  if (!canRank(loaded)) {
    throw new RequestRefusedError('unsupported_capability', `The model "${modelId}" has no rank head (it is not a reranker).`, 'model');
  }
  const context = await rankingContext(loaded);
  const size = context.contextSize;
  const tokenize = (text: string): Token[] => loaded.model.tokenize(text, false);
  const queryTokens = tokenize(query);
  const documentTokens = documents.map(tokenize);
  // All pairs are checked before any is evaluated.
  const tokens = documentTokens.map((doc, i) => {
    const length = context.calculateInputLength(queryTokens, doc);
    if (length >= size) {
      throw new RequestRefusedError(
        'context_length_exceeded',
        `The query and document ${i} take ${length} tokens; this model ranks at most ${size - 1} tokens per pair.`,
        `documents.${i}`,
      );
    }
    return length;
  });
  const scores: number[] = [];
  for (const doc of documentTokens) {
    signal.throwIfAborted();
    scores.push(await context.rank(queryTokens, doc));
  }
  return { scores, tokens };
}
