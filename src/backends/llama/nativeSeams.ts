// Every use of node-llama-cpp's internals, in one place. The pinned 3.21.1 gives no public way to do what the
// batching fix, the thread split, the sampling-race guard, one native step per token, sequence ordering and resume
// inside a grammar need, so those read or wrap fields that are not its API. An upgrade may rename any of them; each
// accessor then returns `undefined` (the feature it serves is skipped) and `missingSeams` names it, so the loss is
// loud: a log line at load and `nativeSeamsMissing` in the model's hardware report, never a silent no-op.
// test/unit/backends/llama/nativeSeams.test.ts loads the real library and fails when one is gone.
import type { LlamaContext, LlamaContextSequence, LlamaGrammarEvaluationState, Token } from 'node-llama-cpp' with { 'resolution-mode': 'import' };

/** The seams by name (as logs and the hardware report say them), with what each one serves. */
export const NATIVE_SEAMS = {
  'context._decodeTokens': 'decode gathering (decodeGate.ts)',
  'context._ctx.decodeBatch': 'the sampling-race guard (samplingGuard.ts)',
  'context._ctx.sampleToken': 'the sampling-race guard (samplingGuard.ts)',
  'context._queuedDecodes': 'batch order by sequence id (batchStrategy.ts)',
  'context._ctx.initBatch': 'one native step per token (oneStep.ts)',
  'context._ctx.addToBatch': 'one native step per token (oneStep.ts)',
  'context._dispatchErrorForQueuedDecodesAndDequeue': 'one native step per token: a failed decode fails its batch (oneStep.ts)',
  'context._threadSplitterConsumer._wantedThreads': 'prompt threads apart from step threads (batchStrategy.ts)',
  'sequence._sequenceId': 'sequence ids for the gate and the pool',
  'grammarState._state': 'resume inside a grammar (grammar.ts)',
  'grammarState._llama._bindings.AddonSampler': 'resume inside a grammar (grammar.ts)',
} as const;
export type NativeSeam = keyof typeof NATIVE_SEAMS;

type DecodeTokens = (args: { sequenceId: number }, ...rest: unknown[]) => Promise<unknown>;
/** node-llama-cpp's queue of a context's pending decodes. */
export type QueuedDecodes = ReadonlyArray<{ sequenceId: number; tokens: readonly Token[] }>;

/** The native context's calls the sampling guard wraps (the addon object, `_ctx`). */
export interface NativeContext {
  decodeBatch: (...args: unknown[]) => Promise<unknown>;
  sampleToken: (...args: unknown[]) => Promise<unknown>;
}

/** A queued decode as node-llama-cpp keeps it (`_queuedDecodes` items), as far as oneStep.ts uses it. */
export interface QueuedDecode {
  sequenceId: number;
  afterBatchAction?: (sequenceStateLength: number) => unknown;
}

/**
 * The native context of a build with native/decode-and-sample.patch: `decodeBatchAndSample` decodes the batch and
 * samples each `[batchLogitIndex, sampler, probabilities?, confidence?]` entry (sampleToken's arguments) in one
 * worker round trip, resolving to what each sampleToken call would have (an Error in the place of a failed one).
 */
export interface OneStepNativeContext extends NativeContext {
  initBatch: (size: number) => unknown;
  addToBatch: (sequenceId: number, firstTokenIndex: number, tokens: Uint32Array, logitIndexes: Uint32Array) => ArrayLike<number>;
  decodeBatchAndSample: (entries: unknown[][]) => Promise<unknown[]>;
}

/** What oneStep.ts reaches in the context besides its native object. */
export interface OneStepSeams {
  native: OneStepNativeContext;
  queuedDecodes: () => readonly QueuedDecode[];
  /** Rejects these decodes' generations with `err` and takes them out of the queue (what a failed decodeBatch does). */
  failDecodes: (decodes: Set<QueuedDecode>, err: unknown) => void;
}

interface ContextInternals {
  _decodeTokens?: DecodeTokens;
  _ctx?: Partial<OneStepNativeContext>;
  _dispatchErrorForQueuedDecodesAndDequeue?: (decodes: Set<QueuedDecode>, err: unknown) => void;
  _queuedDecodes?: QueuedDecodes;
  /**
   * Hands each decode its thread count (`_wantedThreads` when the Llama's maxThreads is 0, as ours is). It exists
   * only while the context decodes (reserved per decode, freed after): at rest the field is declared but empty, and
   * the Llama's splitter that makes it is what can be checked.
   */
  _threadSplitterConsumer?: { _wantedThreads?: number };
  _llama?: { _threadsSplitter?: { createConsumer?: unknown } };
}

/**
 * What advances a grammar state by tokens that were not sampled through it (text delivered before a restart):
 * LlamaSampler._acceptTokenOnGrammarEvaluationState / _canBeNextTokenForGrammarEvaluationState call exactly these, and
 * LlamaChat uses them the same way for text it re-feeds; not exported by the package.
 */
export interface GrammarSampler {
  acceptGrammarEvaluationStateToken(state: unknown, token: Token): void;
  canBeNextTokenForGrammarEvaluationState(state: unknown, token: Token): boolean;
}

interface GrammarInternals {
  _llama?: { _bindings?: { AddonSampler?: Partial<GrammarSampler> } };
  _state?: unknown;
}

const internals = (context: LlamaContext | undefined) => context as unknown as ContextInternals | undefined;

/** Replaces the context's per-context decode entry with `wrap(original)`; false when the entry is missing. */
export function wrapDecodeTokens(context: LlamaContext, wrap: (original: DecodeTokens) => DecodeTokens): boolean {
  const target = internals(context)!;
  const decode = target._decodeTokens;
  if (typeof decode !== 'function') return false;
  target._decodeTokens = wrap(decode.bind(context));
  return true;
}

/** The native addon context with both calls the guard wraps, or undefined. */
export function nativeContextOf(context: LlamaContext): NativeContext | undefined {
  const native = internals(context)?._ctx;
  return native && typeof native.decodeBatch === 'function' && typeof native.sampleToken === 'function' ? (native as NativeContext) : undefined;
}

/**
 * The seams of the one-step path where the loaded addon has `decodeBatchAndSample` (a native build with
 * decode-and-sample.patch) and node-llama-cpp's internals it needs are all there; else undefined (the prebuilt
 * binary, or a node-llama-cpp that moved them: then the two-round-trip path runs, as upstream).
 */
export function oneStepSeamsOf(context: LlamaContext): OneStepSeams | undefined {
  const c = internals(context);
  const native = c?._ctx;
  if (!c || !native) return undefined;
  const calls = ['decodeBatch', 'sampleToken', 'initBatch', 'addToBatch', 'decodeBatchAndSample'] as const;
  if (!calls.every((name) => typeof native[name] === 'function')) return undefined;
  if (!Array.isArray(c._queuedDecodes) || typeof c._dispatchErrorForQueuedDecodesAndDequeue !== 'function') return undefined;
  return {
    native: native as OneStepNativeContext,
    queuedDecodes: () => (c._queuedDecodes as unknown as readonly QueuedDecode[] | undefined) ?? [],
    failDecodes: (decodes, err) => c._dispatchErrorForQueuedDecodesAndDequeue!.call(context, decodes, err),
  };
}

/** The context's queue of pending decodes (read at each batch), or undefined. */
export function queuedDecodesOf(context: LlamaContext | undefined): QueuedDecodes | undefined {
  const q = internals(context)?._queuedDecodes;
  return Array.isArray(q) ? q : undefined;
}

/** Sets the thread count of the decode about to run; false when the field is missing. */
export function setWantedThreads(context: LlamaContext | undefined, threads: number): boolean {
  const consumer = internals(context)?._threadSplitterConsumer;
  if (!consumer || typeof consumer._wantedThreads !== 'number') return false;
  consumer._wantedThreads = threads;
  return true;
}

/** node-llama-cpp's id of a sequence in its context, -1 if absent. */
export function sequenceIdOf(sequence: LlamaContextSequence): number {
  const id = (sequence as unknown as { _sequenceId?: number })._sequenceId;
  return typeof id === 'number' ? id : -1;
}

/** The grammar evaluation state's native handle and sampler, or undefined. */
export function grammarInternalsOf(state: LlamaGrammarEvaluationState): { sampler: GrammarSampler; handle: unknown } | undefined {
  const g = state as unknown as GrammarInternals;
  const sampler = g._llama?._bindings?.AddonSampler;
  if (
    !sampler ||
    typeof sampler.acceptGrammarEvaluationStateToken !== 'function' ||
    typeof sampler.canBeNextTokenForGrammarEvaluationState !== 'function'
  )
    return undefined;
  if (g._state === undefined) return undefined;
  return { sampler: sampler as GrammarSampler, handle: g._state };
}

/** The seams a context (and, given one, a sequence of it and a grammar state) lacks. */
export function missingSeams(context: LlamaContext, sequence?: LlamaContextSequence, grammarState?: LlamaGrammarEvaluationState): NativeSeam[] {
  const c = internals(context);
  const missing: NativeSeam[] = [];
  if (typeof c?._decodeTokens !== 'function') missing.push('context._decodeTokens');
  if (typeof c?._ctx?.decodeBatch !== 'function') missing.push('context._ctx.decodeBatch');
  if (typeof c?._ctx?.sampleToken !== 'function') missing.push('context._ctx.sampleToken');
  if (!Array.isArray(c?._queuedDecodes)) missing.push('context._queuedDecodes');
  if (typeof c?._ctx?.initBatch !== 'function') missing.push('context._ctx.initBatch');
  if (typeof c?._ctx?.addToBatch !== 'function') missing.push('context._ctx.addToBatch');
  if (typeof c?._dispatchErrorForQueuedDecodesAndDequeue !== 'function') missing.push('context._dispatchErrorForQueuedDecodesAndDequeue');
  const consumer = c?._threadSplitterConsumer;
  const consumerReady = consumer
    ? typeof consumer._wantedThreads === 'number'
    : !!c && '_threadSplitterConsumer' in c && typeof c._llama?._threadsSplitter?.createConsumer === 'function';
  if (!consumerReady) missing.push('context._threadSplitterConsumer._wantedThreads');
  if (sequence && sequenceIdOf(sequence) < 0) missing.push('sequence._sequenceId');
  if (grammarState) {
    const g = grammarState as unknown as GrammarInternals;
    if (g._state === undefined) missing.push('grammarState._state');
    if (!grammarInternalsOf(grammarState) && g._state !== undefined) missing.push('grammarState._llama._bindings.AddonSampler');
  }
  return missing;
}

/** The log line for missing seams (empty: none). */
export function describeMissingSeams(missing: readonly NativeSeam[]): string {
  if (!missing.length) return '';
  return `node-llama-cpp internals missing (this version is not the pinned 3.21.1?): ${missing.map((m) => `${m} — ${NATIVE_SEAMS[m]}`).join('; ')}; those features are off`;
}

/**
 * node-llama-cpp's JSON-schema → GBNF converter as a module of its own (not exported by the package): the grammar
 * worker (grammarWorker.ts) loads only it, off the host's thread, instead of the whole package. `resolveFrom` is
 * the resolver of the module asking (its `require.resolve`).
 */
export function jsonSchemaConverterPath(resolveFrom: (id: string) => string): string {
  const index = resolveFrom('node-llama-cpp');
  return index.replace(/index\.js$/, 'utils/gbnfJson/getGbnfGrammarForGbnfJsonSchema.js');
}

/** The converter's export, as the worker calls it. */
export type JsonSchemaConverter = (schema: unknown) => string;
