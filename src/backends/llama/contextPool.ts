// Where a generation gets its llama.cpp sequence. The seam is `SequencePool`: a generation acquires a sequence (on a
// context of the model's size and thread count), runs on it, and releases it; how contexts are made, shared and
// reused is this module's business alone.
//
// One context per loaded model with N sequences (`BatchedContextPool`): node-llama-cpp gathers the evaluate() calls
// of all sequences of a context into one llama_decode per step, so N tasks cost about one decode per token step, on
// one calibrated thread count — not N contexts each spinning its own threads, which fell two orders of magnitude
// short of llama-server's one batched context (docs/hardware.md, "Batching"). In node-llama-cpp 3.21.1
// `contextSize` is per sequence (the native context gets contextSize × sequences cells), so every sequence holds the
// prompt + output of one task at the configured size.
//
// Dispatch: a decode is dispatched at once (a microtask) rather than on node-llama-cpp's default next event-loop
// cycle, which waits behind whatever I/O callbacks (HTTP writes, journal syncs) are due (docs/hardware.md).
//
// What a context's decodes go through besides: gathering into batches (decodeGate.ts), order and thread count per
// batch (batchStrategy.ts), one native step per token where the native build has it (oneStep.ts), else the
// sampling-race guard (samplingGuard.ts) — each over node-llama-cpp internals that
// nativeSeams.ts holds and checks; a seam missing at creation is logged and named in `missingSeams`.
//
// Prefix reuse: a released sequence keeps its KV state. `acquire(tokens)` hands out the free sequence whose context
// tokens share the longest prefix with `tokens`, erases what follows that prefix, and says how many tokens stay
// evaluated (never all of them: the last one is evaluated again to get logits to sample from); which one, with a
// conversation's cache key in the choice, is sequenceChoice.ts.
//
// Speculative decoding: a token predictor is a sequence's (node-llama-cpp takes it when the sequence is made), so
// each sequence is made with one from `predictor` (speculative.ts), and what else speculation holds (a draft model's
// context) is freed with the pool (`onDispose`).

import * as os from 'node:os';
import type { ConcurrencyChoice } from './contextChoice';
import { batchStrategy } from './batchStrategy';
import { DecodeGate } from './decodeGate';
import { missingSeams, sequenceIdOf, type NativeSeam } from './nativeSeams';
import { decodeAndSampleInOneStep, usesOneStep } from './oneStep';
import { sampleFirstAlone } from './samplingGuard';
import { commonPrefix, pickSequence } from './sequenceChoice';
import type { Llama, LlamaContext, LlamaContextSequence, LlamaModel, Token, TokenPredictor } from 'node-llama-cpp' with {
  'resolution-mode': 'import',
};

export interface AcquiredSequence {
  sequence: LlamaContextSequence;
  /** Leading tokens of the asked-for tokens already evaluated in the sequence (0: it is empty). */
  reused: number;
}

export interface SequencePool {
  /** Sequences of the context: how many generations run at once. */
  readonly size: number;
  /** Busy sequences now. */
  readonly busy: number;
  /**
   * A sequence for one generation that will evaluate `tokens` first (empty or absent: an empty sequence); waits
   * while every sequence is busy. Give it back with `release`, whatever the generation's outcome.
   */
  acquire(tokens?: readonly Token[], cacheKey?: string): Promise<AcquiredSequence>;
  /** Takes a sequence back; `keep`: its state is consistent and may be reused as a prefix. Never throws. */
  release(sequence: LlamaContextSequence, keep?: boolean): Promise<void>;
  /** Frees the context, busy sequences included. */
  dispose(): Promise<void>;
}

/** Most sequences `auto` gives one context, by compute: CPU measured (bench/batching.ts), GPU chosen (below). */
export const AUTO_CONCURRENCY_CAP = {
  /**
   * On the CPU a batched decode step costs more with each sequence (the matrix products are compute-bound there);
   * past 8 streams the aggregate grows by a few per cent while each stream's tokens come later: this pool, one
   * context, 1 thread, the batching bench's 86 MB model on the 2-core machine, 494–614 / 531–613 / 575–645 tokens/s
   * at 8 / 12 / 16 sequences (`cpu_cap_pool_*` in bench/results.json).
   */
  cpu: 8,
  /**
   * On a GPU one batched decode serves dozens of sequences for about the price of one (memory-bound): 32, like
   * vLLM's and llama-server's common defaults for a single GPU, bounded further by the KV memory below.
   */
  gpu: 32,
} as const;

/** Share of the free memory (RAM, or VRAM on the GPU path) that `auto` lets the KV caches of extra sequences take. */
const AUTO_MEMORY_SHARE = 0.5;

/**
 * Sequences for one context: the setting when it is a number, else as many as free memory holds at
 * `contextSize` tokens each (half the free RAM or VRAM for the KV caches beyond the first sequence), at most the cap
 * for the compute type, at least 1.
 */
export async function chooseSequences(
  model: LlamaModel,
  llama: Llama,
  options: { setting: ConcurrencyChoice; contextSize: number; onGpu: boolean },
): Promise<{ sequences: number; perSequenceBytes: number; freeBytes: number }> {
  const { setting, contextSize, onGpu } = options;
  const estimate = (sequences: number) =>
    model.fileInsights.estimateContextResourceRequirementsV2({ contextSize, modelGpuLayers: model.gpuLayers, sequences });
  const [one, two] = await Promise.all([estimate(1), estimate(2)]);
  const perSequenceBytes = Math.max(1, onGpu ? two.gpuVram - one.gpuVram : two.cpuRam - one.cpuRam);
  const freeBytes = onGpu ? (await llama.getVramState()).free : os.freemem();
  if (setting !== 'auto') return { sequences: Math.max(1, Math.floor(setting)), perSequenceBytes, freeBytes };
  const cap = onGpu ? AUTO_CONCURRENCY_CAP.gpu : AUTO_CONCURRENCY_CAP.cpu;
  const firstBytes = onGpu ? one.gpuVram : one.cpuRam;
  const extra = Math.floor((Math.max(0, freeBytes - firstBytes) * AUTO_MEMORY_SHARE) / perSequenceBytes);
  return { sequences: Math.max(1, Math.min(cap, 1 + extra)), perSequenceBytes, freeBytes };
}

/**
 * A context of `sequences` sequences of `contextSize` tokens each, decoding with `threads` threads, and with
 * `promptThreads` (default: `threads`) a decode of PROMPT_BATCH_TOKENS tokens or more (header).
 */
export async function createBatchedContext(
  model: LlamaModel,
  options: { contextSize: number | 'auto'; threads: number; promptThreads?: number; sequences: number; gate?: DecodeGate },
): Promise<LlamaContext> {
  let created: LlamaContext | undefined;
  const context = await model.createContext({
    contextSize: options.contextSize,
    threads: options.threads,
    sequences: options.sequences,
    batching: {
      dispatchSchedule: (dispatch) => queueMicrotask(dispatch),
      itemPrioritizationStrategy: batchStrategy(() => created, options.threads, options.promptThreads ?? options.threads),
    },
  });
  created = context;
  // A native build with decode-and-sample.patch: one worker round trip per token, its samplings in order on one
  // thread (which also makes the sampling-race guard unneeded); else the guard where several sequences sample.
  const oneStep = decodeAndSampleInOneStep(context);
  if (options.sequences > 1) {
    if (!oneStep) sampleFirstAlone(context);
    options.gate?.install(context);
  }
  return context;
}

/**
 * node-llama-cpp's fitting of `contextSize: 'auto'` for one sequence — the trained context as far as free memory
 * (RAM, or VRAM for the model's GPU layers) allows — from the file's resource estimates, the same resolver
 * `createContext` runs, without making a context. Making one to read its size allocated a full-size KV cache that
 * was freed at once: a 32 k-trained 86 MB model, CPU, 420–460 ms to make and 40 ms to free, against 0.4 ms here.
 */
export function fitContextSize(model: LlamaModel): Promise<number> {
  return model.fileInsights.configurationResolver.resolveContextContextSize('auto', {
    modelGpuLayers: model.gpuLayers,
    modelTrainContextSize: model.trainContextSize,
    flashAttention: model.defaultContextFlashAttention,
    kvCacheKeyType: model.defaultContextKvCacheKeyType,
    kvCacheValueType: model.defaultContextKvCacheValueType,
    swaFullCache: model.defaultContextSwaFullCache,
    sequences: 1,
  });
}

/** A context with one sequence whose decodes are dispatched at once: calibration's. */
export function oneSequenceContext(model: LlamaModel, contextSize: number | 'auto', threads: number): Promise<LlamaContext> {
  return createBatchedContext(model, { contextSize, threads, sequences: 1 });
}

/** The one context of a loaded model, its sequences handed to generations and kept warm between them. */
export class BatchedContextPool implements SequencePool {
  private readonly free: LlamaContextSequence[] = [];
  private readonly inUse = new Set<LlamaContextSequence>();
  /** The cache key each sequence last ran for (absent: none given). */
  private readonly keys = new WeakMap<LlamaContextSequence, string>();
  private readonly waiters: Array<() => void> = [];
  private disposed = false;

  private constructor(
    private readonly context: LlamaContext,
    private readonly gate: DecodeGate,
    /** node-llama-cpp internals this context lacks (nativeSeams.ts): the features they serve are off. */
    readonly missingSeams: readonly NativeSeam[],
    private readonly predictor: (() => TokenPredictor | undefined) | undefined,
    private readonly onDispose: (() => Promise<void>) | undefined,
  ) {}

  /**
   * Makes the context (its memory is allocated here: a load fails here, not in a task). `predictor`: a token
   * predictor for each sequence made (speculative.ts); `onDispose`: frees what speculation holds, with the context.
   */
  static async create(
    model: LlamaModel,
    options: {
      contextSize: number | 'auto';
      threads: number;
      promptThreads?: number;
      sequences: number;
      predictor?: () => TokenPredictor | undefined;
      onDispose?: () => Promise<void>;
    },
  ): Promise<BatchedContextPool> {
    const gate = new DecodeGate();
    const { predictor, onDispose, ...contextOptions } = options;
    const context = await createBatchedContext(model, { ...contextOptions, gate });
    // A sequence is made to check its own seam, and kept: it is the pool's first free one.
    const first = newSequence(context, predictor);
    const pool = new BatchedContextPool(context, gate, missingSeams(context, first), predictor, onDispose);
    pool.free.push(first);
    return pool;
  }

  get size(): number {
    return this.context.totalSequences;
  }

  get busy(): number {
    return this.inUse.size;
  }

  /** Whether each token's decode and sampling go to the native build in one call (oneStep.ts). */
  get oneStep(): boolean {
    return usesOneStep(this.context);
  }

  /** Tokens per sequence. */
  get contextSize(): number {
    return this.context.contextSize;
  }

  async acquire(tokens: readonly Token[] = [], cacheKey?: string): Promise<AcquiredSequence> {
    for (;;) {
      if (this.disposed || this.context.disposed) throw new Error('the model was unloaded');
      if (this.free.length > 0 || this.context.sequencesLeft > 0) break;
      await new Promise<void>((resolve) => this.waiters.push(resolve));
    }
    const candidates = this.free.map((seq) => ({ id: sequenceIdOf(seq), tokens: seq.contextTokens, owner: this.keys.get(seq) }));
    const best = pickSequence(candidates, tokens, cacheKey, this.context.sequencesLeft > 0);
    // A fresh sequence: the empty one made at creation while it is unused (it has the lowest id), else a new one.
    const empty = this.free.findIndex((seq) => seq.contextTokens.length === 0 && !this.keys.has(seq));
    const sequence =
      best >= 0 ? this.free.splice(best, 1)[0]! : empty >= 0 ? this.free.splice(empty, 1)[0]! : newSequence(this.context, this.predictor);
    if (cacheKey !== undefined) this.keys.set(sequence, cacheKey);
    else this.keys.delete(sequence);
    this.inUse.add(sequence);
    this.gate.expect(sequenceIdOf(sequence));
    try {
      const reused = await alignSequence(sequence, tokens);
      return { sequence, reused };
    } catch (err) {
      await this.release(sequence, false);
      throw err;
    }
  }

  async release(sequence: LlamaContextSequence, keep = true): Promise<void> {
    if (!this.inUse.delete(sequence)) return;
    this.gate.retire(sequenceIdOf(sequence));
    if (this.disposed || sequence.disposed) {
      await sequence.dispose();
    } else {
      if (!keep) await sequence.clearHistory().catch(() => undefined);
      this.free.push(sequence);
    }
    this.waiters.shift()?.();
  }

  async dispose(): Promise<void> {
    this.disposed = true;
    this.free.length = 0;
    this.inUse.clear();
    for (const w of this.waiters.splice(0)) w();
    this.gate.open();
    await this.context.dispose().catch(() => undefined);
    await this.onDispose?.().catch(() => undefined);
  }
}

/** A sequence of `context`, with its own token predictor when speculation is configured. */
function newSequence(context: LlamaContext, predictor: (() => TokenPredictor | undefined) | undefined): LlamaContextSequence {
  const tokenPredictor = predictor?.();
  return tokenPredictor ? context.getSequence({ tokenPredictor }) : context.getSequence();
}

/**
 * Erases what follows the longest prefix the sequence shares with `tokens`, keeping at most all but the last of
 * them (it is evaluated again for logits), and returns how many stay. Clears the sequence when erasing fails.
 */
async function alignSequence(sequence: LlamaContextSequence, tokens: readonly Token[]): Promise<number> {
  const have = sequence.contextTokens;
  if (have.length === 0) return 0;
  const keep = Math.min(commonPrefix(have, tokens), Math.max(0, tokens.length - 1));
  if (keep === 0) {
    await sequence.clearHistory();
    return 0;
  }
  if (keep < sequence.nextTokenIndex) {
    try {
      await sequence.eraseContextTokenRanges([{ start: keep, end: sequence.nextTokenIndex }]);
    } catch {
      await sequence.clearHistory();
      return 0;
    }
  }
  if (sequence.nextTokenIndex !== keep) {
    await sequence.clearHistory();
    return 0;
  }
  return keep;
}
