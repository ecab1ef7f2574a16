// ModelBackend on node-llama-cpp: local GGUF files, or model URIs downloaded into a models directory. This class
// composes the parts: which model loads when, its keep-alive, a generation's sequence from the pool and what the
// scheduler is told; each part is a module beside it:
//   modelEntries.ts  ids, listing, resolution and each model's load state
//   modelLoad.ts     one load, in order (file, hardware, threads, context pool, warm-up); loadedModel.ts what it leaves
//   generation.ts    one generation on a sequence: input, sampling, stops, log-probabilities, snapshots, finish
//   hardware.ts      the GPU binary and layer placement, with the CPU as the fallback that never fails a task
//   threadCalibration.ts  the thread count, measured at load and cached
//   contextPool.ts   the model's one batched context: where a generation gets its sequence (kept prefixes reused)
//   contextFit.ts    whether prompt + max_output_tokens fit the context: at create, and when the task starts
//   embedding.ts     embeddings: the model's own embedding context, made on first use
//   ranking.ts       reranking: the model's own ranking context (a reranker's rank head), made on first use
//   keepAlive.ts     idle models unload after the keep-alive and load again on the next task
//   snapshots.ts     resume snapshots: saving and restoring a sequence's state
//   jsonSchema.ts, grammar.ts  structured output: what a schema may ask, its grammar, resuming inside it
//   stopText.ts      stop strings (held-back text)
//   toolCalls.ts, outputPlan.ts  function calls (forced by grammar, or in the template's syntax) and thought segments
//   thoughtSyntax.ts  thought delimiters per chat-template family (Qwen 3 `<think>`, gpt-oss Harmony): reasoning, not answer
// Invariants: a load's one-time costs (context allocation, GPU pipeline compilation) fall inside `loading`, never
// into a task's first token; delivered text is never generated or emitted again on resume; error texts carry no
// absolute paths (they reach problem details and task errors). Figures: docs/hardware.md, docs/gpu.md.

import * as path from 'node:path';
import type {
  EmbedInput,
  EmbedResult,
  GenerateOptions,
  GenerateRequest,
  GenerateResult,
  LoadOptions,
  ModelBackend,
  ModelInfo,
  RerankResult,
} from '../../runtime/backend';
import { disposeEmbedding, embedInputs } from './embedding';
import { canRank, disposeRanking, rankDocuments } from './ranking';
import { isModelUri } from '../modelSource';
import type { ConcurrencyChoice } from './contextChoice';
import { budgetMisfit, contextMisfit, explicitBudget, failStart, floorMisfit, refuse } from './contextFit';
import { runGeneration } from './sequenceGeneration';
import { grammarSchemaFor } from './grammar';
import { selectLlama, type GpuChoice, type GpuLayersChoice, type LlamaSelection, type NativeBuildsChoice, type ThreadsChoice } from './hardware';
import { DEFAULT_KEEP_ALIVE_MS, KeepAlive, REAL_TIMERS, type KeepAliveTimers } from './keepAlive';
import { headerCapabilities, headerFacts } from './capabilities';
import { promptTokens, type LoadedModel } from './loadedModel';
import { ModelEntries, type LlamaModelConfig, type ModelEntry } from './modelEntries';
import { loadModel } from './modelLoad';
import { importNodeLlamaCpp, type NodeLlamaCpp } from './nodeLlamaCpp';
import { checkReasoning, checkTools } from './outputPlan';
import type { PromptLookupChoice } from './speculative';
import { ThreadCalibrator } from './threadCalibration';

export interface LlamaBackendOptions {
  models: LlamaModelConfig[];
  /** CPU threads per context: a number, or 'auto' (default) to measure the best count at load (threadCalibration.ts). */
  threads?: ThreadsChoice;
  /** GPU API: 'auto' (default: the best prebuilt binary that works here), 'off', or one API; CPU is the fallback. */
  gpu?: GpuChoice;
  /** Layers to offload: 'auto' (default: node-llama-cpp fits them to free VRAM) or at most this many. */
  gpuLayers?: GpuLayersChoice;
  /**
   * Where this machine's native build is looked for (nativeBuild.ts's cache root; serve and the editor pass
   * nativeBuildsRoot()), or false (default) for node-llama-cpp's prebuilt binary only.
   */
  nativeBuilds?: NativeBuildsChoice;
  /** Where the thread calibration is cached (the data directory); without it, it is kept in memory only. */
  cacheDir?: string;
  /**
   * Context size per generation: 'auto' (default) = the trained context as far as free memory allows when the model
   * loads (node-llama-cpp's fitting), or at most this many tokens.
   */
  contextSize?: number | 'auto';
  /**
   * Generations of one model at once, as sequences of its one batched context: a number, or 'auto' = as many as
   * free RAM / VRAM holds at the context size, capped per compute type (contextPool.ts); `concurrency()` reports it
   * to the scheduler. Absent: the context is sized as for 'auto' and the runtime's per-model limit decides how many
   * run (an embedder's own limit; serve and the editor always pass one, default 'auto').
   */
  concurrency?: ConcurrencyChoice;
  /** A model with no task for this long unloads (ms; 0 = never; default 5 minutes, keepAlive.ts). */
  keepAliveMs?: number;
  /** The keep-alive's timers (default: real ones). */
  timers?: KeepAliveTimers;
  /** Where model URIs are downloaded to. Required for URI sources. */
  modelsDir?: string;
  log?: (msg: string) => void;
  /**
   * An end-of-generation token does not end a generation (like vLLM's `ignore_eos`): it counts as an output token,
   * adds no text, and the generation goes on until max tokens, a full context or a stop. Benchmarks and tests use
   * it for generations of an exact length. Not for serving: the output runs on past where the model ended it.
   */
  suppressEndOfGeneration?: boolean;
  /**
   * Prompt lookup (speculative decoding with drafts from the prompt, speculative.ts): 'auto' (default) drafts and
   * backs off while drafts are refused, 'on' always drafts, 'off' never. Not used while a draft model is.
   */
  promptLookup?: PromptLookupChoice;
  /** A GGUF path: a smaller model with the same vocabulary that drafts tokens for every model it fits (speculative.ts). */
  draftModel?: string;
}

/** The header's vocabulary arrays: megabytes that prepare() does not need for the trained context. */
const VOCABULARY_KEYS = ['tokenizer.ggml.tokens', 'tokenizer.ggml.scores', 'tokenizer.ggml.token_type', 'tokenizer.ggml.merges'];

export class LlamaBackend implements ModelBackend {
  readonly name = 'llama';

  private readonly entries: ModelEntries<LoadedModel>;
  private llamaPromise?: Promise<LlamaSelection>;
  private readonly calibrator: ThreadCalibrator;
  private disposed = false;
  private readonly keepAlive: KeepAlive;
  private readonly capacityListeners: Array<() => void> = [];

  constructor(private readonly options: LlamaBackendOptions) {
    this.entries = new ModelEntries(options.models);
    this.keepAlive = new KeepAlive(options.keepAliveMs ?? DEFAULT_KEEP_ALIVE_MS, options.timers ?? REAL_TIMERS, (id) => void this.unloadIdle(id));
    this.calibrator = new ThreadCalibrator({
      setting: options.threads ?? 'auto',
      ...(options.cacheDir ? { cacheDir: options.cacheDir } : {}),
      log: (msg) => this.log(msg),
    });
  }

  /** Every local model resumes: from a snapshot, or by evaluating prompt + delivered text again. */
  supportsResume(): boolean {
    return true;
  }

  listModels(): ModelInfo[] {
    return this.entries.list();
  }

  resolveModel(model: string | undefined): string | undefined {
    return this.entries.resolve(model);
  }

  /** The loaded model's tokenizer, as a prompt's text is tokenized (special tokens as text). */
  countPromptTokens(request: GenerateRequest): number | undefined {
    const id = this.resolveModel(request.model);
    const loaded = id === undefined ? undefined : this.entries.get(id)?.loaded;
    return loaded ? promptTokens(loaded, request).length : undefined;
  }

  countTokens(modelId: string, text: string): number | undefined {
    const loaded = this.entries.get(modelId)?.loaded;
    return loaded ? loaded.model.tokenize(text).length : undefined;
  }

  isLoaded(modelId: string): boolean {
    return this.entries.get(modelId)?.state === 'loaded';
  }

  /**
   * The loaded model's sequences; before a load, a numeric setting, else undefined (the runtime's per-model limit
   * until the load has measured free memory; listeners hear when it has).
   */
  concurrency(modelId: string): { group: string; limit: number } | undefined {
    const loaded = this.entries.get(modelId)?.loaded;
    const setting = this.options.concurrency;
    if (setting === undefined) return undefined;
    const limit = loaded?.concurrency ?? (setting === 'auto' ? undefined : setting);
    return limit === undefined ? undefined : { group: `model:${modelId}`, limit };
  }

  onCapacityChange(listener: () => void): void {
    this.capacityListeners.push(listener);
  }

  /**
   * Refuses what cannot run as asked: a format whose schema the grammar cannot enforce (jsonSchema.ts), and a prompt
   * with the caller's max_output_tokens that cannot fit the context — exactly once the model is loaded, before that
   * as far as the context's bound decides (contextFit.ts; the rest is decided when the task starts).
   */
  checkRequest(request: GenerateRequest): void {
    if (request.format) grammarSchemaFor(request.format);
    checkTools(request);
    const id = this.resolveModel(request.model);
    const entry = id ? this.entries.get(id) : undefined;
    if (!entry) return;
    const loaded = entry.loaded;
    if (!loaded) return refuse(budgetMisfit(this.contextBound(entry), explicitBudget(request)));
    checkReasoning(request, loaded.chatWrapper);
    refuse(floorMisfit(loaded.contextSize, request, loaded.longestToken));
    refuse(contextMisfit(loaded.contextSize, promptTokens(loaded, request).length, explicitBudget(request)));
  }

  /**
   * Reads each local model file's header (not its weights, nor its vocabulary) for its trained context, so that
   * checkRequest bounds the context before the first load (contextFit.ts), and its embedding length, so that an
   * embeddings call asking for other `dimensions` is refused before the model loads (runtime/embeddings.ts), and what
   * its generation supports (capabilities.ts: GET /models, the editor's chat models). A model URI is known after its
   * download and load; a file that cannot be read is left for its load to report.
   */
  async prepare(): Promise<void> {
    const nlc = await importNodeLlamaCpp().catch(() => undefined);
    if (!nlc) return;
    const read = async (entry: ModelEntry<LoadedModel>) => {
      if (isModelUri(entry.source) || entry.maxContextLength !== null) return;
      const info = await nlc
        .readGgufFileInfo(path.resolve(entry.source), { readTensorInfo: false, logWarnings: false, ignoreKeys: VOCABULARY_KEYS })
        .catch(() => undefined);
      const trained = info?.architectureMetadata.context_length;
      if (typeof trained === 'number' && trained > 0 && entry.maxContextLength === null) entry.maxContextLength = trained;
      const embd = info?.architectureMetadata.embedding_length;
      if (typeof embd === 'number' && embd > 0 && entry.embeddingDimensions === undefined) entry.embeddingDimensions = embd;
      if (info && !entry.capabilities) entry.capabilities = headerCapabilities(headerFacts(info.metadata));
    };
    await Promise.all(this.entries.all.map(read));
  }

  /** The most context a load can give the model: the trained context (once known) and a numeric setting. */
  private contextBound(entry: ModelEntry<LoadedModel>): number | undefined {
    const setting = this.options.contextSize;
    const bounds = [entry.maxContextLength, typeof setting === 'number' ? setting : null].filter((n): n is number => n !== null);
    return bounds.length ? Math.min(...bounds) : undefined;
  }

  load(modelId: string, options: LoadOptions = {}): Promise<void> {
    return this.entries.load(modelId, async (entry) => {
      if (this.disposed) throw new Error('backend disposed');
      const loaded = await loadModel(entry, options, {
        settings: this.options,
        llama: (nlc) => this.getLlama(nlc),
        calibrator: this.calibrator,
        log: (msg) => this.log(msg),
        onLoaded: () => {
          for (const l of this.capacityListeners) l();
        },
      });
      entry.embeddingDimensions = loaded.model.embeddingVectorSize;
      entry.capabilities = loaded.capabilities;
      return loaded;
    });
  }

  async generate(request: GenerateRequest, options: GenerateOptions): Promise<GenerateResult> {
    const id = this.resolveModel(request.model);
    if (!id) throw new Error(`unknown model "${request.model}"`);
    const entry = this.entries.get(id)!;
    if (entry.state !== 'loaded') await this.load(id);
    const loaded = entry.loaded!;
    loaded.active++;
    this.keepAlive.busy(id);
    try {
      // What could not be decided at create (not loaded then) and needs no tokenizer: before tokenizing it.
      failStart(floorMisfit(loaded.contextSize, request, loaded.longestToken));
      // A resume restoring a snapshot needs an empty sequence; everything else reuses the longest kept prefix.
      const prefix = options.resumeFrom?.snapshot ? [] : promptTokens(loaded, request);
      const { sequence, reused } = await loaded.pool.acquire(prefix, request.cacheKey);
      let ok = false;
      try {
        const result = await runGeneration(loaded, sequence, reused, request, options, {
          suppressEndOfGeneration: this.options.suppressEndOfGeneration === true,
          log: (msg) => this.log(msg),
        });
        ok = true;
        return result;
      } finally {
        await loaded.pool.release(sequence, ok);
      }
    } finally {
      if (--loaded.active === 0 && entry.loaded === loaded) this.keepAlive.idle(id);
    }
  }

  supportsEmbeddings(modelId: string): boolean {
    return this.entries.get(modelId) !== undefined;
  }

  /** Embeds on the model's own embedding context (embedding.ts), loading the model first; counts as a busy model. */
  embed(modelId: string, inputs: EmbedInput[], options: { signal: AbortSignal }): Promise<EmbedResult> {
    return this.whileBusy(modelId, (loaded) => embedInputs(loaded, inputs, options.signal));
  }

  /** A model known to have no rank head (once loaded) is refused before any work. */
  supportsRerank(modelId: string): boolean {
    const entry = this.entries.get(modelId);
    return entry !== undefined && (entry.loaded === undefined || canRank(entry.loaded));
  }

  /** Ranks on the model's own ranking context (ranking.ts), loading the model first; counts as a busy model. */
  rerank(modelId: string, query: string, documents: string[], options: { signal: AbortSignal }): Promise<RerankResult> {
    return this.whileBusy(modelId, (loaded) => rankDocuments(loaded, modelId, query, documents, options.signal));
  }

  /** Runs `work` on the loaded model (loading it first), as a busy model for the keep-alive. */
  private async whileBusy<T>(modelId: string, work: (loaded: LoadedModel) => Promise<T>): Promise<T> {
    const entry = this.entries.get(modelId);
    if (!entry) throw new Error(`unknown model "${modelId}"`);
    if (entry.state !== 'loaded') await this.load(modelId);
    const loaded = entry.loaded!;
    loaded.active++;
    this.keepAlive.busy(modelId);
    try {
      return await work(loaded);
    } finally {
      if (--loaded.active === 0 && entry.loaded === loaded) this.keepAlive.idle(modelId);
    }
  }

  /** The keep-alive ran out: frees the model unless a generation started meanwhile. */
  private async unloadIdle(id: string): Promise<void> {
    const loaded = this.entries.get(id)?.loaded;
    if (!loaded || loaded.active > 0 || this.disposed) return;
    this.entries.unload(id);
    await disposeEmbedding(loaded);
    await disposeRanking(loaded);
    await loaded.pool.dispose();
    await loaded.model.dispose().catch(() => undefined);
    this.log(`model ${id} unloaded: no task for the keep-alive (${Math.round((this.options.keepAliveMs ?? DEFAULT_KEEP_ALIVE_MS) / 1000)} s)`);
  }

  async dispose(): Promise<void> {
    this.disposed = true;
    this.keepAlive.clear();
    for (const loaded of await this.entries.unloadAll()) {
      await disposeEmbedding(loaded);
      await disposeRanking(loaded);
      await disposeRanking(loaded);
      await loaded.pool.dispose();
      await loaded.model.dispose().catch(() => undefined);
    }
    const selection = this.llamaPromise;
    this.llamaPromise = undefined;
    if (selection) await (await selection.catch(() => undefined))?.llama.dispose().catch(() => undefined);
  }

  private log(msg: string): void {
    this.options.log?.(msg);
  }

  private getLlama(nlc: NodeLlamaCpp): Promise<LlamaSelection> {
    this.llamaPromise ??= selectLlama(nlc, this.options.gpu ?? 'auto', (line) => this.log(line), this.options.nativeBuilds ?? false);
    return this.llamaPromise;
  }
}
