// Where a generation gets its llama.cpp sequence. The seam is `SequencePool`: a generation acquires a sequence (on a
// context of the model's size and thread count), runs on it, and releases it; how contexts are made, shared and
// reused is this module's business alone.
//
// One context per loaded model with N sequences (`BatchedContextPool`): node-llama-cpp gathers the evaluate() calls
// of all sequences of a context into one llama_decode per step, so N tasks cost about one decode per token step, on
// one calibrated thread count — not N contexts each spinning its own threads (issue #20: 4 tasks × 2 threads on 2
// cores fell to 4.4 tokens/s against 546 for llama-server's one batched context). In node-llama-cpp 3.21.1
// `contextSize` is per sequence (the native context gets contextSize × sequences cells), so every sequence holds the
// prompt + output of one task at the configured size.
//
// Dispatch: a decode is dispatched at once (a microtask) rather than on node-llama-cpp's default next event-loop
// cycle, which waits behind whatever I/O callbacks (HTTP writes, journal syncs) are due (docs/hardware.md).
//
// Gathering (`DecodeGate`): node-llama-cpp decodes, under one lock, whatever is queued when the previous decode and
// its sampling end, and loops while anything is queued. Sequences that start at different times (HTTP requests
// arriving one after another) therefore settle into a round robin of one-token decodes: each sequence queues its next
// token while another's decode runs, and never meets the others. Measured on the 2-core machine, 4 and 8 streams
// through `serve`: 1.0–2.9 tokens per decode on average, aggregate tokens/s flat from 1 to 8 streams (bench/batching.ts
// 153 and 159 against llama-server's 243 and 329), while the same 8 generations started in one instant decoded 6.9
// tokens per step. So each token decode of a generating sequence waits at the gate until every generating sequence of
// the context has its token there — without a bound while one of them is still being decoded and sampled (it is
// sure to come), else, for one that is late elsewhere (busy delivering, saving a snapshot, finishing), a bounded
// wait: GATHER_MICROTASK_HOPS microtask turns, then event-loop turns while more keep arriving, at most
// GATHER_MAX_TURNS — and then all go into the queue together: one decode per step again. A sequence counts as
// generating from the moment it is handed out, so prompts handed out together share their first decode too (8
// generations of the bench model started at once, in process: first tokens 17 ms for one and 100 ms for seven
// → 78–79 ms for all; through `serve` requests arrive a few ms apart: the first prompt goes alone, and the rest
// share the next decode with its first token step instead of waiting behind that step).
//
// Order in the batch (`sequenceOrderStrategy`): node-llama-cpp 3.21.1 creates every context with one KV stream per
// sequence (`kv_unified` off), and llama.cpp then cuts a batch into micro-batches (`split_equal`, sequential) that
// take only sequences whose ids ascend by one from the first: a batch of tokens for sequences 5, 2, 7, 0… becomes a
// run of one-token micro-batches, each a matrix-vector pass over every weight. node-llama-cpp adds its queued decodes
// in arrival order, so batches were cut up that way: with perf, a third of the decode time in `ggml_vec_dot_f32`,
// against tinyBLAS's batched products for llama-server (whose slots are added in id order). Ordering the items by
// sequence id, 8 sequences, 1 thread, the batching bench's 86 MB model: a decode of 8 tokens 26 → 12.5 ms, the
// same as llama-server's. The pool hands out the lowest free ids for the same reason (a gap in the ids splits too).
//
// Threads per decode (`promptThreads`): node-llama-cpp 3.21.1's prebuilt CPU binaries have no OpenMP and it attaches
// no ggml threadpool to its contexts, so every decode with T > 1 threads makes a disposable pool of T − 1 threads and
// joins them (strace, 200 tokens of the batching bench's 86 MB model: 220 clone3 calls at 2 threads, 20 at 1). For a
// one-token step that costs more than the second thread saves — 1 stream, 2-core machine: 55–81 tokens/s at 2
// threads against 144–186 at 1, where llama-server (persistent pool) goes from 182–260 to 394–512 — which is why the
// calibrated count (threadCalibration.ts, measured on one-token steps) is often 1. A prompt's batch amortizes the
// pool: 2 008 prompt tokens, first token 2 130–2 158 ms at 1 thread, 1 138–1 141 ms at 2. So a decode of at least
// PROMPT_BATCH_TOKENS tokens runs on `promptThreads` (all math cores, or the setting's number) and the steps of
// generating sequences on `threads` (calibrated, up to that number).
//
// Sampling (`sampleFirstAlone`): llama.cpp reorders a batch's outputs lazily on the first logits read, and node-
// llama-cpp samples all of a batch's sequences at once on worker threads; the first sampling after a decode runs
// alone, or two could reorder at once and a sequence sample from another's logits (it then continued another
// prompt's text: with a 32 000-token vocabulary 1 batched sampling in 6).
//
// Prefix reuse: a released sequence keeps its KV state. `acquire(tokens)` hands out the free sequence whose context
// tokens share the longest prefix with `tokens`, erases what follows that prefix, and says how many tokens stay
// evaluated (never all of them: the last one is evaluated again to get logits to sample from); which one, with a
// conversation's cache key in the choice, is sequenceChoice.ts.

import * as os from 'node:os';
import type { ConcurrencyChoice } from './contextChoice';
import { commonPrefix, pickSequence } from './sequenceChoice';
import type {
  BatchItem,
  CustomBatchingPrioritizationStrategy,
  Llama,
  LlamaContext,
  LlamaContextSequence,
  LlamaModel,
  PrioritizedBatchItem,
  Token,
} from 'node-llama-cpp' with { 'resolution-mode': 'import' };

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
/**
 * Tokens in one decode from which it runs on the prompt thread count: a prompt's batch, or many sequences' steps at
 * once. The pool's cost grows with the threads it makes and the gain with the batch's work: on 2 cores, 86 MB model,
 * 4–8 one-token steps per decode ran at 0.9–1.2× on 2 threads against 1, but a tiny model on 16 cores decodes one
 * token 7× faster on 1 thread than on 16 (docs/hardware.md), so the bound stays well above a handful of steps.
 */
export const PROMPT_BATCH_TOKENS = 32;

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
 * Microtask turns a held decode waits for the other generating sequences before it waits event-loop turns instead: a
 * consumer's continuation from one token to its next evaluate() is a chain of promise turns, all within one drain
 * of the microtask queue.
 */
const GATHER_MICROTASK_HOPS = 64;
/** Event-loop turns a held decode waits at most, each only while more sequences arrived in the turn before. */
const GATHER_MAX_TURNS = 4;

type DecodeTokens = (args: { sequenceId: number }, ...rest: unknown[]) => Promise<unknown>;

/**
 * Holds the token decodes of a context's sequences until every generating sequence has one (header). A sequence is
 * generating from `expect` (handed out) or its first decode until `retire` (its release); it is in flight from its
 * decode's release here until that decode (and its sampling) resolves — a sequence in flight is sure to come back
 * soon, so the gate waits for it without a bound.
 */
export class DecodeGate {
  private readonly generating = new Set<number>();
  private readonly inFlight = new Set<number>();
  private held: Array<() => void> = [];
  private heldIds = new Set<number>();
  /** Bumped on every opening and every new bounded wait: an older wait stops. */
  private round = 0;

  /** Wraps node-llama-cpp's per-context decode entry (an internal method of the pinned version; see the header). */
  install(context: LlamaContext): void {
    const target = context as unknown as { _decodeTokens?: DecodeTokens };
    const decode = target._decodeTokens;
    if (typeof decode !== 'function') return; // another version: decodes go straight to the queue
    target._decodeTokens = async (args, ...rest) => {
      const id = args.sequenceId;
      await new Promise<void>((resolve) => this.admit(id, resolve));
      this.inFlight.add(id);
      try {
        return await decode.call(context, args, ...rest);
      } finally {
        this.settled(id);
      }
    };
  }

  /**
   * The sequence was handed to a generation: its first decode (the prompt) is coming, so decodes already held wait
   * for it as for a generating sequence's next token — prompts that arrive together share one batch.
   */
  expect(sequenceId: number): void {
    this.generating.add(sequenceId);
  }

  /** The sequence stopped generating (released): nobody waits for it any longer. */
  retire(sequenceId: number): void {
    if (!this.generating.delete(sequenceId)) return;
    this.inFlight.delete(sequenceId);
    this.recheck();
  }

  /** Lets every held decode go (also when the context is disposed: they fail there instead of waiting forever). */
  open(): void {
    this.round++;
    const held = this.held;
    this.held = [];
    this.heldIds = new Set();
    for (const release of held) release();
  }

  private admit(sequenceId: number, release: () => void): void {
    this.generating.add(sequenceId);
    if (this.heldIds.has(sequenceId)) {
      // A second decode of a sequence already held (not a token step): never hold it behind itself.
      this.open();
      release();
      return;
    }
    this.held.push(release);
    this.heldIds.add(sequenceId);
    this.recheck();
  }

  private settled(sequenceId: number): void {
    this.inFlight.delete(sequenceId);
    this.recheck();
  }

  /** Opens when every generating sequence is held; else, with none in flight, waits a bounded while for the rest. */
  private recheck(): void {
    if (!this.held.length) return;
    if (this.heldIds.size >= this.generating.size) return this.open();
    if (this.inFlight.size > 0) return; // its settling rechecks
    const round = ++this.round;
    let hops = 0;
    let turns = 0;
    let lastHeld = -1;
    const check = (): void => {
      if (round !== this.round) return;
      if (this.heldIds.size >= this.generating.size) return this.open();
      if (++hops < GATHER_MICROTASK_HOPS) return queueMicrotask(check);
      if (this.held.length === lastHeld || ++turns > GATHER_MAX_TURNS) return this.open();
      lastHeld = this.held.length;
      hops = 0;
      setImmediate(check);
    };
    queueMicrotask(check);
  }
}

/** node-llama-cpp's queue of a context's pending decodes (an internal field of the pinned version). */
type QueuedDecodes = ReadonlyArray<{ sequenceId: number; tokens: readonly Token[] }>;

/**
 * Shares a batch as node-llama-cpp's default (`maximumParallelism`) does — every item an equal share, what is left to
 * the items clipped, higher evaluation priority first — and puts the items in ascending sequence id (header). An
 * item is found by its token array, which is the queued decode's own; `queue` is read at each call.
 */
export function sequenceOrderStrategy(queue: () => QueuedDecodes | undefined): CustomBatchingPrioritizationStrategy {
  return ({ items, size }) => {
    const ids = new Map<readonly Token[], number>();
    for (const q of queue() ?? []) ids.set(q.tokens, q.sequenceId);
    let left = size;
    const share = Math.max(1, Math.floor(size / Math.max(1, items.length)));
    const out: PrioritizedBatchItem[] = [];
    for (const item of items) {
      if (left <= 0) break;
      const processAmount = Math.min(item.tokens.length, left, share);
      out.push({ item, processAmount });
      left -= processAmount;
    }
    const clipped = out.filter((p) => p.processAmount < p.item.tokens.length);
    clipped.sort((a, b) => b.item.evaluationPriority - a.item.evaluationPriority);
    for (const p of clipped) {
      if (left <= 0) break;
      const more = Math.min(p.item.tokens.length - p.processAmount, left);
      p.processAmount += more;
      left -= more;
    }
    const idOf = (item: BatchItem) => ids.get(item.tokens) ?? Number.MAX_SAFE_INTEGER;
    return out.sort((a, b) => idOf(a.item) - idOf(b.item));
  };
}

/** The native context's calls the first-read guard wraps (node-llama-cpp 3.21.1's addon object, `_ctx`). */
interface NativeContext {
  decodeBatch?: (...args: unknown[]) => Promise<unknown>;
  sampleToken?: (...args: unknown[]) => Promise<unknown>;
}

/**
 * Lets the first sampling after each decode run alone; the rest of the batch's samplings follow once it is done.
 *
 * llama.cpp computes a batch's outputs in micro-batch order (`split_equal` takes runs of ascending sequence ids,
 * and a sequence with fewer tokens finishes first) and puts them back in batch order lazily: the first read of any
 * logits after the decode (`output_reorder`) swaps whole rows and clears its list of swaps. node-llama-cpp samples
 * every sequence of a batch at once, each on a libuv worker thread that begins by reading the logits — so two of
 * them could run the swaps at the same time, and a sequence sampled from another's row: it continued another
 * prompt's text. Rare with the ~420-token demo vocabulary, where a row swap takes nanoseconds (2 of 2 400 staggered
 * generations on 4 sequences went wrong); with a 32 000-token vocabulary (a row of 128 KB), 8 sequences whose
 * outputs come out in reverse, 135 of 800 samplings read another row — 0 with this guard (contextPool.test.ts).
 * What it costs: the batch's other samplings start one worker round trip (~0.1 ms) later.
 */
function sampleFirstAlone(context: LlamaContext): void {
  const native = (context as unknown as { _ctx?: NativeContext })._ctx;
  const decode = native?.decodeBatch;
  const sample = native?.sampleToken;
  if (!native || typeof decode !== 'function' || typeof sample !== 'function') return;
  /** The first sampling since the latest decode (the batch's others wait for it to settle). */
  let first: Promise<unknown> | undefined;
  let decoded = false;
  // The addon's methods are read-only on its prototype: own properties shadow them.
  const wrap = (name: keyof NativeContext, fn: (...args: unknown[]) => Promise<unknown>) =>
    Object.defineProperty(native, name, { value: fn, configurable: true, writable: true });
  wrap('decodeBatch', (...args) => {
    decoded = true;
    first = undefined;
    return decode.apply(native, args);
  });
  wrap('sampleToken', (...args) => {
    if (!decoded) return first ? first.then(() => sample.apply(native, args)) : sample.apply(native, args);
    decoded = false;
    const sampled = sample.apply(native, args);
    first = sampled.then(
      () => undefined,
      () => undefined,
    );
    return sampled;
  });
}

/** The parts of a node-llama-cpp 3.21.1 context (internal fields) the batch strategy reads and sets. */
interface ContextInternals {
  _queuedDecodes?: QueuedDecodes;
  /** Hands each decode its thread count (`_wantedThreads` when the Llama's maxThreads is 0, as ours is). */
  _threadSplitterConsumer?: { _wantedThreads?: number };
}

/**
 * Sets the thread count of the decode node-llama-cpp is about to run (it passes the consumer's wanted count to
 * llama.cpp right before each decode). Does nothing if the internals are not there.
 */
function setDecodeThreads(context: LlamaContext | undefined, threads: number): void {
  const consumer = (context as unknown as ContextInternals | undefined)?._threadSplitterConsumer;
  if (consumer && typeof consumer._wantedThreads === 'number') consumer._wantedThreads = threads;
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
  const order = sequenceOrderStrategy(() => (created as unknown as ContextInternals | undefined)?._queuedDecodes);
  const { threads } = options;
  const promptThreads = options.promptThreads ?? threads;
  const strategy: CustomBatchingPrioritizationStrategy =
    promptThreads === threads
      ? order
      : (params) => {
          const items = order(params);
          const tokens = items.reduce((n, p) => n + p.processAmount, 0);
          setDecodeThreads(created, tokens >= PROMPT_BATCH_TOKENS ? promptThreads : threads);
          return items;
        };
  const context = await model.createContext({
    contextSize: options.contextSize,
    threads,
    sequences: options.sequences,
    batching: { dispatchSchedule: (dispatch) => queueMicrotask(dispatch), itemPrioritizationStrategy: strategy },
  });
  created = context;
  if (options.sequences > 1) {
    sampleFirstAlone(context);
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

/** node-llama-cpp's id of a sequence in its context (an internal field of the pinned version), -1 if absent. */
function sequenceIdOf(sequence: LlamaContextSequence): number {
  const id = (sequence as unknown as { _sequenceId?: number })._sequenceId;
  return typeof id === 'number' ? id : -1;
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
  ) {}

  /** Makes the context (its memory is allocated here: a load fails here, not in a task). */
  static async create(
    model: LlamaModel,
    options: { contextSize: number | 'auto'; threads: number; promptThreads?: number; sequences: number },
  ): Promise<BatchedContextPool> {
    const gate = new DecodeGate();
    const context = await createBatchedContext(model, { ...options, gate });
    return new BatchedContextPool(context, gate);
  }

  get size(): number {
    return this.context.totalSequences;
  }

  get busy(): number {
    return this.inUse.size;
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
    const sequence = best < 0 ? this.context.getSequence() : this.free.splice(best, 1)[0]!;
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
  }
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
