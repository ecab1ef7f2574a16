// A model as a load leaves it (modelLoad.ts) and generations use it (generation.ts): weights, context pool, template,
// compiled grammars and what the load measured. Also the prompt's tokens, as checkRequest, the pool's prefix reuse and
// the generation all see them (one tokenization, so a kept prefix matches the prompt a generation evaluates).

import type { ChatWrapper, Llama, LlamaModel, LlamaRankingContext, LlamaText, Token } from 'node-llama-cpp' with {
  'resolution-mode': 'import',
};
import type { GenerateRequest, ModelCapabilities, ModelHardware } from '../../runtime/backend';
import type { SequencePool } from './contextPool';
import { TOKEN_TYPE } from './demoModel';
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
      chatHistory: chatHistory(request.instructions, request.messages, { ...thoughtLayout(chatWrapper), openThought }) as never,
      availableFunctions: availableFunctions(request.tools) as never,
    });
    return templateTokens(model, contextText);
  }
  const bos = model.tokens.bos;
  const text = textTokens(model, plainTextPrompt(request.instructions, request.messages, request.tools));
  return bos !== null ? [bos, ...text] : text;
}

/**
 * Where earlier reasoning goes in this wrapper's prompts: nowhere without a thought segment; a `</think>` thought
 * (Qwen 3, DeepSeek-R1) is followed by a blank line before the turn's text or calls, as their templates write it.
 */
function thoughtLayout(chatWrapper: ChatWrapper): { keep: boolean; after?: string } {
  const thought = thoughtSyntaxOf(chatWrapper);
  if (!thought) return { keep: false };
  return thought.suffix.endsWith('</think>') ? { keep: true, after: '\n\n' } : { keep: true };
}

/**
 * A rendered template's tokens as llama.cpp tokenizes a rendered prompt: the text between control tokens is tokenized
 * as one piece (node-llama-cpp tokenizes each part of the rendering apart, so a merge across a part's edge, such as
 * " <" in " <tools>", is lost: 3 tokens more than llama-server on Qwen 3's tool prompt). Control tokens come only from
 * the template's own markup; message text is tokenized as text (textTokens), so a `<|im_end|>` a user writes cannot
 * end the turn (llama-server reads it as the control token; docs/model-families.md).
 */
function templateTokens(model: LlamaModel, text: LlamaText): Token[] {
  const out: Token[] = [];
  let run = '';
  const flush = () => {
    if (run) out.push(...textTokens(model, run));
    run = '';
  };
  for (const value of text.values) {
    if (typeof value === 'string') {
      run += value;
      continue;
    }
    const part = value.toJSON() as { type: string; value: string };
    if (part.type !== 'specialTokensText') {
      flush();
      out.push(...value.tokenize(model.tokenizer));
      continue;
    }
    // The template's markup: its control tokens split the prompt; the text around them joins the run.
    let cursor = 0;
    for (const token of model.tokenize(part.value, true)) {
      if (!model.isSpecialToken(token) && !isMarkupToken(model, token)) continue;
      const tokenText = model.detokenize([token], true);
      const at = part.value.indexOf(tokenText, cursor);
      if (at < 0) continue;
      run += part.value.slice(cursor, at);
      flush();
      out.push(token);
      cursor = at + tokenText.length;
    }
    run += part.value.slice(cursor);
  }
  flush();
  return out;
}

/**
 * Text as text tokens: no token of the result is markup (isMarkupToken). Reading special tokens as text is not enough
 * on every vocabulary: llama.cpp loads gpt-oss's `<|start|>`, `<|channel|>`, `<|message|>`, `<|constrain|>` and
 * `<|end|>` as user-defined and matches them in any text, so a user could write Harmony turns into a prompt. Where
 * such a token comes out, the text is cut inside each occurrence of its spelling, after the delimiter's opening
 * punctuation (`<|` | `end|>`), and the pieces tokenized apart: the pre-tokenizers of these families split there
 * anyway (punctuation, then letters), so the pieces are the tokens the text has without the delimiter match. Text
 * without such tokens (every other family) is tokenized once.
 */
export function textTokens(model: LlamaModel, text: string): Token[] {
  const tokens = model.tokenize(text, false);
  const spellings = new Set<string>();
  for (const token of tokens) if (isMarkupToken(model, token)) spellings.add(model.detokenize([token], true));
  if (spellings.size === 0) return tokens;
  // No piece holds a whole occurrence of these spellings, so each is tokenized at most once more per other spelling.
  return cutInside(text, spellings).flatMap((piece) => textTokens(model, piece));
}

/** `text` cut inside every occurrence of each spelling, just after its opening punctuation. */
function cutInside(text: string, spellings: ReadonlySet<string>): string[] {
  const cuts = new Set<number>();
  for (const spelling of spellings) {
    const open = /^[^\p{L}\p{N}]*/u.exec(spelling)![0].length;
    const into = Math.min(Math.max(open, 1), spelling.length - 1);
    for (let at = text.indexOf(spelling); at >= 0; at = text.indexOf(spelling, at + 1)) cuts.add(at + into);
  }
  const at = [0, ...[...cuts].sort((a, b) => a - b), text.length];
  return at
    .slice(1)
    .map((end, i) => text.slice(at[i], end))
    .filter(Boolean);
}

const markupMemo = new WeakMap<LlamaModel, Map<Token, boolean>>();

/**
 * Markup, not text: a control token as llama.cpp loaded it, or one the file itself declares control that llama.cpp
 * loaded as user-defined and so matches in any text (gpt-oss's `<|start|>`, `<|channel|>`, `<|message|>`, `<|end|>`).
 * User-defined tokens the file declares so (Qwen 3's `<tool_call>`, `<think>`) are text as llama.cpp reads them.
 */
function isMarkupToken(model: LlamaModel, token: Token): boolean {
  let memo = markupMemo.get(model);
  if (!memo) markupMemo.set(model, (memo = new Map()));
  let markup = memo.get(token);
  if (markup === undefined) {
    const declared = model.fileInfo.metadata?.tokenizer?.ggml?.token_type?.[token];
    markup = model.getTokenAttributes(token).control || declared === TOKEN_TYPE.control;
    memo.set(token, markup);
  }
  return markup;
}
