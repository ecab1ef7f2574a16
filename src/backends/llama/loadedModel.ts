// A model as a load leaves it (modelLoad.ts) and generations use it (generation.ts): weights, context pool, template,
// compiled grammars and what the load measured. Also the prompt's tokens, as checkRequest, the pool's prefix reuse and
// the generation all see them (one tokenization, so a kept prefix matches the prompt a generation evaluates).

import type { ChatWrapper, Llama, LlamaModel, LlamaRankingContext, Token } from 'node-llama-cpp' with {
  'resolution-mode': 'import',
};
import type { GenerateRequest, ModelCapabilities, ModelHardware } from '../../runtime/backend';
import type { SequencePool } from './contextPool';
import type { EmbeddingLanes } from './embedding';
import type { GrammarCache } from './grammar';
import { constrainedFromStart } from './outputPlan';
import { availableFunctions, chatHistory, plainTextPrompt } from './prompt';
import { promptOpensThought, thoughtSyntaxOf } from './thoughtSyntax';

export interface LoadedModel {
  llama: Llama;
  model: LlamaModel;
  /** Output grammars compiled for this model. */
  grammars: GrammarCache;
  trainContextSize: number;
  /** The most bytes one token stands for (contextFit.ts, the prompt's floor); undefined without a vocabulary. */
  longestToken?: number;
  contextSize: number;
  hardware: ModelHardware;
  /** Template-driven prompts; undefined → plain-text prompt. */
  chatWrapper?: ChatWrapper;
  /** What its generation supports (capabilities.ts). */
  capabilities: ModelCapabilities;
  /** The model file's content fingerprint: which snapshots may be restored into it. */
  fingerprint: string;
  pool: SequencePool;
  /** Sequences of the pool: generations at once. */
  concurrency: number;
  /** Generations started and not ended (counted before their sequence is acquired): the keep-alive waits for 0. */
  active: number;
  /** The embedding lanes, once an embeddings request made them (embedding.ts); disposed with the model. */
  embedding?: Promise<EmbeddingLanes>;
  /** The ranking context, once a rerank request made it (ranking.ts); disposed with the model. */
  ranking?: Promise<LlamaRankingContext>;
}

/**
 * The prompt as tokens: through the chat template when the model has one, else the plain-text prompt after BOS. A
 * template that opens thoughts at the start of a response gets the response started inside its thought, as
 * node-llama-cpp's LlamaChat renders it (thoughtSyntax.ts), unless the output is constrained from its first token.
 */
export function promptTokens(loaded: LoadedModel, request: GenerateRequest): Token[] {
  const { model, chatWrapper } = loaded;
  if (chatWrapper) {
    const openThought = promptOpensThought(thoughtSyntaxOf(chatWrapper), constrainedFromStart(request));
    const { contextText } = chatWrapper.generateContextState({
      chatHistory: chatHistory(request.instructions, request.messages, { openThought }) as never,
      availableFunctions: availableFunctions(request.tools) as never,
    });
    return contextText.tokenize(model.tokenizer);
  }
  const bos = model.tokens.bos;
  const text = model.tokenize(plainTextPrompt(request.instructions, request.messages, request.tools));
  return bos !== null ? [bos, ...text] : text;
}
