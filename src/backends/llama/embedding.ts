// Embeddings of a loaded model, on its own embedding contexts ("lanes"), made on the first embeddings request (not at
// load: most models never embed) and disposed with the model. Why lanes: node-llama-cpp 3.21.1 reads a pooled
// embedding of sequence 0 only (its native getEmbedding), so one context cannot evaluate several inputs in one
// decode; several contexts evaluating at once can, and on the CPU that beats one context with all the threads (two
// 1-thread lanes ~1.3-1.4x one 2-thread context on 200-token chunks; bench `embeddings`, docs/embeddings.md).
// Memory stays bounded: lane 0 has the full embedding context (EMBEDDING_CONTEXT_MAX tokens, never more than the
// model's generation context) for long inputs; the other lanes take only short inputs (SHORT_LANE_TOKENS). The
// model's prompt threads are split between the lanes (one lane per thread, at most EMBEDDING_LANES_MAX), so lanes
// never oversubscribe the cores. Inputs of every call share one queue, first come first served; each input runs
// whole on one lane through node-llama-cpp's public getEmbeddingFor, so a vector does not depend on its lane or its
// neighbours. The model's pooling comes from its file (llama.cpp's; a model without one gives its last token's
// embedding); vectors are L2-normalized, as OpenAI's and llama.cpp server's /v1/embeddings give them.

import type { LlamaEmbeddingContext, LlamaModel, Token } from 'node-llama-cpp' with { 'resolution-mode': 'import' };
import { RequestRefusedError, type EmbedInput, type EmbedResult } from '../../runtime/backend';
import type { LoadedModel } from './loadedModel';

/** The most tokens one input may take (the embedding context's size when the model allows that much). */
export const EMBEDDING_CONTEXT_MAX = 8192;
/** The most lanes (embedding contexts) of one model. */
export const EMBEDDING_LANES_MAX = 4;
/** The size of every lane but the first: inputs shorter than this may run on any lane. */
export const SHORT_LANE_TOKENS = 512;

interface Lane {
  context: LlamaEmbeddingContext;
  /** Inputs shorter than this run here. */
  size: number;
  busy: boolean;
}

interface Job {
  input: string | Token[];
  length: number;
  signal: AbortSignal;
  resolve: (vector: Float32Array) => void;
  reject: (err: unknown) => void;
}

/** A model's embedding lanes and the queue of inputs waiting for one. */
export class EmbeddingLanes {
  private queue: Job[] = [];
  private disposed = false;

  private constructor(private readonly lanes: Lane[]) {}

  /** Makes the lanes: lane 0 of `size` tokens with the first share of `threads`, the others short. */
  static async make(model: LlamaModel, size: number, threads: number): Promise<EmbeddingLanes> {
    const plan = lanePlan(size, threads);
    const made: LlamaEmbeddingContext[] = [];
    try {
      for (const p of plan) {
        made.push(await model.createEmbeddingContext({ contextSize: p.size, batchSize: p.size, threads: p.threads }));
      }
    } catch (e) {
      await Promise.all(made.map((c) => c.dispose().catch(() => undefined)));
      throw e;
    }
    return new EmbeddingLanes(made.map((context, i) => ({ context, size: plan[i].size, busy: false })));
  }

  /** Lane 0's context (tokenization and input lengths are the same on every lane). */
  get main(): LlamaEmbeddingContext {
    return this.lanes[0].context;
  }

  get count(): number {
    return this.lanes.length;
  }

  /** Lanes evaluating an input now. */
  get running(): number {
    return this.lanes.filter((l) => l.busy).length;
  }

  /** Inputs waiting for a lane. */
  get queued(): number {
    return this.queue.length;
  }

  /** Embeds one input of `length` tokens (< lane 0's size) on the first free lane it fits; unnormalized. */
  embed(input: string | Token[], length: number, signal: AbortSignal): Promise<Float32Array> {
    return new Promise((resolve, reject) => {
      if (this.disposed) return reject(new Error('the embedding context was disposed'));
      if (length >= this.lanes[0].size) return reject(new RangeError(`an input of ${length} tokens fits no embedding lane`));
      this.queue.push({ input, length, signal, resolve, reject });
      this.pump();
    });
  }

  /** Drops the queued inputs of an aborted call (the one running finishes: getEmbeddingFor cannot be stopped). */
  dropAborted(): void {
    const kept: Job[] = [];
    for (const job of this.queue) {
      if (job.signal.aborted) job.reject(job.signal.reason);
      else kept.push(job);
    }
    this.queue = kept;
  }

  /** Starts queued inputs, first come first served, on free lanes; a short input takes a short lane first. */
  private pump(): void {
    this.dropAborted();
    for (let i = 0; i < this.queue.length;) {
      const job = this.queue[i];
      const lane = this.freeLaneFor(job.length);
      if (!lane) {
        i++;
        continue;
      }
      this.queue.splice(i, 1);
      lane.busy = true;
      lane.context.getEmbeddingFor(job.input).then(
        (e) => {
          lane.busy = false;
          job.resolve(Float32Array.from(e.vector));
          this.pump();
        },
        (err: unknown) => {
          lane.busy = false;
          job.reject(err);
          this.pump();
        },
      );
    }
  }

  private freeLaneFor(length: number): Lane | undefined {
    for (let i = this.lanes.length - 1; i >= 0; i--) {
      const lane = this.lanes[i];
      if (!lane.busy && length < lane.size) return lane;
    }
    return undefined;
  }

  async dispose(): Promise<void> {
    this.disposed = true;
    const queued = this.queue;
    this.queue = [];
    for (const job of queued) job.reject(new Error('the embedding context was disposed'));
    await Promise.all(this.lanes.map((l) => l.context.dispose().catch(() => undefined)));
  }
}

/** Each lane's size and threads: one lane per thread up to EMBEDDING_LANES_MAX, the threads split (remainder first). */
export function lanePlan(size: number, threads: number): Array<{ size: number; threads: number }> {
  const t = Math.max(1, Math.floor(threads));
  const count = Math.min(EMBEDDING_LANES_MAX, t);
  return Array.from({ length: count }, (_, i) => ({
    size: i === 0 ? size : Math.min(size, SHORT_LANE_TOKENS),
    threads: Math.floor(t / count) + (i < t % count ? 1 : 0),
  }));
}

/** The embedding lanes of a loaded model, made once (a failed make is tried again on the next request). */
export function embeddingLanes(loaded: LoadedModel): Promise<EmbeddingLanes> {
  if (!loaded.embedding) {
    const threads = loaded.hardware.promptThreads ?? loaded.hardware.threads;
    const made = EmbeddingLanes.make(loaded.model, embeddingContextSize(loaded), threads);
    loaded.embedding = made;
    made.catch(() => {
      if (loaded.embedding === made) loaded.embedding = undefined;
    });
  }
  return loaded.embedding;
}

/** The embedding context's size in tokens: bounded, and never more than the generation context. */
function embeddingContextSize(loaded: LoadedModel): number {
  return Math.min(EMBEDDING_CONTEXT_MAX, loaded.contextSize, loaded.trainContextSize);
}

/** Frees the model's embedding lanes, if they were made. */
export async function disposeEmbedding(loaded: LoadedModel): Promise<void> {
  const made = loaded.embedding;
  loaded.embedding = undefined;
  if (made) await (await made.catch(() => undefined))?.dispose().catch(() => undefined);
}

/** The model's vocabulary size, from its file (undefined without a vocabulary there). */
function vocabularySize(loaded: LoadedModel): number | undefined {
  const tokens = loaded.model.fileInfo.metadata.tokenizer?.ggml?.tokens as readonly unknown[] | undefined;
  return tokens?.length;
}

/**
 * Refuses what the model cannot embed before anything is evaluated: a token id outside its vocabulary, an input too
 * long. Returns each input's length as evaluated (BOS/EOS the model adds included). Token arrays are passed as copies
 * here and below: node-llama-cpp adds BOS/EOS to the array it is given.
 */
function checkInputs(loaded: LoadedModel, context: LlamaEmbeddingContext, inputs: EmbedInput[]): number[] {
  const vocab = vocabularySize(loaded);
  const size = embeddingContextSize(loaded);
  return inputs.map((input, i) => {
    const param = inputs.length === 1 ? 'input' : `input.${i}`;
    if (typeof input !== 'string' && vocab !== undefined) {
      const bad = input.findIndex((t) => t >= vocab);
      if (bad >= 0)
        throw new RequestRefusedError('invalid_request', `Token id ${input[bad]} is outside the model's vocabulary (${vocab} tokens).`, param);
    }
    const length = context.calculateInputLength(typeof input === 'string' ? input : ([...input] as Token[]));
    if (length >= size) {
      throw new RequestRefusedError(
        'context_length_exceeded',
        `Input ${i} takes ${length} tokens; this model embeds at most ${size - 1} tokens per input.`,
        param,
      );
    }
    return length;
  });
}

function normalize(vector: Float32Array): Float32Array {
  let sum = 0;
  for (const v of vector) sum += v * v;
  const norm = Math.sqrt(sum);
  for (let i = 0; i < vector.length; i++) vector[i] = norm > 0 ? vector[i] / norm : 0;
  return vector;
}

/**
 * Embeds the inputs on the model's lanes (several at once when lanes are free) and gives the vectors in the inputs'
 * order. `signal` drops the call's inputs not yet started; the first failing input drops the rest of the call.
 */
export async function embedInputs(loaded: LoadedModel, inputs: EmbedInput[], signal: AbortSignal): Promise<EmbedResult> {
  signal.throwIfAborted();
  const lanes = await embeddingLanes(loaded);
  signal.throwIfAborted();
  const tokens = checkInputs(loaded, lanes.main, inputs);
  const call = new AbortController();
  const onAbort = () => {
    call.abort(signal.reason);
    lanes.dropAborted();
  };
  signal.addEventListener('abort', onAbort, { once: true });
  try {
    const vectors = await Promise.all(
      inputs.map((input, i) =>
        lanes.embed(typeof input === 'string' ? input : ([...input] as Token[]), tokens[i], call.signal).then(normalize, (err: unknown) => {
          if (!call.signal.aborted) {
            call.abort(err);
            lanes.dropAborted();
          }
          throw err;
        }),
      ),
    );
    return { vectors, tokens, dimensions: loaded.model.embeddingVectorSize };
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}
