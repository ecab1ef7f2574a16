// ModelBackend on node-llama-cpp: local GGUF files, or model URIs downloaded into a models directory. This class
// composes the parts and owns the order of a load (file, hardware, threads, context pool, warm-up) and the generation
// loop; each part is a module beside it:
//   modelEntries.ts  ids, listing, resolution and each model's load state
//   hardware.ts      the GPU binary and layer placement, with the CPU as the fallback that never fails a task
//   threadCalibration.ts  the thread count, measured at load and cached
//   contextPool.ts   the model's one batched context: where a generation gets its sequence (kept prefixes reused)
//   contextFit.ts    whether prompt + max_output_tokens fit the context: at create, and when the task starts
//   keepAlive.ts     idle models unload after the keep-alive and load again on the next task
//   snapshots.ts     resume snapshots: saving and restoring a sequence's state
//   jsonSchema.ts, grammar.ts  structured output: what a schema may ask, its grammar, resuming inside it
//   stopText.ts      stop strings (held-back text)
//   toolCalls.ts, outputPlan.ts  function calls (forced by grammar, or in the template's syntax) and thought segments
// Invariants: a load's one-time costs (context allocation, GPU pipeline compilation) fall inside `loading`, never
// into a task's first token; delivered text is never generated or emitted again on resume; error texts carry no
// absolute paths (they reach problem details and task errors). Figures: docs/hardware.md, docs/gpu.md.

import * as fs from 'node:fs';
import * as path from 'node:path';
import type { ChatWrapper, Llama, LlamaContextSequence, LlamaModel, SequenceEvaluateOptions, Token } from 'node-llama-cpp' with { 'resolution-mode': 'import' };
import type { GenerateOptions, GenerateRequest, GenerateResult, LoadOptions, ModelBackend, ModelHardware, ModelInfo, TokenLogprob } from '../../runtime/backend';
import { describeHardware } from '../../runtime/backend';
import { errorText } from '../../runtime/problems';
import { isModelUri } from '../modelSource';
import type { ConcurrencyChoice } from './contextChoice';
import { budgetMisfit, contextMisfit, explicitBudget, failStart, refuse } from './contextFit';
import { BatchedContextPool, chooseSequences, oneSequenceContext, type SequencePool } from './contextPool';
import { acceptDeliveredTokens, END_OF_JSON, GrammarCache, grammarSchemaFor } from './grammar';
import { placeModel, selectLlama, type GpuChoice, type GpuLayersChoice, type LlamaSelection, type ThreadsChoice } from './hardware';
import { DEFAULT_KEEP_ALIVE_MS, KeepAlive, REAL_TIMERS, type KeepAliveTimers } from './keepAlive';
import { ModelEntries, type LlamaModelConfig, type ModelEntry } from './modelEntries';
import { importNodeLlamaCpp, type NodeLlamaCpp } from './nodeLlamaCpp';
import { checkReasoning, checkTools, hasChannels, planOutput } from './outputPlan';
import { availableFunctions, chatHistory, plainTextPrompt } from './prompt';
import { modelFingerprint, restoreSnapshot, SnapshotWriter } from './snapshots';
import { StopText, type Piece } from './stopText';
import { ThreadCalibrator, timingPrompt } from './threadCalibration';
import { TokenTextStream } from './tokenTextStream';
import { utf8Guard } from './utf8Guard';

export interface LlamaBackendOptions {
  models: LlamaModelConfig[];
  /** CPU threads per context: a number, or 'auto' (default) to measure the best count at load (threadCalibration.ts). */
  threads?: ThreadsChoice;
  /** GPU API: 'auto' (default: the best prebuilt binary that works here), 'off', or one API; CPU is the fallback. */
  gpu?: GpuChoice;
  /** Layers to offload: 'auto' (default: node-llama-cpp fits them to free VRAM) or at most this many. */
  gpuLayers?: GpuLayersChoice;
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
}

const DEFAULT_TEMPERATURE = 0.8;
/** Recent output tokens the repeat/frequency/presence penalties look at (node-llama-cpp's default window). */
const PENALTY_WINDOW = 64;
/** The header's vocabulary arrays: megabytes that prepare() does not need for the trained context. */
const VOCABULARY_KEYS = ['tokenizer.ggml.tokens', 'tokenizer.ggml.scores', 'tokenizer.ggml.token_type', 'tokenizer.ggml.merges'];
/** What a token absent from the sampled distribution is reported with (OpenAI's floor; JSON has no -Infinity). */
const MIN_LOGPROB = -9999;

interface LoadedModel {
  llama: Llama;
  model: LlamaModel;
  /** Output grammars compiled for this model. */
  grammars: GrammarCache;
  trainContextSize: number;
  contextSize: number;
  hardware: ModelHardware;
  /** Template-driven prompts; undefined → plain-text prompt. */
  chatWrapper?: ChatWrapper;
  /** The model file's content fingerprint: which snapshots may be restored into it. */
  fingerprint: string;
  pool: SequencePool;
  /** Sequences of the pool: generations at once. */
  concurrency: number;
  /** Generations started and not ended (counted before their sequence is acquired): the keep-alive waits for 0. */
  active: number;
}

/** Error text without absolute paths (they end up in problem details and task errors): the runtime's scrubber. */
function describe(err: unknown): string {
  return errorText(err, Number.POSITIVE_INFINITY);
}

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
    refuse(contextMisfit(loaded.contextSize, this.promptTokens(loaded, request).length, explicitBudget(request)));
  }

  /**
   * Reads each local model file's header (not its weights, nor its vocabulary) for its trained context, so that
   * checkRequest bounds the context before the first load (contextFit.ts). A model URI is known after its download
   * and load; a file that cannot be read is left for its load to report.
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
    return this.entries.load(modelId, (entry) => this.loadEntry(entry, options));
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
      // A resume restoring a snapshot needs an empty sequence; everything else reuses the longest kept prefix.
      const prefix = options.resumeFrom?.snapshot ? [] : this.promptTokens(loaded, request);
      const { sequence, reused } = await loaded.pool.acquire(prefix);
      let ok = false;
      try {
        const result = await this.runGeneration(loaded, sequence, reused, request, options);
        ok = true;
        return result;
      } finally {
        await loaded.pool.release(sequence, ok);
      }
    } finally {
      if (--loaded.active === 0 && entry.loaded === loaded) this.keepAlive.idle(id);
    }
  }

  /** The keep-alive ran out: frees the model unless a generation started meanwhile. */
  private async unloadIdle(id: string): Promise<void> {
    const loaded = this.entries.get(id)?.loaded;
    if (!loaded || loaded.active > 0 || this.disposed) return;
    this.entries.unload(id);
    await loaded.pool.dispose();
    await loaded.model.dispose().catch(() => undefined);
    this.log(`model ${id} unloaded: no task for the keep-alive (${Math.round((this.options.keepAliveMs ?? DEFAULT_KEEP_ALIVE_MS) / 1000)} s)`);
  }

  async dispose(): Promise<void> {
    this.disposed = true;
    this.keepAlive.clear();
    for (const loaded of await this.entries.unloadAll()) {
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
    this.llamaPromise ??= selectLlama(nlc, this.options.gpu ?? 'auto');
    return this.llamaPromise;
  }

  private async loadEntry(entry: ModelEntry<LoadedModel>, options: LoadOptions): Promise<LoadedModel> {
    if (this.disposed) throw new Error('backend disposed');
    const report = (p: number) => options.onProgress?.(Math.min(1, Math.max(0, p)));
    report(0);
    const started = Date.now();
    try {
      const nlc = await importNodeLlamaCpp();
      const selection = await this.getLlama(nlc);
      let modelPath: string;
      // Download share of the progress bar when a URI has to be fetched first.
      let base = 0;
      if (isModelUri(entry.source)) {
        if (!this.options.modelsDir) throw new Error('no models directory configured for model URIs');
        modelPath = await nlc.resolveModelFile(entry.source, {
          directory: this.options.modelsDir,
          cli: false,
          signal: options.signal,
          onProgress: ({ totalSize, downloadedSize }) => {
            if (totalSize > 0) report(0.9 * (downloadedSize / totalSize));
          },
        });
        base = 0.9;
      } else {
        modelPath = path.resolve(entry.source);
        if (!fs.existsSync(modelPath)) throw new Error(`model file not found: ${path.basename(modelPath)}`);
      }
      options.signal?.throwIfAborted();
      const fingerprint = modelFingerprint(modelPath);
      // Weights: 0.8 of what is left after a download; calibration and warm-up the rest.
      const weightsShare = (1 - base) * 0.8;
      const setting = this.options.contextSize ?? 'auto';
      const concurrencySetting = this.options.concurrency ?? 'auto';
      // The tasks' one context is made once, inside placeModel (on the GPU path it proves the model fits there):
      // thread count first (small contexts of its own), then the context size per sequence, then the sequences.
      const { model, prepared, fallbackReason } = await placeModel(selection, {
        modelPath,
        gpuLayers: this.options.gpuLayers ?? 'auto',
        signal: options.signal,
        onProgress: (p) => report(base + weightsShare * p),
        prepare: async (m, onGpu) => {
          const compute = onGpu ? selection.compute : 'cpu';
          const devices = onGpu ? selection.devices : [];
          const picked = await this.calibrator.pick(
            m,
            { modelPath, fingerprint, compute, devices, gpuLayers: m.gpuLayers, mathCores: selection.mathCores },
            options.signal,
          );
          report(base + weightsShare + (1 - base - weightsShare) * 0.6);
          let perSequence: number;
          if (setting === 'auto') {
            // node-llama-cpp's fitting for one sequence (as large as free memory allows, up to the trained size).
            const fitted = await oneSequenceContext(m, 'auto', 1);
            perSequence = fitted.contextSize;
            await fitted.dispose();
          } else perSequence = Math.min(m.trainContextSize, setting);
          perSequence = Math.min(perSequence, m.trainContextSize);
          const chosen = await chooseSequences(m, selection.llama, { setting: concurrencySetting, contextSize: perSequence, onGpu });
          let sequences = chosen.sequences;
          for (;;) {
            try {
              const pool = await BatchedContextPool.create(m, { contextSize: perSequence, threads: picked.threads, sequences });
              return { picked, pool, sequences };
            } catch (err) {
              // 'auto' asked for more than fits after all: fewer sequences, down to one.
              if (concurrencySetting !== 'auto' || sequences <= 1) throw err;
              sequences = Math.max(1, Math.floor(sequences / 2));
            }
          }
        },
      });
      const { picked, pool, sequences } = prepared;
      const contextSize = pool.contextSize;
      const template = model.fileInfo.metadata.tokenizer?.chat_template;
      const chatWrapper = template ? nlc.resolveChatWrapper(model) : undefined;
      const totalLayers = model.fileInsights.totalLayers ?? null;
      const onGpu = selection.compute !== 'cpu' && model.gpuLayers > 0;
      const hardware: ModelHardware = {
        compute: onGpu ? selection.compute : 'cpu',
        devices: onGpu ? selection.devices : [],
        gpuLayers: model.gpuLayers,
        totalLayers,
        threads: picked.threads,
        threadsFrom: picked.from,
        ...(picked.measured ? { threadTokensPerSecond: picked.measured } : {}),
        sequences,
        sequencesFrom: concurrencySetting === 'auto' ? 'auto' : 'setting',
        ...(fallbackReason ? { fallbackReason } : {}),
      };
      report(base + weightsShare + (1 - base - weightsShare) * 0.8);
      const loaded: LoadedModel = {
        llama: selection.llama,
        model,
        grammars: new GrammarCache(selection.llama),
        trainContextSize: model.trainContextSize,
        contextSize,
        hardware,
        chatWrapper,
        fingerprint,
        pool,
        concurrency: sequences,
        active: 0,
      };
      hardware.warmupMs = await this.warmUp(loaded);
      if (onGpu) {
        const vram = await selection.llama.getVramState().catch(() => undefined);
        if (vram && vram.total > 0) hardware.vram = { total: vram.total, used: vram.used };
      }
      report(1);
      // After this load's entry is `loaded` (a microtask later), the scheduler may start `sequences` tasks at once.
      queueMicrotask(() => {
        for (const l of this.capacityListeners) l();
      });
      this.log(
        `model ${entry.id} loaded in ${Date.now() - started} ms (context ${contextSize} per sequence, ` +
          `${chatWrapper ? 'chat template' : 'plain-text prompt'}): ${describeHardware(hardware)}`,
      );
      return loaded;
    } catch (err) {
      if (options.signal?.aborted) throw new Error(`loading model "${entry.id}" was cancelled`);
      throw new Error(`cannot load model "${entry.id}": ${describe(err)}`);
    }
  }

  /**
   * A short generation on a sequence from the pool tasks will use, so that one-time costs (GPU pipeline compilation;
   * docs/hardware.md) fall inside `loading` rather than into the first task's first token.
   */
  private async warmUp(loaded: LoadedModel): Promise<number> {
    const { sequence } = await loaded.pool.acquire();
    const started = performance.now();
    try {
      let n = 0;
      const evaluation = sequence.evaluate(timingPrompt(loaded.model), { temperature: 0, yieldEogToken: true });
      for await (const token of evaluation) {
        void token;
        if (++n >= 2) break;
      }
    } finally {
      await loaded.pool.release(sequence, false);
    }
    return performance.now() - started;
  }

  private promptTokens(loaded: LoadedModel, request: GenerateRequest): Token[] {
    const { model, chatWrapper } = loaded;
    if (chatWrapper) {
      const { contextText } = chatWrapper.generateContextState({
        chatHistory: chatHistory(request.instructions, request.messages) as never,
        availableFunctions: availableFunctions(request.tools) as never,
      });
      return contextText.tokenize(model.tokenizer);
    }
    const bos = model.tokens.bos;
    const text = model.tokenize(plainTextPrompt(request.instructions, request.messages, request.tools));
    return bos !== null ? [bos, ...text] : text;
  }

  private async runGeneration(
    loaded: LoadedModel,
    sequence: LlamaContextSequence,
    /** Leading prompt tokens already in the sequence (a kept prefix; 0 on a snapshot resume). */
    reused: number,
    request: GenerateRequest,
    options: GenerateOptions,
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
    const prompt = this.promptTokens(loaded, request);
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
          ? await restoreSnapshot(sequence, loaded.fingerprint, snapshot, (msg) => this.log(msg))
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
      throw new Error(`prompt and delivered text (${sequence.nextTokenIndex + input.length} tokens) do not fit the context of ${loaded.contextSize} tokens`);
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
    const penalized =
      request.repeatPenalty !== undefined || request.frequencyPenalty !== undefined || request.presencePenalty !== undefined;
    const evaluateOptions: SequenceEvaluateOptions = {
      temperature: request.temperature ?? DEFAULT_TEMPERATURE,
      topP: request.topP,
      topK: request.topK,
      minP: request.minP,
      seed: request.seed,
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
      yieldEogToken: this.options.suppressEndOfGeneration === true,
    };

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
      if (snapshotWriter && stream.clean && stops.empty && snapshotWriter.due(sequence.nextTokenIndex, reevalRate)) {
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
    return { finishReason, inputTokens, outputTokens, ...cached };
  }
}
