// Speculative decoding through node-llama-cpp's token predictors: prompt lookup (`contextLookup`, drafts taken from
// where the last tokens occurred before in the prompt or the output) and a draft model (DraftSequenceTokenPredictor on a sequence of a
// smaller model's context). Several drafted tokens are evaluated in one decode with the real next token; the target
// model's own sample at every drafted position decides, so a draft only saves decodes, it never changes a token.
//
// A predictor belongs to a sequence (node-llama-cpp takes it when the sequence is made), and a sequence of the pool
// (contextPool.ts) serves generations one after another, so each sequence gets one `SwitchingPredictor`: it holds the
// real predictor and is turned on per generation (`begin`) only where speculation is exact, and off otherwise (it
// then drafts nothing and evaluation is one token per step as before). Where it is not exact, and so off:
// - penalties: llama.cpp's penalty window would not contain the tokens drafted ahead in the same decode;
// - `tool_choice: "auto"` and thought budgets: their grammar switches on text the generation loop sees token by token.
// The UTF-8 guard's token bias (utf8Guard.ts) is per token too; it is told each draft (`onDrafts`) and biases the
// k-th position of a decode as if the k drafted tokens before it were accepted — the only case in which that
// position's sample is kept. Grammars are node-llama-cpp's own business (it clones the state per drafted position).
//
// `auto` (prompt lookup's default) drafts while drafts are accepted and backs off after a refused one (skipping
// 1, 2, 4 … up to MAX_SKIP decodes), so a prompt the output does not copy costs little; `on` always drafts. Figures:
// docs/speculative-decoding.md.

import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Llama, LlamaContext, LlamaContextSequence, LlamaModel, SequenceEvaluateOptions, Token, TokenPredictor } from 'node-llama-cpp' with {
  'resolution-mode': 'import',
};
import type { NodeLlamaCpp } from './nodeLlamaCpp';

/** Prompt lookup: `auto` drafts with back-off, `on` always drafts, `off` never. */
export type PromptLookupChoice = 'auto' | 'on' | 'off';
export const PROMPT_LOOKUP_CHOICES: readonly PromptLookupChoice[] = ['auto', 'on', 'off'];
/** Prompt lookup when no setting names it (docs/speculative-decoding.md: what it measured). */
export const DEFAULT_PROMPT_LOOKUP: PromptLookupChoice = 'auto';

/**
 * `auto` turns prompt lookup on for a model whose one-token decode rate (its thread calibration at load) is below
 * this (its sequences get no predictor otherwise): its decode outweighs what node-llama-cpp's speculative path adds to every token. Measured side by
 * side (bench `speculative`, docs/speculative-decoding.md): the demo model (~1 000 tokens/s on this machine) ran at
 * 0.82–0.88× with lookup even where the output copied (an extra sampling call per draft costs what a decode saves);
 * an 86 MB model (~55–140 tokens/s) at 1.6–1.85× on copying output and 1.06–1.09× where nothing was accepted.
 */
export const LOOKUP_PAYS_BELOW_TOKENS_PER_S = 400;

/** Whether prompt lookup pays on a model decoding at `tokensPerSecond` (undefined: not measured, so no). */
export function lookupPays(tokensPerSecond: number | undefined): boolean {
  return tokensPerSecond !== undefined && tokensPerSecond > 0 && tokensPerSecond < LOOKUP_PAYS_BELOW_TOKENS_PER_S;
}

/**
 * Tokens drafted per decode. One: node-llama-cpp 3.21.1 keeps at most one drafted token per decode — in
 * `_speculativeEvaluate` a draft after the first is compared with `validatedTokens.at(-1)`, an array nothing fills, so
 * it is always refused (measured: 8 drafts per decode on a loop the output repeats exactly, 1 of 8 accepted). More
 * drafts cost evaluation and can never be kept; one draft at most doubles the tokens per decode.
 */
export const LOOKUP_DRAFT_TOKENS = 1;
/** The most decodes `auto` lets go by without drafting after refused drafts. */
export const MAX_SKIP = 16;
/** Tokens a draft model drafts per decode, at most (LOOKUP_DRAFT_TOKENS says why one). */
export const DRAFT_MODEL_TOKENS = 1;

/** Counts of one generation: tokens evaluated as drafts, and of those the ones the model itself produced. */
export interface SpeculationStats {
  drafted: number;
  accepted: number;
}

/** One generation's use of its sequence's predictor (`begin` … `end`). */
export interface SpeculationRun {
  /** Drafted tokens validated and not yet delivered: they are in the sequence's state ahead of the output. */
  ahead(): number;
  /** The counts since `begin`; stops drafting for this generation. */
  end(): SpeculationStats;
}

export interface SpeculationOptions {
  /** The prompt's tokens: where prompt lookup looks. */
  inputTokens: readonly Token[];
  /** Each decode's drafts, before it is sampled (the UTF-8 guard follows them). */
  onDrafts?: (drafts: readonly Token[]) => void;
}

/** A sequence's predictor that a generation turns on and off (header). */
export interface SwitchingPredictor {
  readonly kind: 'lookup' | 'draft';
  begin(sequence: LlamaContextSequence, options: SpeculationOptions): SpeculationRun;
}

const switching = new WeakSet<object>();

/** The sequence's switching predictor, when speculation is configured for its model. */
export function switchingPredictorOf(sequence: LlamaContextSequence): SwitchingPredictor | undefined {
  const p = sequence.tokenPredictor;
  return p && switching.has(p) ? (p as unknown as SwitchingPredictor) : undefined;
}

/**
 * A predictor for one sequence that drafts through `inner` only between `begin` and `end` (header). `backOff`: skip
 * decodes after refused drafts (prompt lookup's `auto`).
 */
export function switchingPredictor(nlc: NodeLlamaCpp, inner: TokenPredictor, kind: 'lookup' | 'draft', backOff: boolean): TokenPredictor {
  class Switching extends nlc.TokenPredictor implements SwitchingPredictor {
    readonly kind = kind;
    private active = false;
    private onDrafts: ((drafts: readonly Token[]) => void) | undefined;
    private target: LlamaContextSequence | undefined;
    private skip = 0;
    private misses = 0;
    private lastRefuted = 0;
    private lastValidated = 0;

    begin(sequence: LlamaContextSequence, options: SpeculationOptions): SpeculationRun {
      this.active = true;
      this.onDrafts = options.onDrafts;
      this.target = sequence;
      this.skip = 0;
      this.misses = 0;
      ({ refuted: this.lastRefuted, validated: this.lastValidated } = sequence.tokenPredictions);
      inner.updateInputTokens(options.inputTokens.slice());
      const start = sequence.tokenPredictions;
      const counts = (): SpeculationStats => {
        const now = sequence.tokenPredictions;
        const accepted = now.validated - start.validated;
        return { drafted: accepted + now.refuted - start.refuted, accepted };
      };
      return {
        ahead: () => sequence.tokenPredictions.unused - start.unused,
        end: () => {
          this.active = false;
          this.onDrafts = undefined;
          return counts();
        },
      };
    }

    reset(params: { targetSequence: LlamaContextSequence; stateTokens: Token[]; evaluateOptions: Readonly<SequenceEvaluateOptions> }) {
      // Off for this generation: nothing to follow (a draft model would evaluate the whole prompt for nothing). Every
      // generation's evaluation starts with a reset, so an active one always starts from its own state.
      if (!this.active) return;
      // The draft model samples without the target's per-token callbacks (they follow the target's own tokens).
      const { tokenBias: _bias, repeatPenalty: _penalty, ...evaluateOptions } = params.evaluateOptions;
      return inner.reset({ ...params, evaluateOptions });
    }

    pushTokens(tokens: Token[]): void {
      if (this.active) inner.pushTokens(tokens);
    }

    predictTokens(): Token[] | Promise<Token[]> {
      if (!this.active) return this.drafts([]);
      if (backOff && this.target) {
        const { refuted, validated } = this.target.tokenPredictions;
        if (validated > this.lastValidated) this.misses = 0;
        else if (refuted > this.lastRefuted) this.skip = Math.min(MAX_SKIP, 2 ** this.misses++);
        this.lastRefuted = refuted;
        this.lastValidated = validated;
        if (this.skip > 0) {
          this.skip--;
          return this.drafts([]);
        }
      }
      // Synchronous where the inner predictor is (prompt lookup): no promise turn per token.
      const predicted = inner.predictTokens();
      return predicted instanceof Promise ? predicted.then((t) => this.drafts(t)) : this.drafts(predicted);
    }

    private drafts(tokens: Token[]): Token[] {
      this.onDrafts?.(tokens);
      return tokens;
    }

    override stop(untilPredictionsExhausted?: boolean) {
      return inner.stop(untilPredictionsExhausted);
    }

    override updateInputTokens(tokens: Token[]): void {
      inner.updateInputTokens(tokens);
    }

    override dispose() {
      return inner.dispose();
    }
  }
  const p = new Switching();
  switching.add(p);
  return p;
}

/**
 * Prompt lookup over the whole context: the last N tokens (N = LOOKUP_NGRAMS, longest first) are looked up where they
 * occurred before, in the prompt or the output so far, and what followed them there is the draft — continued into the
 * draft itself when it runs into the present (a loop drafts itself). node-llama-cpp's InputLookupTokenPredictor looks
 * in the prompt only, so output that repeats itself (a list, a loop, code that repeats a line) drafted nothing.
 */
export function contextLookup(nlc: NodeLlamaCpp, draftTokens = LOOKUP_DRAFT_TOKENS): TokenPredictor {
  class ContextLookup extends nlc.TokenPredictor {
    private tokens: Token[] = [];
    /** Per n-gram length: the n-gram ending before index i → i (the latest such i). */
    private readonly seen = LOOKUP_NGRAMS.map(() => new Map<string, number>());

    reset({ stateTokens }: { stateTokens: Token[] }): void {
      this.tokens = [];
      for (const m of this.seen) m.clear();
      this.pushTokens(stateTokens);
    }

    pushTokens(tokens: Token[]): void {
      for (const t of tokens) {
        const i = this.tokens.length;
        LOOKUP_NGRAMS.forEach((n, k) => {
          if (i >= n) this.seen[k]!.set(this.tokens.slice(i - n, i).join(','), i);
        });
        this.tokens.push(t);
      }
    }

    predictTokens(): Token[] {
      const L = this.tokens.length;
      for (let k = 0; k < LOOKUP_NGRAMS.length; k++) {
        const n = LOOKUP_NGRAMS[k]!;
        if (L < n) continue;
        const j = this.seen[k]!.get(this.tokens.slice(L - n).join(','));
        if (j === undefined) continue;
        const draft: Token[] = [];
        for (let p = j; draft.length < draftTokens; p++) draft.push(p < L ? this.tokens[p]! : draft[p - L]!);
        return draft;
      }
      return [];
    }

    override dispose(): void {
      this.tokens = [];
      for (const m of this.seen) m.clear();
    }
  }
  return new ContextLookup();
}

/** N-gram lengths prompt lookup matches, longest first. */
export const LOOKUP_NGRAMS = [3, 2];

/**
 * A prompt-lookup predictor for a new sequence (modelLoad.ts gives one only where lookup pays, for `auto`); `auto`
 * backs off after refused drafts, `on` always drafts.
 */
export function lookupPredictor(nlc: NodeLlamaCpp, choice: 'auto' | 'on'): TokenPredictor {
  return switchingPredictor(nlc, contextLookup(nlc), 'lookup', choice === 'auto');
}

/** A draft-model predictor for a new sequence, drafting on `draftSequence` (a sequence of the draft model's context). */
export function draftPredictor(nlc: NodeLlamaCpp, draftSequence: LlamaContextSequence): TokenPredictor {
  // The target waits for the draft's token (minTokens), whatever its confidence: one draft per decode is all that can
  // be kept, and a refused one costs one more position in a decode the target makes anyway.
  const inner = new nlc.DraftSequenceTokenPredictor(draftSequence, {
    minTokens: DRAFT_MODEL_TOKENS,
    maxTokens: DRAFT_MODEL_TOKENS,
    minConfidence: 0,
  });
  return switchingPredictor(nlc, inner, 'draft', false);
}

/** A draft model loaded beside a target model, with a context of as many sequences as the target's. */
export interface DraftContext {
  context: LlamaContext;
  dispose(): Promise<void>;
}

/** The vocabulary a GGUF declares (token texts), for the draft's compatibility check. */
function vocabularyOf(model: LlamaModel): readonly string[] | undefined {
  return (model.fileInfo.metadata.tokenizer as { ggml?: { tokens?: readonly string[] } } | undefined)?.ggml?.tokens;
}

/** Why `draft` cannot draft for `target` (their vocabularies differ), or undefined when it can. */
export function draftMismatch(target: LlamaModel, draft: LlamaModel): string | undefined {
  const a = vocabularyOf(target);
  const b = vocabularyOf(draft);
  if (!a || !b) return 'a vocabulary is missing from the file';
  if (a.length !== b.length) return `the vocabularies differ in size (${a.length} and ${b.length} tokens)`;
  const at = a.findIndex((t, i) => t !== b[i]);
  if (at >= 0) return `the vocabularies differ at token ${at}`;
  return undefined;
}

/**
 * Loads the draft model for `target` and makes its context (`sequences` sequences of `contextSize` tokens, on
 * `threads`); undefined (logged) when its vocabulary is not the target's. Throws when it cannot be loaded at all.
 */
export async function loadDraft(
  llama: Llama,
  target: LlamaModel,
  options: { modelPath: string; contextSize: number; sequences: number; threads: number; log: (msg: string) => void; signal?: AbortSignal },
): Promise<DraftContext | undefined> {
  const model = await llama.loadModel({ modelPath: options.modelPath, ...(options.signal ? { loadSignal: options.signal } : {}) });
  const why = draftMismatch(target, model);
  if (why) {
    options.log(`draft model ${path.basename(options.modelPath)} not used: ${why}`);
    await model.dispose();
    return undefined;
  }
  try {
    const context = await model.createContext({ contextSize: options.contextSize, sequences: options.sequences, threads: options.threads });
    return {
      context,
      dispose: async () => {
        await context.dispose().catch(() => undefined);
        await model.dispose().catch(() => undefined);
      },
    };
  } catch (err) {
    await model.dispose().catch(() => undefined);
    throw err;
  }
}

/** The GGUF magic: what `--draft-model` / `taskRuntime.draftModel` must point at. */
const GGUF_MAGIC = 'GGUF';

/** Why `file` cannot be a draft model (missing, not a file, not a GGUF), or undefined when it can be loaded. */
export function checkDraftModelFile(file: string): string | undefined {
  let fd: number | undefined;
  try {
    const stat = fs.statSync(file);
    if (!stat.isFile()) return `draft model ${path.basename(file)} is not a file`;
    fd = fs.openSync(file, 'r');
    const head = Buffer.alloc(4);
    fs.readSync(fd, head, 0, 4, 0);
    if (head.toString('latin1') !== GGUF_MAGIC) return `draft model ${path.basename(file)} is not a GGUF file`;
    return undefined;
  } catch {
    return `draft model file not found: ${path.basename(file)}`;
  } finally {
    if (fd !== undefined) fs.closeSync(fd);
  }
}
