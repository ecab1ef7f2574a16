// What a local model's generation supports, for GET /models `capabilities` and the VS Code provider's (which decide
// whether agent mode offers the model): computed from the file, never assumed. The rule (docs/lmsp.md, "Model
// capabilities"):
// - tools: the model is a chat model — a decoder, not an embedding model or a reranker (its header declares no
//   pooling and its architecture is not encoder-only). Then calls work on it: `required` and a named tool are forced
//   by our grammar over the call syntax (any vocabulary can spell it), and `auto` calls are parsed in the template's
//   call syntax, or the documented plain-text one for a model without a template (toolCalls.ts);
// - reasoning: a chat model whose template has a thought segment (thoughtSyntax.ts): reasoning items, and
//   `reasoning.effort` honoured. Once loaded, the chat wrapper node-llama-cpp resolved says; before (serve reads each
//   file's header at start), the template naming a known pair of thought delimiters says — resolving a wrapper
//   renders the template dozens of times (seconds on a loaded 2-core machine), which a start must not wait for.
// A model URI before its download has no header yet: nothing is known (the doors say false).

import type { ChatWrapper } from 'node-llama-cpp' with { 'resolution-mode': 'import' };
import type { ModelCapabilities } from '../../runtime/backend';
import { KNOWN_THOUGHT_DELIMITERS, thoughtSyntaxOf } from './thoughtSyntax';

/** Architectures llama.cpp runs as encoders only (no causal generation): embedding models. */
const ENCODER_ONLY_ARCHITECTURES: ReadonlySet<string> = new Set([
  'bert',
  'nomic-bert',
  'nomic-bert-moe',
  'jina-bert-v2',
  'neo-bert',
  'modern-bert',
  't5encoder',
]);

/** llama.cpp's LLAMA_POOLING_TYPE_NONE (and UNSPECIFIED, -1): the model's output is per token, as generation needs. */
const NO_POOLING = new Set([0, -1]);

/** The header fields the rule reads. */
export interface HeaderFacts {
  architecture: string | undefined;
  /** `<architecture>.pooling_type`, when the header has one. */
  poolingType: number | undefined;
  chatTemplate: string | undefined;
}

/** The facts from a GGUF header's metadata (node-llama-cpp's GgufFileInfo.metadata), read leniently. */
export function headerFacts(metadata: unknown): HeaderFacts {
  const m = (metadata ?? {}) as Record<string, Record<string, unknown> | undefined>;
  const architecture = typeof m.general?.['architecture'] === 'string' ? m.general['architecture'] : undefined;
  const pooling = architecture ? m[architecture]?.['pooling_type'] : undefined;
  const template = m.tokenizer?.['chat_template'];
  return {
    architecture,
    poolingType: typeof pooling === 'number' ? pooling : undefined,
    chatTemplate: typeof template === 'string' && template.trim() ? template : undefined,
  };
}

/** A decoder without pooling: it generates text. */
function isChatModel(facts: HeaderFacts): boolean {
  if (facts.architecture && ENCODER_ONLY_ARCHITECTURES.has(facts.architecture)) return false;
  return facts.poolingType === undefined || NO_POOLING.has(facts.poolingType);
}

/** Before a load: from the header alone (the template searched for known thought delimiters). */
export function headerCapabilities(facts: HeaderFacts): ModelCapabilities {
  const chat = isChatModel(facts);
  const template = facts.chatTemplate ?? '';
  const reasoning = chat && KNOWN_THOUGHT_DELIMITERS.some(([open, close]) => template.includes(open) && template.includes(close));
  return { tools: chat, reasoning };
}

/** Once loaded: the header, and the thought segment of the chat wrapper the template resolved to. */
export function loadedCapabilities(facts: HeaderFacts, chatWrapper: ChatWrapper | undefined): ModelCapabilities {
  const chat = isChatModel(facts);
  return { tools: chat, reasoning: chat && thoughtSyntaxOf(chatWrapper) !== undefined };
}
