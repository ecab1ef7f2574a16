// ModelBackend on node-llama-cpp: local GGUF files (or model URIs resolved into a models directory).
// Hardware (hardware.ts): the GPU by default with node-llama-cpp's own layer fitting, the CPU as the fallback that
// never fails a task (the reason is logged and reported with the model); the thread count measured at load.
// Measured on one H200 + 16 cores, 643 MB model (../shared/design/GPU.md): CPU 1 thread 13–18 tokens/s, 16 threads
// 92–119, Vulkan with every layer offloaded 570–680; the first generation on a fresh GPU context pays 1.6–7 s of
// pipeline compilation, so a short warm-up runs while the task is still `loading`.

import { createHash, randomUUID } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type {
  ChatWrapper,
  Llama,
  LlamaContext,
  LlamaContextSequence,
  LlamaModel,
  SequenceEvaluateOptions,
  Token,
} from 'node-llama-cpp' with { 'resolution-mode': 'import' };
import type {
  GenerateOptions,
  GenerateRequest,
  GenerateResult,
  GenerationSnapshot,
  LoadOptions,
  ModelBackend,
  ModelHardware,
  ModelInfo,
  ModelState,
} from '../../runtime/backend';
import { describeHardware } from '../../runtime/backend';
import {
  calibrationKey,
  chooseThreads,
  threadCandidates,
  ThreadCalibrationCache,
  type GpuChoice,
  type GpuLayersChoice,
  type ThreadsChoice,
} from './hardware';
import { errorText } from '../../runtime/problems';
import { chatHistory, plainTextPrompt } from './prompt';
import { TokenTextStream } from './tokenTextStream';
import { isModelUri } from '../modelSource';

type NodeLlamaCpp = typeof import('node-llama-cpp', { with: { 'resolution-mode': 'import' } });

export interface LlamaModelConfig {
  /** Id clients use; defaults to the file name without extension. */
  id?: string;
  /** Local .gguf path or node-llama-cpp model URI (hf:owner/repo:quant, https://…). */
  source: string;
  /** The generated random-weight demo model. */
  demo?: boolean;
}

export interface LlamaBackendOptions {
  models: LlamaModelConfig[];
  /** CPU threads per context: a number, or 'auto' (default) to measure the best count at load (hardware.ts). */
  threads?: ThreadsChoice;
  /** GPU API: 'auto' (default: the best prebuilt binary that works here), 'off', or one API; CPU is the fallback. */
  gpu?: GpuChoice;
  /** Layers to offload: 'auto' (default: node-llama-cpp fits them to free VRAM) or at most this many. */
  gpuLayers?: GpuLayersChoice;
  /** Where the thread calibration is cached (the data directory); without it, it is kept in memory only. */
  cacheDir?: string;
  /** Context size per generation; default min(trained context, 4096). */
  contextSize?: number;
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

const DEFAULT_MAX_CONTEXT = 4096;
const DEFAULT_TEMPERATURE = 0.8;
/** Idle contexts kept per model for reuse (creating one allocates the KV cache). */
const MAX_IDLE_CONTEXTS = 2;
/**
 * Every context here has one sequence, so there is nothing to batch a decode with: it is dispatched as soon as the
 * sequence asks (a microtask) instead of node-llama-cpp's default next event-loop cycle, which waits behind whatever
 * I/O callbacks (HTTP writes, journal syncs) are due. Measured on an H200 with Vulkan (2 rounds × 3 runs of 300
 * tokens, LMSP SSE): demo model 1 265–1 389 → 1 387–1 526 tokens/s and first delta 6.9–10.2 → 6.9–9.1 ms; the 85 MB
 * model 642–851 → 798–841 tokens/s (raw node-llama-cpp: 775–989).
 */
const ONE_SEQUENCE_BATCHING = { dispatchSchedule: (dispatch: () => void) => queueMicrotask(dispatch) };

/** Every context this backend makes: one sequence, decodes dispatched at once (above). */
function oneSequenceContext(model: LlamaModel, contextSize: number, threads: number): Promise<LlamaContext> {
  return model.createContext({ contextSize, threads, sequences: 1, batching: ONE_SEQUENCE_BATCHING });
}

let nodeLlamaCppPromise: Promise<NodeLlamaCpp> | undefined;
/** node-llama-cpp is ESM-only and heavy: import it only when the first model loads. */
function importNodeLlamaCpp(): Promise<NodeLlamaCpp> {
  if (!nodeLlamaCppPromise) {
    // Node ignores SIGXFSZ, so a write past the file-size limit (ulimit -f, systemd LimitFSIZE) fails with EFBIG and
    // the store refuses writes (store_unwritable). node-llama-cpp pulls in signal-exit (via proper-lockfile), which
    // listens for SIGXFSZ and re-raises it when it is the only listener: measured here, once a model had run, the
    // first journal write past the limit killed the process by SIGXFSZ instead. A listener of our own keeps Node's
    // behaviour.
    process.on('SIGXFSZ', () => {});
    nodeLlamaCppPromise = import('node-llama-cpp');
  }
  return nodeLlamaCppPromise;
}

interface LoadedModel {
  model: LlamaModel;
  contextSize: number;
  threads: number;
  hardware: ModelHardware;
  /** Template-driven prompts; undefined → plain-text prompt. */
  chatWrapper?: ChatWrapper;
  /** Guards snapshot restores: a state file from another model may crash llama.cpp. */
  fingerprint: string;
  idle: LlamaContext[];
  busy: Set<LlamaContext>;
}

interface ModelEntry {
  id: string;
  source: string;
  demo: boolean;
  state: ModelState;
  loading?: Promise<void>;
  loaded?: LoadedModel;
  maxContextLength: number | null;
}

function defaultId(source: string): string {
  if (isModelUri(source)) return source.replace(/^[a-z0-9+.-]+:/i, '').replace(/[^A-Za-z0-9._-]+/g, '-');
  return path.basename(source).replace(/\.gguf$/i, '');
}

/** Error text without absolute paths (they end up in problem details and task errors): the runtime's scrubber. */
function describe(err: unknown): string {
  return errorText(err, Number.POSITIVE_INFINITY);
}

function fileFingerprint(filePath: string): string {
  const hash = createHash('sha256');
  const fd = fs.openSync(filePath, 'r');
  try {
    const size = fs.fstatSync(fd).size;
    const head = Buffer.alloc(Math.min(size, 64 * 1024));
    fs.readSync(fd, head, 0, head.length, 0);
    hash.update(String(size)).update(head);
  } finally {
    fs.closeSync(fd);
  }
  return hash.digest('hex').slice(0, 16);
}

export class LlamaBackend implements ModelBackend {
  readonly name = 'llama';

  private readonly entries: ModelEntry[];
  private llamaPromise?: Promise<LlamaSelection>;
  private readonly calibrationCache?: ThreadCalibrationCache;
  /** Thread choices measured in this process, by calibration key (also when there is no cache file). */
  private readonly calibrated = new Map<string, { threads: number; measured: Record<string, number> }>();
  private disposed = false;

  constructor(private readonly options: LlamaBackendOptions) {
    const seen = new Set<string>();
    this.entries = options.models.map((m) => {
      const id = m.id ?? defaultId(m.source);
      if (seen.has(id)) throw new Error(`duplicate model id "${id}"`);
      seen.add(id);
      return { id, source: m.source, demo: !!m.demo, state: 'unloaded', maxContextLength: null };
    });
    if (options.cacheDir) this.calibrationCache = new ThreadCalibrationCache(path.join(options.cacheDir, 'thread-calibration.json'));
  }

  /** Every local model resumes: from a snapshot, or by evaluating prompt + delivered text again. */
  supportsResume(): boolean {
    return true;
  }

  listModels(): ModelInfo[] {
    return this.entries.map((e) => ({
      id: e.id,
      source: e.source,
      state: e.state,
      maxContextLength: e.maxContextLength,
      demo: e.demo,
      ...(e.loaded ? { hardware: e.loaded.hardware } : {}),
    }));
  }

  resolveModel(model: string | undefined): string | undefined {
    if (!model) return this.entries[0]?.id;
    return this.entries.find((e) => e.id === model)?.id;
  }

  isLoaded(modelId: string): boolean {
    return this.entry(modelId)?.state === 'loaded';
  }

  load(modelId: string, options: LoadOptions = {}): Promise<void> {
    const entry = this.entry(modelId);
    if (!entry) return Promise.reject(new Error(`unknown model "${modelId}"`));
    if (entry.state === 'loaded') return Promise.resolve();
    if (!entry.loading) {
      entry.state = 'loading';
      entry.loading = this.loadEntry(entry, options).then(
        (loaded) => {
          entry.loaded = loaded;
          entry.maxContextLength = loaded.model.trainContextSize;
          entry.state = 'loaded';
          entry.loading = undefined;
        },
        (err: unknown) => {
          entry.state = 'error';
          entry.loading = undefined;
          throw err;
        },
      );
    }
    return entry.loading;
  }

  async generate(request: GenerateRequest, options: GenerateOptions): Promise<GenerateResult> {
    const id = this.resolveModel(request.model);
    if (!id) throw new Error(`unknown model "${request.model}"`);
    const entry = this.entry(id)!;
    if (entry.state !== 'loaded') await this.load(id);
    const loaded = entry.loaded!;
    const context = await this.acquireContext(loaded);
    const sequence = context.getSequence();
    try {
      return await this.runGeneration(loaded, sequence, request, options);
    } finally {
      await this.releaseContext(loaded, context, sequence);
    }
  }

  async dispose(): Promise<void> {
    this.disposed = true;
    await Promise.allSettled(this.entries.map((e) => e.loading));
    for (const e of this.entries) {
      const loaded = e.loaded;
      e.loaded = undefined;
      e.state = 'unloaded';
      if (!loaded) continue;
      for (const c of [...loaded.idle, ...loaded.busy]) await c.dispose().catch(() => undefined);
      await loaded.model.dispose().catch(() => undefined);
    }
    const selection = this.llamaPromise;
    this.llamaPromise = undefined;
    if (selection) await (await selection.catch(() => undefined))?.llama.dispose().catch(() => undefined);
  }

  private entry(id: string): ModelEntry | undefined {
    return this.entries.find((e) => e.id === id);
  }

  private log(msg: string): void {
    this.options.log?.(msg);
  }

  private getLlama(nlc: NodeLlamaCpp): Promise<LlamaSelection> {
    this.llamaPromise ??= selectLlama(nlc, this.options.gpu ?? 'auto');
    return this.llamaPromise;
  }

  private async loadEntry(entry: ModelEntry, options: LoadOptions): Promise<LoadedModel> {
    if (this.disposed) throw new Error('backend disposed');
    const report = (p: number) => options.onProgress?.(Math.min(1, Math.max(0, p)));
    report(0);
    const started = Date.now();
    try {
      const nlc = await importNodeLlamaCpp();
      const selection = await this.getLlama(nlc);
      const { llama } = selection;
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
      const fingerprint = fileFingerprint(modelPath);
      // Weights: 0.8 of what is left after a download; calibration and warm-up the rest.
      const weightsShare = (1 - base) * 0.8;
      let fallbackReason = selection.fallbackReason;
      const wantedLayers = this.options.gpuLayers ?? 'auto';
      const useGpu = selection.compute !== 'cpu' && wantedLayers !== 0;
      const loadWith = (gpuLayers: GpuLayersChoice) =>
        llama.loadModel({
          modelPath,
          gpuLayers,
          loadSignal: options.signal,
          onLoadProgress: (p) => report(base + weightsShare * p),
        });
      let model: LlamaModel;
      let firstContext: LlamaContext | undefined;
      const contextSizeFor = (m: LlamaModel) =>
        Math.min(m.trainContextSize, this.options.contextSize ?? Math.min(m.trainContextSize, DEFAULT_MAX_CONTEXT));
      if (useGpu) {
        // A model or context that does not fit in free VRAM (or a GPU that fails) runs on the CPU instead.
        let onGpu: LlamaModel | undefined;
        try {
          onGpu = await loadWith(wantedLayers);
          firstContext = await oneSequenceContext(onGpu, contextSizeFor(onGpu), 1);
          model = onGpu;
          if (model.gpuLayers === 0) fallbackReason = 'the model does not fit in free GPU memory; running on the CPU';
        } catch (err) {
          // Free what the GPU attempt holds before loading the weights again.
          await onGpu?.dispose().catch(() => undefined);
          options.signal?.throwIfAborted();
          fallbackReason = `the GPU could not hold the model (${describe(err)}); running on the CPU`;
          model = await loadWith(0);
        }
      } else {
        model = await loadWith(0);
      }
      const contextSize = contextSizeFor(model);
      const template = model.fileInfo.metadata.tokenizer?.chat_template;
      const chatWrapper = template ? nlc.resolveChatWrapper(model) : undefined;
      const totalLayers = model.fileInsights.totalLayers ?? null;
      const onGpu = selection.compute !== 'cpu' && model.gpuLayers > 0;
      const hardware: ModelHardware = {
        compute: onGpu ? selection.compute : 'cpu',
        devices: onGpu ? selection.devices : [],
        gpuLayers: model.gpuLayers,
        totalLayers,
        threads: 1,
        threadsFrom: 'setting',
        ...(fallbackReason ? { fallbackReason } : {}),
      };
      const { threads, from, measured } = await this.pickThreads(nlc, model, { modelPath, fingerprint }, hardware, selection.mathCores, options);
      hardware.threads = threads;
      hardware.threadsFrom = from;
      if (measured) hardware.threadTokensPerSecond = measured;
      report(base + weightsShare + (1 - base - weightsShare) * 0.8);
      const loaded: LoadedModel = { model, contextSize, threads, hardware, chatWrapper, fingerprint, idle: [], busy: new Set() };
      // The first context is created now so that memory errors surface here, not in the first generation; the one
      // made while probing the GPU had a placeholder thread count.
      if (firstContext) await firstContext.dispose();
      const context = await this.createContext(loaded);
      loaded.idle.push(context);
      hardware.warmupMs = await this.warmUp(nlc, loaded, context);
      if (onGpu) {
        const vram = await llama.getVramState().catch(() => undefined);
        if (vram && vram.total > 0) hardware.vram = { total: vram.total, used: vram.used };
      }
      report(1);
      this.log(
        `model ${entry.id} loaded in ${Date.now() - started} ms (context ${contextSize}, ` +
          `${chatWrapper ? 'chat template' : 'plain-text prompt'}): ${describeHardware(hardware)}`,
      );
      return loaded;
    } catch (err) {
      if (options.signal?.aborted) throw new Error(`loading model "${entry.id}" was cancelled`);
      throw new Error(`cannot load model "${entry.id}": ${describe(err)}`);
    }
  }

  /** The thread count: the setting when given, else the cached or freshly measured best for this model here. */
  private async pickThreads(
    nlc: NodeLlamaCpp,
    model: LlamaModel,
    file: { modelPath: string; fingerprint: string },
    hardware: ModelHardware,
    mathCores: number,
    options: LoadOptions,
  ): Promise<{ threads: number; from: ModelHardware['threadsFrom']; measured?: Record<string, number> }> {
    const setting = this.options.threads ?? 'auto';
    if (setting !== 'auto') return { threads: Math.max(1, Math.floor(setting)), from: 'setting' };
    const { modelPath } = file;
    const key = calibrationKey({
      modelFile: modelPath,
      fingerprint: file.fingerprint,
      compute: hardware.compute,
      devices: hardware.devices,
      gpuLayers: hardware.gpuLayers,
      mathCores,
      engine: `node-llama-cpp`,
    });
    const known = this.calibrated.get(key) ?? this.calibrationCache?.get(key);
    if (known) {
      this.calibrated.set(key, known);
      return { threads: known.threads, from: 'cache', measured: known.measured };
    }
    const started = Date.now();
    const prompt = this.calibrationPrompt(model);
    let choice;
    try {
      choice = await chooseThreads(threadCandidates(mathCores), async (threads) => {
        options.signal?.throwIfAborted();
        return measureDecode(model, prompt, threads);
      });
    } catch (err) {
      options.signal?.throwIfAborted();
      // Calibration is an optimisation: a failure (e.g. no memory for its small contexts) never fails the load.
      const threads = Math.max(1, Math.min(4, mathCores));
      this.log(`thread calibration failed (${describe(err)}); using ${threads} thread(s)`);
      return { threads, from: 'default' };
    }
    this.calibrated.set(key, choice);
    try {
      this.calibrationCache?.set(key, choice);
    } catch (err) {
      this.log(`thread calibration not cached: ${describe(err)}`);
    }
    this.log(
      `threads for ${path.basename(modelPath)}: ${choice.threads} (decode tokens/s by threads ` +
        `${JSON.stringify(choice.measured)}, measured in ${Date.now() - started} ms)`,
    );
    return { threads: choice.threads, from: 'calibration', measured: choice.measured };
  }

  private calibrationPrompt(model: LlamaModel): Token[] {
    const text = model.tokenize('The task runtime measures how fast this machine decodes.');
    return model.tokens.bos !== null ? [model.tokens.bos, ...text] : text;
  }

  /**
   * A short generation on the context tasks will use, so that one-time costs (GPU pipeline compilation: 1.6–7 s
   * measured on an H200 with Vulkan) fall inside `loading` rather than into the first task's first token.
   */
  private async warmUp(nlc: NodeLlamaCpp, loaded: LoadedModel, context: LlamaContext): Promise<number> {
    const started = performance.now();
    const sequence = context.getSequence();
    try {
      let n = 0;
      const evaluation = sequence.evaluate(this.calibrationPrompt(loaded.model), { temperature: 0, yieldEogToken: true });
      for await (const token of evaluation) {
        void token;
        if (++n >= 2) break;
      }
    } finally {
      await sequence.dispose().catch(() => undefined);
    }
    return performance.now() - started;
  }

  private createContext(loaded: LoadedModel): Promise<LlamaContext> {
    return oneSequenceContext(loaded.model, loaded.contextSize, loaded.threads);
  }

  private async acquireContext(loaded: LoadedModel): Promise<LlamaContext> {
    const context = loaded.idle.pop() ?? (await this.createContext(loaded));
    loaded.busy.add(context);
    return context;
  }

  private async releaseContext(loaded: LoadedModel, context: LlamaContext, sequence: LlamaContextSequence) {
    loaded.busy.delete(context);
    await sequence.dispose().catch(() => undefined);
    if (this.disposed || context.disposed || loaded.idle.length >= MAX_IDLE_CONTEXTS) {
      await context.dispose().catch(() => undefined);
    } else {
      loaded.idle.push(context);
    }
  }

  private promptTokens(loaded: LoadedModel, request: GenerateRequest): Token[] {
    const { model, chatWrapper } = loaded;
    if (chatWrapper) {
      const { contextText } = chatWrapper.generateContextState({
        chatHistory: chatHistory(request.instructions, request.messages),
      });
      return contextText.tokenize(model.tokenizer);
    }
    const bos = model.tokens.bos;
    const text = model.tokenize(plainTextPrompt(request.instructions, request.messages));
    return bos !== null ? [bos, ...text] : text;
  }

  private async runGeneration(
    loaded: LoadedModel,
    sequence: LlamaContextSequence,
    request: GenerateRequest,
    options: GenerateOptions,
  ): Promise<GenerateResult> {
    const { model } = loaded;
    const { signal, onText, snapshots, resumeFrom } = options;
    let input: Token[];
    let outputTokens = 0;
    let text = '';
    /** Context tokens the last saved snapshot covers (a restored one counts). */
    let covered = 0;
    const prompt = this.promptTokens(loaded, request);
    const inputTokens = prompt.length;
    if (resumeFrom) {
      // Delivered text is fed back, never generated (or emitted) again.
      outputTokens = resumeFrom.outputTokens;
      text = resumeFrom.text;
      const snapshot = resumeFrom.snapshot;
      const restored = snapshot && resumeFrom.text.startsWith(snapshot.text) ? await this.tryRestore(loaded, sequence, snapshot) : undefined;
      if (restored) {
        const rest = resumeFrom.text.slice(snapshot!.text.length);
        input = [restored.lastToken, ...(rest ? model.tokenize(rest, false) : [])];
        covered = restored.contextTokens - 1;
      } else {
        // No usable snapshot: prompt + delivered text, evaluated again (the text is durable in the event log).
        input = [...prompt, ...(resumeFrom.text ? model.tokenize(resumeFrom.text, false) : [])];
      }
    } else {
      input = prompt;
    }
    if (sequence.nextTokenIndex + input.length >= loaded.contextSize) {
      throw new Error(
        resumeFrom
          ? `prompt and delivered text (${sequence.nextTokenIndex + input.length} tokens) do not fit the context of ${loaded.contextSize} tokens`
          : `prompt of ${inputTokens} tokens does not fit the context of ${loaded.contextSize} tokens`,
      );
    }
    const room = loaded.contextSize - sequence.nextTokenIndex - input.length;
    const requested = request.maxOutputTokens ?? Number.POSITIVE_INFINITY;
    const limit = Math.min(requested, outputTokens + room);
    const limitReason = 'max_output_tokens' as const;

    const stream = new TokenTextStream(
      (tokens, lastTokens) => model.detokenize(tokens as Token[], false, lastTokens as Token[]),
      sequence.contextTokens.concat(input),
    );
    const emit = (piece: { text: string; tokens: number } | undefined) => {
      if (!piece) return;
      text += piece.text;
      onText(piece.text, piece.tokens);
    };

    const snapshotPath = snapshots
      ? path.join(snapshots.dir, `${loaded.fingerprint}-${randomUUID()}.llstate`)
      : undefined;
    let lastSnapshot = Date.now();
    // Evaluation speed of this generation's first batch (tokens/s): what re-evaluating on resume would cost.
    const batchStarted = performance.now();
    const batchTokens = input.length;
    let reevalRate = 0;

    const evaluateOptions: SequenceEvaluateOptions = {
      temperature: request.temperature ?? DEFAULT_TEMPERATURE,
      topP: request.topP,
      seed: request.seed,
      // Documented node-llama-cpp option: an end-of-generation token is yielded (and evaluated on) instead of
      // ending evaluate(). Sampling is untouched, so the text up to that token is what it would have been.
      yieldEogToken: this.options.suppressEndOfGeneration === true,
    };

    if (signal.aborted) return { finishReason: 'aborted', inputTokens, outputTokens };
    if (outputTokens >= limit) return { finishReason: limitReason, inputTokens, outputTokens };

    let finishReason: GenerateResult['finishReason'] = 'stop';
    // evaluate() ends by itself on an end-of-generation token (not yielded, not counted), unless suppressed.
    for await (const token of sequence.evaluate(input, evaluateOptions)) {
      if (!reevalRate) reevalRate = batchTokens / Math.max(1e-3, (performance.now() - batchStarted) / 1000);
      // Here every earlier token is evaluated into the sequence, this one is not: a consistent point to save.
      if (
        snapshots &&
        snapshotPath &&
        stream.clean &&
        Date.now() - lastSnapshot >= snapshots.everyMs &&
        ((sequence.nextTokenIndex - covered) / reevalRate) * 1000 >= snapshots.minReevalMs
      ) {
        await this.saveSnapshot(sequence, snapshotPath);
        lastSnapshot = Date.now();
        covered = sequence.nextTokenIndex;
        snapshots.onSnapshot({ statePath: snapshotPath, text, outputTokens });
      }
      if (signal.aborted) {
        finishReason = 'aborted';
        break;
      }
      outputTokens++;
      emit(stream.push(token));
      if (outputTokens >= limit) {
        finishReason = limitReason;
        break;
      }
      if (signal.aborted) {
        finishReason = 'aborted';
        break;
      }
    }
    emit(stream.flush());
    return { finishReason, inputTokens, outputTokens };
  }

  private async saveSnapshot(sequence: LlamaContextSequence, statePath: string): Promise<void> {
    const tmp = `${statePath}.${process.pid}.tmp`;
    await sequence.saveStateToFile(tmp);
    // Rename is atomic: a crash leaves either the previous snapshot or the new one, never a torn file.
    await fs.promises.rename(tmp, statePath);
  }

  /** Restores a snapshot; undefined (sequence cleared, reason logged) when it cannot be used. */
  private async tryRestore(loaded: LoadedModel, sequence: LlamaContextSequence, snapshot: GenerationSnapshot) {
    try {
      if (!path.basename(snapshot.statePath).startsWith(loaded.fingerprint + '-')) {
        throw new Error('snapshot was taken with a different model file');
      }
      if (!fs.existsSync(snapshot.statePath)) throw new Error('snapshot state file is missing');
      await sequence.loadStateFromFile(snapshot.statePath, { acceptRisk: true });
      const tokens = sequence.contextTokens;
      if (tokens.length === 0 || tokens.length <= snapshot.outputTokens) {
        throw new Error('snapshot state does not match its token count');
      }
      // Logits are not part of the saved state: drop the last token and evaluate it again to sample the next one.
      const lastToken = tokens[tokens.length - 1]!;
      await sequence.eraseContextTokenRanges([{ start: tokens.length - 1, end: tokens.length }]);
      return { lastToken, contextTokens: tokens.length };
    } catch (err) {
      this.log(`resume: snapshot not used (${describe(err)}); evaluating prompt + delivered text again`);
      await sequence.clearHistory();
      return undefined;
    }
  }
}

interface LlamaSelection {
  llama: Llama;
  /** 'cpu' or the GPU API of the loaded binary. */
  compute: string;
  devices: string[];
  /** Cores useful for math (physical cores), the ceiling of the thread candidates. */
  mathCores: number;
  /** Why the CPU is used although a GPU was asked for (or looked for under 'auto'). */
  fallbackReason?: string;
}

/**
 * Loads the llama.cpp binary for `choice`: only prebuilt binaries (never compile, never download at run time);
 * node-llama-cpp tests each one in a child process before using it. Any failure falls back to the CPU binary,
 * with the reason kept for the model's status.
 */
async function selectLlama(nlc: NodeLlamaCpp, choice: GpuChoice): Promise<LlamaSelection> {
  const common = { build: 'never', logLevel: nlc.LlamaLogLevel.error, maxThreads: 0 } as const;
  let fallbackReason: string | undefined;
  if (choice !== 'off') {
    try {
      const llama = await nlc.getLlama({ ...common, gpu: choice });
      if (llama.gpu !== false) {
        const devices = await llama.getGpuDeviceNames().catch(() => [] as string[]);
        return { llama, compute: llama.gpu, devices, mathCores: llama.cpuMathCores };
      }
      fallbackReason = await noGpuReason(nlc);
      await llama.dispose().catch(() => undefined);
    } catch (err) {
      const why =
        err instanceof Error && [err.name, err.constructor.name, err.message].includes('NoBinaryFoundError')
          ? `no ${choice === 'auto' ? 'GPU' : choice} build of llama.cpp works on this machine`
          : describe(err);
      fallbackReason = `GPU "${choice}" is not usable here (${why}); running on the CPU`;
    }
  }
  const llama = await nlc.getLlama({ ...common, gpu: false });
  return { llama, compute: 'cpu', devices: [], mathCores: llama.cpuMathCores, ...(fallbackReason ? { fallbackReason } : {}) };
}

async function noGpuReason(nlc: NodeLlamaCpp): Promise<string> {
  const detected = (await nlc.getLlamaGpuTypes('supported').catch(() => [])).filter((t) => t !== false);
  return detected.length
    ? `the ${detected.join('/')} build did not work on this machine; running on the CPU`
    : 'no GPU found (no CUDA, Vulkan or Metal runtime on this machine); running on the CPU';
}

/**
 * Decode tokens/s of `model` with `threads` threads: the prompt and one token untimed, then real generation steps
 * (sampling included) until 300 ms and at least 4 tokens, or 32 tokens.
 */
async function measureDecode(model: LlamaModel, prompt: Token[], threads: number): Promise<number> {
  const context = await oneSequenceContext(model, Math.min(512, model.trainContextSize), threads);
  try {
    const sequence = context.getSequence();
    let n = 0;
    let t0 = 0;
    // yieldEogToken: an end token does not end the measurement (it costs the same decode step).
    for await (const token of sequence.evaluate(prompt, { temperature: 0, yieldEogToken: true })) {
      void token;
      n++;
      if (n === 1) {
        t0 = performance.now();
        continue;
      }
      const elapsed = performance.now() - t0;
      if ((n - 1 >= 4 && elapsed >= 300) || n - 1 >= 32) return ((n - 1) / elapsed) * 1000;
    }
    const elapsed = performance.now() - t0;
    return n > 1 && elapsed > 0 ? ((n - 1) / elapsed) * 1000 : 0;
  } finally {
    await context.dispose();
  }
}
