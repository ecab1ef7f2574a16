// One generation on a sequence of the model's pool: the input (prompt after the kept prefix, or on resume a restored
// snapshot / prompt + delivered text), sampling, structured output and function calls (grammar.ts, outputPlan.ts),
// stop strings (stopText.ts; the one that ended the output is reported with the result), log-probabilities,
// snapshots for resume (snapshots.ts) and the finish reason. Delivered text is never generated or emitted again on
// resume: it is fed back, advancing the grammar and the penalties' window. Speculative decoding (speculative.ts) is
// turned on for the generation where it keeps the output exact; a snapshot is saved only with no drafts ahead.

import { randomInt } from 'node:crypto';
import type { LlamaContextSequence, SequenceEvaluateOptions, Token } from 'node-llama-cpp' with { 'resolution-mode': 'import' };
import type { GenerateOptions, GenerateRequest, GenerateResult, TokenLogprob } from '../../runtime/backend';
import { contextMisfit, explicitBudget, failStart } from './contextFit';
import { acceptDeliveredTokens, END_OF_JSON } from './grammar';
import { promptTokens, type LoadedModel } from './loadedModel';
import { importNodeLlamaCpp } from './nodeLlamaCpp';
import { checkReasoning, hasChannels, planOutput } from './outputPlan';
import { restoreSnapshot, SnapshotWriter } from './snapshots';
import { switchingPredictorOf, type SpeculationRun } from './speculative';
import { StopText, type Piece } from './stopText';
import { TokenTextStream } from './tokenTextStream';
import { utf8Guard } from './utf8Guard';

export interface LlamaRunOptions {
  /** LlamaBackendOptions.suppressEndOfGeneration: an end-of-generation token does not end the generation. */
  suppressEndOfGeneration: boolean;
  log: (msg: string) => void;
}

const DEFAULT_TEMPERATURE = 0.8;
/** Recent output tokens the repeat/frequency/presence penalties look at (node-llama-cpp's default window). */
const PENALTY_WINDOW = 64;

/** What a token absent from the sampled distribution is reported with (OpenAI's floor; JSON has no -Infinity). */
const MIN_LOGPROB = -9999;

export async function runGeneration(
  loaded: LoadedModel,
  sequence: LlamaContextSequence,
  /** Leading prompt tokens already in the sequence (a kept prefix; 0 on a snapshot resume). */
  reused: number,
  request: GenerateRequest,
  options: GenerateOptions,
  settings: LlamaRunOptions,
): Promise<GenerateResult> {
  const { model } = loaded;
  const { signal, onText, snapshots, resumeFrom } = options;
  // checkRequest could not tell before the model was loaded.
  checkReasoning(request, loaded.chatWrapper);
  let input: Token[];
  let outputTokens = 0;
  let text = '';
  /** Context tokens a restored snapshot covers. */
  let covered = 0;
  /** Tokens of the delivered text (resume): they advance the grammar and the penalties' window. */
  let delivered: Token[] = [];
  const prompt = promptTokens(loaded, request);
  const inputTokens = prompt.length;
  // Without the dummy-prefix space SentencePiece tokenizers add: the text continues the output, it starts nothing.
  const tokenizeOutput = (t: string) => (t ? model.tokenize(t, false, 'trimLeadingSpace') : []);
  // Function calls / thought segments: the splitter into channels, their grammar, the delivered output re-rendered.
  const plan = await planOutput(await importNodeLlamaCpp(), loaded, request, resumeFrom, tokenizeOutput);
  /** What was delivered, in the model's own syntax (all of it answer text without a plan). */
  const refed = plan?.resumeText ?? resumeFrom?.text ?? '';
  if (resumeFrom) {
    // Delivered text is fed back, never generated (or emitted) again.
    outputTokens = resumeFrom.outputTokens;
    text = resumeFrom.text;
    const snapshot = resumeFrom.snapshot;
    // A snapshot records answer text only: with calls or reasoning delivered, prompt + output are evaluated again.
    const restored =
      snapshot && !hasChannels(resumeFrom.segments) && resumeFrom.text.startsWith(snapshot.text)
        ? await restoreSnapshot(sequence, loaded.fingerprint, snapshot, settings.log)
        : undefined;
    if (restored) {
      const rest = resumeFrom.text.slice(snapshot!.text.length);
      input = [restored.lastToken, ...tokenizeOutput(rest)];
      covered = restored.contextTokens - 1;
    } else {
      // No usable snapshot: prompt + delivered text, evaluated again (the text is durable in the event log).
      input = [...prompt.slice(reused), ...tokenizeOutput(refed)];
    }
    delivered = tokenizeOutput(refed);
  } else {
    input = prompt.slice(reused);
  }
  // What checkRequest could not decide before the load (contextFit.ts), or a context fitted smaller at a reload.
  failStart(contextMisfit(loaded.contextSize, inputTokens, explicitBudget(request)));
  if (sequence.nextTokenIndex + input.length >= loaded.contextSize) {
    throw new Error(
      `prompt and delivered text (${sequence.nextTokenIndex + input.length} tokens) do not fit the context of ${loaded.contextSize} tokens`,
    );
  }
  const room = loaded.contextSize - sequence.nextTokenIndex - input.length;
  const requested = request.maxOutputTokens ?? Number.POSITIVE_INFINITY;
  const limit = Math.min(requested, outputTokens + room);
  const limitReason = 'max_output_tokens' as const;

  // Structured output: a grammar state per generation, brought past the delivered text on resume.
  let grammarEvaluationState: SequenceEvaluateOptions['grammarEvaluationState'];
  if (request.format && !plan?.forced) {
    const grammar = await loaded.grammars.get(request.format);
    const nlc = await importNodeLlamaCpp();
    const state = new nlc.LlamaGrammarEvaluationState({ model, grammar });
    acceptDeliveredTokens(state, delivered);
    grammarEvaluationState = state;
  }
  // The grammar alone lets byte tokens form invalid UTF-8 (a maxLength it kept broken by U+FFFD): the same guard as
  // call grammars (utf8Guard.ts). Without a plan only; a plan brings its own.
  const formatGuard = grammarEvaluationState && !plan ? utf8Guard(await importNodeLlamaCpp(), model) : undefined;
  // A JSON grammar ends the document with END_OF_JSON: a stop like the client's, never delivered.
  const stops = new StopText([...(request.stop ?? []), ...(request.format && !plan?.forced ? [END_OF_JSON] : [])], resumeFrom?.text);

  const stream = new TokenTextStream(
    (tokens, lastTokens) => model.detokenize(tokens as Token[], plan?.specialText === true, lastTokens as Token[]),
    sequence.contextTokens.concat(input),
  );
  /** Log-probabilities of tokens pushed into the stream and not yet released with a piece. */
  const pendingLogprobs: TokenLogprob[] = [];
  const wantLogprobs = request.topLogprobs !== undefined;
  let stopped = false;
  const deliver = (p: Piece) => {
    text += p.text;
    if (p.logprobs) onText(p.text, p.tokens, p.logprobs);
    else onText(p.text, p.tokens);
  };
  const toStops = (piece: Piece) => {
    const out = stops.push(piece);
    for (const p of out.pieces) deliver(p);
    if (out.stopped) stopped = true;
  };
  /** Pieces of the splitter: answer text goes through the stop strings, other channels out at once (in order). */
  const route = (pieces: ReturnType<NonNullable<typeof plan>['splitter']['push']>) => {
    for (const p of pieces) {
      // After a stop string nothing more is delivered (a finished call's last tokens still are, on its channel).
      if (stopped && !(plan?.splitter.done && p.channel)) return;
      if (!p.channel) toStops(p);
      else {
        // Answer text held for a possible stop string is final once another channel follows it.
        for (const held of stops.flush()) deliver(held);
        onText(p.text, p.tokens, undefined, p.channel);
      }
    }
    if (plan?.splitter.done) stopped = true;
  };
  const emit = (piece: { text: string; tokens: number } | undefined) => {
    if (!piece) return;
    const logprobs = wantLogprobs ? pendingLogprobs.splice(0, piece.tokens) : undefined;
    const p = { ...piece, ...(logprobs ? { logprobs } : {}) };
    if (plan) route(plan.splitter.push(p));
    else toStops(p);
  };

  const snapshotWriter = snapshots ? new SnapshotWriter(snapshots, loaded.fingerprint, covered) : undefined;
  // Evaluation speed of this generation's first batch (tokens/s): what re-evaluating on resume would cost.
  const batchStarted = performance.now();
  const batchTokens = input.length;
  let reevalRate = 0;

  /** Output tokens the penalties look at (the delivered ones first, on resume). */
  const recent: Token[] = delivered.slice(-PENALTY_WINDOW);
  const penalized = request.repeatPenalty !== undefined || request.frequencyPenalty !== undefined || request.presencePenalty !== undefined;
  const evaluateOptions: SequenceEvaluateOptions = {
    temperature: request.temperature ?? DEFAULT_TEMPERATURE,
    topP: request.topP,
    topK: request.topK,
    minP: request.minP,
    // Without a seed node-llama-cpp seeds with the current second: two generations started within one second would
    // sample the same text at any temperature. Unseeded requests get a seed of their own, as llama.cpp server does.
    seed: request.seed ?? randomInt(0, 2 ** 32),
    grammarEvaluationState: plan ? plan.grammar : grammarEvaluationState,
    ...(plan?.tokenBias ? { tokenBias: plan.tokenBias } : formatGuard ? { tokenBias: () => formatGuard.bias() } : {}),
    // llama.cpp's penalties subtract frequency × count + presence × (count > 0) from a logit, OpenAI's formula,
    // over the last PENALTY_WINDOW output tokens (docs/hardware.md, "Sampling and log-probabilities").
    ...(penalized
      ? {
          repeatPenalty: {
            punishTokens: () => recent,
            maxPunishTokens: PENALTY_WINDOW,
            penalty: request.repeatPenalty ?? 1,
            frequencyPenalty: request.frequencyPenalty ?? 0,
            presencePenalty: request.presencePenalty ?? 0,
          },
        }
      : {}),
    // Documented node-llama-cpp option: an end-of-generation token is yielded (and evaluated on) instead of
    // ending evaluate(). Sampling is untouched, so the text up to that token is what it would have been.
    yieldEogToken: settings.suppressEndOfGeneration,
  };

  // Speculation where it is exact (speculative.ts): not under penalties, `auto` calls or a thought budget.
  const exact = !penalized && (!plan || plan.speculative);
  const predictor = exact ? switchingPredictorOf(sequence) : undefined;
  const speculation: SpeculationRun | undefined = predictor?.begin(sequence, {
    inputTokens: prompt,
    onDrafts: (drafts) => {
      plan?.onDrafts(drafts);
      formatGuard?.drafted(drafts);
    },
  });
  try {
    const result = await generate();
    const counts = speculation?.end();
    return counts && counts.drafted > 0 ? { ...result, speculative: counts } : result;
  } finally {
    speculation?.end();
  }

  async function generate(): Promise<GenerateResult> {
    const cached = reused > 0 ? { cachedInputTokens: reused } : {};
    if (signal.aborted) return { finishReason: 'aborted', inputTokens, outputTokens, ...cached };
    if (outputTokens >= limit) return { finishReason: limitReason, inputTokens, outputTokens, ...cached };
    if (plan?.splitter.done) return { finishReason: 'stop', inputTokens, outputTokens, ...cached };

    /** The last tokens before the current one, for a token's own text (leading spaces depend on them). */
    let previous: Token[] = sequence.contextTokens.concat(input).slice(-4);
    const logprobOf = (token: Token, probabilities: Map<Token, number> | undefined): TokenLogprob => {
      const entry = (t: Token, p: number | undefined) => {
        const tokenText = model.detokenize([t], false, previous);
        return { token: tokenText, logprob: p && p > 0 ? Math.log(p) : MIN_LOGPROB, bytes: [...Buffer.from(tokenText, 'utf8')] };
      };
      const top = [...(probabilities ?? new Map<Token, number>())].slice(0, request.topLogprobs ?? 0);
      return { ...entry(token, probabilities?.get(token)), top_logprobs: top.map(([t, p]) => entry(t, p)) };
    };

    let finishReason: GenerateResult['finishReason'] = 'stop';
    const metadata = wantLogprobs ? ({ probabilities: true } as const) : ({} as const);
    // evaluate() ends by itself on an end-of-generation token (not yielded, not counted), unless suppressed.
    for await (const result of sequence.evaluateWithMetadata(input, metadata, evaluateOptions)) {
      const token = result.token;
      if (!reevalRate) reevalRate = batchTokens / Math.max(1e-3, (performance.now() - batchStarted) / 1000);
      // Here every earlier token is evaluated into the sequence, this one is not: a consistent point to save, once
      // every earlier token's text is delivered (none held by the text stream or a possible stop string).
      if (snapshotWriter && stream.clean && stops.empty && !speculation?.ahead() && snapshotWriter.due(sequence.nextTokenIndex, reevalRate)) {
        await snapshotWriter.save(sequence, { text, outputTokens });
      }
      if (signal.aborted) {
        finishReason = 'aborted';
        break;
      }
      outputTokens++;
      plan?.onToken(token);
      formatGuard?.accept(token);
      if (wantLogprobs) pendingLogprobs.push(logprobOf(token, (result as { probabilities?: Map<Token, number> }).probabilities));
      previous = [...previous.slice(-3), token];
      if (penalized) {
        recent.push(token);
        if (recent.length > PENALTY_WINDOW) recent.shift();
      }
      emit(stream.push(token));
      if (stopped) break;
      if (outputTokens >= limit) {
        finishReason = limitReason;
        break;
      }
      if (signal.aborted) {
        finishReason = 'aborted';
        break;
      }
    }
    if (!stopped) emit(stream.flush());
    if (plan && (!stopped || plan.splitter.done)) route(plan.splitter.finish());
    if (stopped) finishReason = 'stop';
    else for (const p of stops.flush()) deliver(p);
    // One of the request's stop strings, never the JSON grammar's own end (END_OF_JSON).
    const matched = stops.matched;
    const stopSequence = matched !== undefined && request.stop?.includes(matched) ? { stopSequence: matched } : {};
    return { finishReason, inputTokens, outputTokens, ...cached, ...stopSequence };
  }
}
