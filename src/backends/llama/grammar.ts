// Output grammars for structured output: compiled once per (model, format) and kept, and the one node-llama-cpp
// internal this backend relies on, to bring a fresh grammar state to the end of text delivered before a restart.
// Invariants: a grammar admits only documents valid against the client's schema (jsonSchema.ts refuses the rest
// before anything is stored); every grammar ends the document with END_OF_JSON, which the generation loop treats as
// a stop string, so a JSON output ends by itself (and is never followed by an end-of-generation token it would have
// to sample past).

import type { Llama, LlamaGrammar, LlamaGrammarEvaluationState, Token } from 'node-llama-cpp' with { 'resolution-mode': 'import' };
import type { OutputFormat } from '../../runtime/backend';
import { hardenGrammar, JSON_OBJECT_SCHEMA, translateJsonSchema } from './jsonSchema';
import { grammarInternalsOf } from './nativeSeams';

/** node-llama-cpp's JSON-schema grammars require this after the document ("\n" × 4), then allow only newlines. */
export const END_OF_JSON = '\n\n\n\n';

/** Grammars kept per model; a new schema past this evicts the least recently used. */
const MAX_GRAMMARS = 32;

/** The node-llama-cpp schema a format is enforced with (throws RequestRefusedError for what cannot be). */
export function grammarSchemaFor(format: OutputFormat): Record<string, unknown> {
  return format.type === 'json_object' ? { ...JSON_OBJECT_SCHEMA } : translateJsonSchema(format.schema);
}

export class GrammarCache {
  private readonly grammars = new Map<string, Promise<LlamaGrammar>>();

  constructor(private readonly llama: Llama) {}

  get(format: OutputFormat): Promise<LlamaGrammar> {
    const schema = grammarSchemaFor(format);
    const key = JSON.stringify(schema);
    let grammar = this.grammars.get(key);
    if (grammar) {
      this.grammars.delete(key);
    } else {
      grammar = this.compile(schema);
      grammar.catch(() => this.grammars.delete(key));
      if (this.grammars.size >= MAX_GRAMMARS) this.grammars.delete(this.grammars.keys().next().value!);
    }
    this.grammars.set(key, grammar);
    return grammar;
  }

  private async compile(schema: Record<string, unknown>): Promise<LlamaGrammar> {
    // node-llama-cpp writes the GBNF; hardenGrammar narrows the rules that admit invalid documents.
    const generated = await this.llama.createGrammarForJsonSchema(schema as never);
    return this.llama.createGrammar({ grammar: hardenGrammar(generated.grammar) });
  }
}

/**
 * Advances `state` over `tokens` (text delivered before a restart), so sampling continues inside the grammar. Throws
 * when the text leaves the grammar (then the delivered text was not produced under this format).
 */
export function acceptDeliveredTokens(state: LlamaGrammarEvaluationState, tokens: readonly Token[]): void {
  const internals = grammarInternalsOf(state);
  if (!internals) throw new Error('this node-llama-cpp cannot resume inside a grammar (nativeSeams.ts: grammarState seams missing)');
  const { sampler, handle } = internals;
  for (const token of tokens) {
    // llama.cpp throws (a native exception) on a token the grammar rejects: check first.
    if (!sampler.canBeNextTokenForGrammarEvaluationState(handle, token)) {
      throw new Error('the delivered text does not fit the output format; cannot resume inside it');
    }
    sampler.acceptGrammarEvaluationStateToken(handle, token);
  }
}
