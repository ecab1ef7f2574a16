// What a generation's output is made of beyond answer text, decided before it starts: forced function calls (the
// whole output under the calls grammar), `auto` calls (free text, the call grammar from the template's call prefix to
// its suffix) and thought segments (reasoning). It gives the generation loop the splitter (toolCalls.ts), the grammar
// state to sample with (a function: the auto call grammar switches on and off mid-generation), and on resume the text
// to re-feed in the model's own syntax with the grammar advanced over it. No plan (undefined): plain answer text.

import type { ChatWrapper, Llama, LlamaGrammar, LlamaGrammarEvaluationState, LlamaModel, Token, TokenBias } from 'node-llama-cpp' with {
  'resolution-mode': 'import',
};
import type { GenerateRequest, OutputSegment, ResumeFrom } from '../../runtime/backend';
import { RequestRefusedError } from '../../runtime/backend';
import { acceptDeliveredTokens } from './grammar';
import type { NodeLlamaCpp } from './nodeLlamaCpp';
import { utf8Guard } from './utf8Guard';
import { thoughtSyntaxOf } from './thoughtSyntax';
import { CallGrammarCache, callSyntaxOf, MAX_PARALLEL_CALLS, OutputSplitter, toolSchemas, type CallMode } from './toolCalls';

export interface OutputPlan {
  splitter: OutputSplitter;
  /** Grammar state for the next token (undefined: none). */
  grammar(): LlamaGrammarEvaluationState | undefined;
  /** Forced calls: the output is only calls (a response format does not apply). */
  forced: boolean;
  /** Resume: the delivered output in the model's syntax (undefined: not resuming). */
  resumeText?: string;
  /** Special tokens must be decoded as text (the markers may be special tokens of the vocabulary). */
  specialText: boolean;
  /** Token bias for the next token: valid UTF-8 while a call grammar applies (utf8Guard.ts); absent: none. */
  tokenBias?: () => TokenBias;
  /** Every sampled token, in order. */
  onToken(token: Token): void;
  /**
   * Speculative decoding keeps this output exact (speculative.ts): not with `auto` calls or a thought budget, whose
   * grammar switches on text seen token by token.
   */
  speculative: boolean;
  /** A decode's drafted tokens (speculative.ts), for the per-token bias. */
  onDrafts(tokens: readonly Token[]): void;
}

const caches = new WeakMap<Llama, CallGrammarCache>();

/** Refuses what the tools part of a request cannot do (before anything is stored). */
export function checkTools(request: GenerateRequest): void {
  const tools = request.tools ?? [];
  if (tools.length === 0) return;
  toolSchemas(tools);
  const choice = request.toolChoice ?? 'auto';
  if (typeof choice === 'object' && !tools.some((t) => t.name === choice.name)) {
    throw new RequestRefusedError('invalid_request', `Tool choice '${choice.name}' not found in 'tools' parameter.`, 'tool_choice');
  }
  if (choice === 'auto' && request.format) {
    // The answer's grammar would have to admit the call syntax too; not built.
    throw new RequestRefusedError(
      'unsupported_capability',
      'A local model cannot combine text.format with tool_choice "auto"; use "required" or a named tool, or no format.',
      'text.format',
    );
  }
}

/**
 * Thought tokens allowed per reasoning effort (then the template's thought suffix is forced by grammar, as
 * node-llama-cpp's LlamaChat does with budgets.thoughtTokens); absent: no limit.
 */
export const THOUGHT_BUDGETS: Record<NonNullable<GenerateRequest['reasoningEffort']>, number | undefined> = {
  none: 0,
  minimal: 128,
  low: 512,
  medium: 2048,
  high: undefined,
};

/**
 * Refuses a reasoning effort the model has no control for: its template must have a thought segment. `none` is
 * honoured by any model (one without a thought segment does not reason): Codex CLI sends it for models it does not know.
 */
export function checkReasoning(request: GenerateRequest, chatWrapper: ChatWrapper | undefined): void {
  if (request.reasoningEffort !== undefined && request.reasoningEffort !== 'none' && !thoughtSyntaxOf(chatWrapper)) {
    throw new RequestRefusedError(
      'unsupported_capability',
      "This model's chat template has no thought segment, so reasoning.effort cannot be applied.",
      'reasoning.effort',
    );
  }
}

/** The request's tool choice when it offers tools (undefined: none offered). */
function callChoice(request: GenerateRequest): GenerateRequest['toolChoice'] | undefined {
  return request.tools?.length ? (request.toolChoice ?? 'auto') : undefined;
}

/**
 * The output is constrained from its first token (a response format, or forced calls): no thought is opened for it
 * in the prompt (thoughtSyntax.ts promptOpensThought).
 */
export function constrainedFromStart(request: GenerateRequest): boolean {
  const choice = callChoice(request);
  return !!request.format || (choice !== undefined && choice !== 'auto');
}

/** Segments say something beyond answer text (then they are re-rendered in the model's syntax). */
export function hasChannels(segments: readonly OutputSegment[] | undefined): boolean {
  return !!segments?.some((s) => s.channel);
}

export async function planOutput(
  nlc: NodeLlamaCpp,
  loaded: { llama: Llama; model: LlamaModel; chatWrapper?: ChatWrapper },
  request: GenerateRequest,
  resumeFrom: ResumeFrom | undefined,
  tokenize: (text: string) => number[],
): Promise<OutputPlan | undefined> {
  const choice = callChoice(request);
  // A response format's grammar admits no thought markers: then there is no thought segment to split off.
  const thought = request.format ? undefined : thoughtSyntaxOf(loaded.chatWrapper);
  if (!choice && !thought) return undefined;
  const syntax = { ...callSyntaxOf(loaded.chatWrapper) };
  // A suffix that is one end-of-generation token (Harmony's `<|call|>`) is how the model ends the generation.
  const suffixTokens = syntax.suffix ? loaded.model.tokenize(syntax.suffix, true) : [];
  if (suffixTokens.length === 1 && loaded.model.isEogToken(suffixTokens[0]!)) syntax.endsGeneration = true;
  const mode: CallMode | 'none' = choice === undefined ? 'none' : choice === 'auto' ? 'auto' : 'forced';
  const tools = request.tools ?? [];
  const named = typeof choice === 'object' ? tools.filter((t) => t.name === choice.name) : tools;
  const single = typeof choice === 'object' || request.parallelToolCalls === false;
  let cache = caches.get(loaded.llama);
  if (!cache) caches.set(loaded.llama, (cache = new CallGrammarCache(loaded.llama)));
  const grammar: LlamaGrammar | undefined = mode === 'none' ? undefined : await cache.get(syntax, named, mode, single ? 1 : MAX_PARALLEL_CALLS);
  const fresh = () => new nlc.LlamaGrammarEvaluationState({ model: loaded.model, grammar: grammar! });
  let state: LlamaGrammarEvaluationState | undefined = mode === 'forced' ? fresh() : undefined;
  const splitter = new OutputSplitter({
    mode,
    syntax,
    ...(thought ? { thought } : {}),
    single,
    onCallGrammar: (active, written) => {
      state = active ? fresh() : undefined;
      if (!state || !written) return;
      try {
        acceptDeliveredTokens(state, tokenize(written) as never);
      } catch {
        // Text the call grammar does not admit (written before it applied): the call starts over under it.
        state = fresh();
      }
    },
  });
  // Reasoning effort: a thought budget, then the thought suffix under grammar (the splitter leaves the thought there).
  const budget = thought && request.reasoningEffort ? THOUGHT_BUDGETS[request.reasoningEffort] : undefined;
  // The suffix, and the answer's header where the family has one (Harmony's final message): the answer follows.
  const closeText = thought ? thought.suffix + (thought.answerHeader ?? '') : '';
  const closeGrammar = budget !== undefined ? await loaded.llama.createGrammar({ grammar: `root ::= ${JSON.stringify(closeText)}` }) : undefined;
  let thoughtTokens = 0;
  let closing: LlamaGrammarEvaluationState | undefined;
  const current = (): LlamaGrammarEvaluationState | undefined => {
    if (closeGrammar && splitter.inThought && thoughtTokens >= budget!) {
      closing ??= new nlc.LlamaGrammarEvaluationState({ model: loaded.model, grammar: closeGrammar });
      return closing;
    }
    closing = undefined;
    return state;
  };
  let resumeText: string | undefined;
  if (resumeFrom) {
    const segments = resumeFrom.segments ?? (resumeFrom.text ? [{ text: resumeFrom.text }] : []);
    const restored = splitter.restore(segments);
    resumeText = restored.text;
    if (mode === 'forced') acceptDeliveredTokens(state!, tokenize(resumeText) as never);
    else if (mode === 'auto' && restored.callText !== undefined && splitter.inCall) {
      state = fresh();
      acceptDeliveredTokens(state, tokenize(restored.callText) as never);
    }
  }
  const guard = mode === 'none' ? undefined : utf8Guard(nlc, loaded.model);
  const noBias = new nlc.TokenBias(loaded.model.tokenizer);
  return {
    splitter,
    grammar: current,
    ...(guard ? { tokenBias: () => (state ? guard.bias() : noBias) } : {}),
    onToken: (token) => {
      guard?.accept(token);
      if (splitter.inThought) thoughtTokens++;
    },
    speculative: mode !== 'auto' && !closeGrammar,
    onDrafts: (tokens) => guard?.drafted(tokens),
    forced: mode === 'forced',
    ...(resumeText !== undefined ? { resumeText } : {}),
    specialText: mode === 'auto' || !!thought,
  };
}
