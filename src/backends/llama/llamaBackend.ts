// ModelBackend on node-llama-cpp: local GGUF files (or model URIs resolved into a models directory), CPU only.

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
  ModelInfo,
  ModelState,
} from '../../runtime/backend';
import { errorText } from '../../runtime/problems';
import { chatHistory, plainTextPrompt } from './prompt';
import { TokenTextStream } from './tokenTextStream';

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
  /** CPU threads per context. Default: DEFAULT_THREADS. */
  threads?: number;
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

/**
 * Default thread count. Measured on the shared 2-core dev machine (load average 4–8 from parallel work), tiny demo
 * model, 400 forced tokens via LlamaContextSequence.evaluate(), best of 3: 1 thread 1,200–1,750 tokens/s,
 * 2 threads 26–176 tokens/s (runs as low as 6). With 2 threads on 2 busy cores llama.cpp's worker threads wait
 * for each other on every tiny graph. Multi-GB models are compute-bound and want more threads: set `threads`.
 */
export const DEFAULT_THREADS = 1;
const DEFAULT_MAX_CONTEXT = 4096;
const DEFAULT_TEMPERATURE = 0.8;
/** Idle contexts kept per model for reuse (creating one allocates the KV cache). */
const MAX_IDLE_CONTEXTS = 2;

let nodeLlamaCppPromise: Promise<NodeLlamaCpp> | undefined;
/** node-llama-cpp is ESM-only and heavy: import it only when the first model loads. */
function importNodeLlamaCpp(): Promise<NodeLlamaCpp> {
  nodeLlamaCppPromise ??= import('node-llama-cpp');
  return nodeLlamaCppPromise;
}

interface LoadedModel {
  model: LlamaModel;
  contextSize: number;
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

function isModelUri(source: string): boolean {
  // "C:\\…" is a Windows path, not a URI scheme.
  return /^[a-z][a-z0-9+.-]+:/i.test(source) && !/^[a-z]:[\\/]/i.test(source);
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
  readonly supportsSnapshots = true;

  private readonly entries: ModelEntry[];
  private readonly threads: number;
  private llamaPromise?: Promise<Llama>;
  private disposed = false;

  constructor(private readonly options: LlamaBackendOptions) {
    const seen = new Set<string>();
    this.entries = options.models.map((m) => {
      const id = m.id ?? defaultId(m.source);
      if (seen.has(id)) throw new Error(`duplicate model id "${id}"`);
      seen.add(id);
      return { id, source: m.source, demo: !!m.demo, state: 'unloaded', maxContextLength: null };
    });
    this.threads = Math.max(1, Math.floor(options.threads ?? DEFAULT_THREADS));
  }

  listModels(): ModelInfo[] {
    return this.entries.map((e) => ({
      id: e.id,
      source: e.source,
      state: e.state,
      maxContextLength: e.maxContextLength,
      demo: e.demo,
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
    const llama = this.llamaPromise;
    this.llamaPromise = undefined;
    if (llama) await (await llama.catch(() => undefined))?.dispose().catch(() => undefined);
  }

  private entry(id: string): ModelEntry | undefined {
    return this.entries.find((e) => e.id === id);
  }

  private log(msg: string): void {
    this.options.log?.(msg);
  }

  private getLlama(nlc: NodeLlamaCpp): Promise<Llama> {
    // Prebuilt CPU binary only: never compile, never download a binary at run time.
    this.llamaPromise ??= nlc.getLlama({ gpu: false, build: 'never', logLevel: nlc.LlamaLogLevel.error });
    return this.llamaPromise;
  }

  private async loadEntry(entry: ModelEntry, options: LoadOptions): Promise<LoadedModel> {
    if (this.disposed) throw new Error('backend disposed');
    const report = (p: number) => options.onProgress?.(Math.min(1, Math.max(0, p)));
    report(0);
    const started = Date.now();
    try {
      const nlc = await importNodeLlamaCpp();
      const llama = await this.getLlama(nlc);
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
      const model = await llama.loadModel({
        modelPath,
        gpuLayers: 0,
        loadSignal: options.signal,
        onLoadProgress: (p) => report(base + (1 - base) * p),
      });
      const contextSize = Math.min(
        model.trainContextSize,
        this.options.contextSize ?? Math.min(model.trainContextSize, DEFAULT_MAX_CONTEXT),
      );
      const template = model.fileInfo.metadata.tokenizer?.chat_template;
      const chatWrapper = template ? nlc.resolveChatWrapper(model) : undefined;
      const loaded: LoadedModel = { model, contextSize, chatWrapper, fingerprint, idle: [], busy: new Set() };
      // Create the first context now so that load errors (memory) surface here, not in the first generation.
      loaded.idle.push(await this.createContext(loaded));
      report(1);
      this.log(
        `model ${entry.id} loaded in ${Date.now() - started} ms (context ${contextSize}, ${this.threads} thread(s), ` +
          `${chatWrapper ? 'chat template' : 'plain-text prompt'})`,
      );
      return loaded;
    } catch (err) {
      if (options.signal?.aborted) throw new Error(`loading model "${entry.id}" was cancelled`);
      throw new Error(`cannot load model "${entry.id}": ${describe(err)}`);
    }
  }

  private createContext(loaded: LoadedModel): Promise<LlamaContext> {
    return loaded.model.createContext({ contextSize: loaded.contextSize, threads: this.threads, sequences: 1 });
  }

  private async acquireContext(loaded: LoadedModel): Promise<LlamaContext> {
    const context = loaded.idle.pop() ?? (await this.createContext(loaded));
    loaded.busy.add(context);
    return context;
  }

  private async releaseContext(loaded: LoadedModel, context: LlamaContext, sequence: LlamaContextSequence) {
    loaded.busy.delete(context);
    sequence.dispose();
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
    let inputTokens: number;
    let outputTokens = 0;
    let text = '';
    if (resumeFrom) {
      const restored = await this.restore(loaded, sequence, resumeFrom);
      // Text delivered after the snapshot is fed back, not generated again.
      const delivered = resumeFrom.continueText ? model.tokenize(resumeFrom.continueText, false) : [];
      input = [restored.lastToken, ...delivered];
      inputTokens = restored.contextTokens - resumeFrom.outputTokens;
      outputTokens = resumeFrom.outputTokens + delivered.length;
      text = resumeFrom.text + (resumeFrom.continueText ?? '');
    } else {
      input = this.promptTokens(loaded, request);
      inputTokens = input.length;
    }
    if (inputTokens + (resumeFrom?.outputTokens ?? 0) >= loaded.contextSize) {
      throw new Error(`prompt of ${inputTokens} tokens does not fit the context of ${loaded.contextSize} tokens`);
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
      // Here every earlier token is evaluated into the sequence, this one is not: a consistent point to save.
      if (snapshots && snapshotPath && stream.clean && Date.now() - lastSnapshot >= snapshots.everyMs) {
        await this.saveSnapshot(sequence, snapshotPath);
        lastSnapshot = Date.now();
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

  private async restore(loaded: LoadedModel, sequence: LlamaContextSequence, snapshot: GenerationSnapshot) {
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
  }
}
