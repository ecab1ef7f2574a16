// Output grammars for structured output: compiled once per (model, format) and kept, and the one node-llama-cpp
// internal this backend relies on, to bring a fresh grammar state to the end of text delivered before a restart.
// Invariants: a grammar admits only documents valid against the client's schema (jsonSchema.ts refuses the rest
// before anything is stored); every grammar ends the document with END_OF_JSON, which the generation loop treats as
// a stop string, so a JSON output ends by itself (and is never followed by an end-of-generation token it would have
// to sample past).

import type { Llama, LlamaGrammar, LlamaGrammarEvaluationState, Token } from 'node-llama-cpp' with { 'resolution-mode': 'import' };
import { BackendError, type OutputFormat } from '../../runtime/backend';
import { errorText } from '../../runtime/problems';
import { grammarCompiler } from './grammarCompiler';
import { JSON_OBJECT_SCHEMA, translateJsonSchema } from './jsonSchema';
import { grammarInternalsOf } from './nativeSeams';

/** node-llama-cpp's JSON-schema grammars require this after the document ("\n" × 4), then allow only newlines. */
export const END_OF_JSON = '\n\n\n\n';

/** Grammars kept per Llama (output formats; tool-call grammars keep their own): past either, the least recently used go. */
const MAX_GRAMMARS = 32;
/**
 * Grammar text kept per cache. llama.cpp's parsed rules take ~8 bytes per character of text (a 100 000-value enum:
 * 5 MB of text), so 8 MiB of text keeps the parsed grammars near 64 MiB, where unbounded they grew RSS by 1.3 GB.
 */
export const MAX_GRAMMAR_TEXT_BYTES = 8 * 1024 * 1024;

/** The node-llama-cpp schema a format is enforced with (throws RequestRefusedError for what cannot be). */
export function grammarSchemaFor(format: OutputFormat): Record<string, unknown> {
  return format.type === 'json_object' ? { ...JSON_OBJECT_SCHEMA } : translateJsonSchema(format.schema);
}

/** Parsed grammars by key, least recently used evicted past a count or a total of grammar text. */
export class GrammarLru {
  private readonly entries = new Map<string, { grammar: Promise<LlamaGrammar>; bytes: number }>();
  private bytes = 0;

  constructor(
    private readonly maxEntries = MAX_GRAMMARS,
    private readonly maxBytes = MAX_GRAMMAR_TEXT_BYTES,
  ) {}

  get size(): number {
    return this.entries.size;
  }

  get textBytes(): number {
    return this.bytes;
  }

  /** The grammar kept under `key`, else `build`'s (its text's length is what it weighs); a failed build is not kept. */
  get(key: string, build: () => Promise<{ grammar: LlamaGrammar; text: string }>): Promise<LlamaGrammar> {
    const kept = this.entries.get(key);
    if (kept) {
      this.entries.delete(key);
      this.entries.set(key, kept);
      return kept.grammar;
    }
    const entry = { grammar: Promise.resolve(undefined as unknown as LlamaGrammar), bytes: 0 };
    entry.grammar = build().then(
      ({ grammar, text }) => {
        if (this.entries.get(key) === entry) {
          entry.bytes = text.length;
          this.bytes += entry.bytes;
          this.evict(key);
        }
        return grammar;
      },
      (err: unknown) => {
        if (this.entries.get(key) === entry) this.entries.delete(key);
        throw err;
      },
    );
    this.entries.set(key, entry);
    this.evict(key);
    return entry.grammar;
  }

  private evict(keep: string): void {
    for (const [key, entry] of this.entries) {
      if (this.entries.size <= this.maxEntries && this.bytes <= this.maxBytes) return;
      if (key === keep) continue;
      this.entries.delete(key);
      this.bytes -= entry.bytes;
    }
  }
}

/** Parses grammar text on `llama`; a failure is the request's format, named so (it was checked at create). */
export async function parseGrammar(llama: Llama, text: Promise<string>): Promise<{ grammar: LlamaGrammar; text: string }> {
  let grammarText: string;
  try {
    grammarText = await text;
  } catch (err) {
    throw new BackendError('failed', 'invalid_json_schema', `The output format cannot be enforced: ${errorText(err)}`);
  }
  return { grammar: await llama.createGrammar({ grammar: grammarText }), text: grammarText };
}

export class GrammarCache {
  private readonly grammars = new GrammarLru();

  constructor(private readonly llama: Llama) {}

  get(format: OutputFormat): Promise<LlamaGrammar> {
    const schema = grammarSchemaFor(format);
    // node-llama-cpp writes the GBNF and jsonSchema.ts hardens it, in the grammar worker; llama.cpp parses it here.
    return this.grammars.get(JSON.stringify(schema), () => parseGrammar(this.llama, grammarCompiler().compile(schema)));
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
