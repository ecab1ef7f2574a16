// One model's load, in the order that keeps one-time costs inside `loading` (docs/hardware.md): the file (downloaded
// first for a URI), the llama.cpp binary, the layers on the GPU, the thread count (threadCalibration.ts), the context
// size per sequence and the sequences (contextPool.ts), the template, then a warm-up generation. Progress: a download
// 0.9 of the bar, weights 0.8 of the rest, calibration and warm-up the remainder. The backend (llamaBackend.ts) owns
// when a load happens (modelEntries.ts) and what listens to its end.

import * as fs from 'node:fs';
import * as path from 'node:path';
import type { ChatWrapper, LlamaModel } from 'node-llama-cpp' with { 'resolution-mode': 'import' };
import type { LoadOptions, ModelHardware } from '../../runtime/backend';
import { describeHardware } from '../../runtime/backend';
import { errorText } from '../../runtime/problems';
import { isModelUri } from '../modelSource';
import { describeMissingSeams } from './nativeSeams';
import { BatchedContextPool, chooseSequences, fitContextSize } from './contextPool';
import { longestTokenBytes } from './contextFit';
import { gemma3WrapperFor } from './gemmaTemplate';
import { GrammarCache } from './grammar';
import { placeModel, type LlamaSelection } from './hardware';
import type { LlamaBackendOptions } from './llamaBackend';
import { headerFacts, loadedCapabilities } from './capabilities';
import type { LoadedModel } from './loadedModel';
import type { ModelEntry } from './modelEntries';
import { importNodeLlamaCpp, type NodeLlamaCpp } from './nodeLlamaCpp';
import { modelFingerprint } from './snapshots';
import {
  DEFAULT_PROMPT_LOOKUP,
  draftPredictor,
  LOOKUP_PAYS_BELOW_TOKENS_PER_S,
  loadDraft,
  lookupPays,
  lookupPredictor,
  type DraftContext,
} from './speculative';
import { promptThreadsFor, timingPrompt, type ThreadCalibrator } from './threadCalibration';

export interface ModelLoadDeps {
  settings: Pick<LlamaBackendOptions, 'contextSize' | 'concurrency' | 'gpuLayers' | 'modelsDir' | 'promptLookup' | 'draftModel'>;
  /** The llama.cpp binary the backend selected once (hardware.ts). */
  llama: (nlc: NodeLlamaCpp) => Promise<LlamaSelection>;
  calibrator: ThreadCalibrator;
  log: (msg: string) => void;
  /** Called a microtask after the load returns: the entry is `loaded` then, and its sequences may all start. */
  onLoaded: () => void;
}

/** Error text without absolute paths (they end up in problem details and task errors): the runtime's scrubber. */
function describe(err: unknown): string {
  return errorText(err, Number.POSITIVE_INFINITY);
}

export async function loadModel(entry: ModelEntry<LoadedModel>, options: LoadOptions, deps: ModelLoadDeps): Promise<LoadedModel> {
  const report = (p: number) => options.onProgress?.(Math.min(1, Math.max(0, p)));
  report(0);
  const started = Date.now();
  try {
    const nlc = await importNodeLlamaCpp();
    const selection = await deps.llama(nlc);
    let modelPath: string;
    // Download share of the progress bar when a URI has to be fetched first.
    let base = 0;
    if (isModelUri(entry.source)) {
      if (!deps.settings.modelsDir) throw new Error('no models directory configured for model URIs');
      modelPath = await nlc.resolveModelFile(entry.source, {
        directory: deps.settings.modelsDir,
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
    const setting = deps.settings.contextSize ?? 'auto';
    const concurrencySetting = deps.settings.concurrency ?? 'auto';
    // The tasks' one context is made once, inside placeModel (on the GPU path it proves the model fits there):
    // thread count first (small contexts of its own), then the context size per sequence, then the sequences.
    const { model, prepared, fallbackReason } = await placeModel(selection, {
      modelPath,
      gpuLayers: deps.settings.gpuLayers ?? 'auto',
      signal: options.signal,
      onProgress: (p) => report(base + weightsShare * p),
      prepare: async (m, onGpu) => {
        const compute = onGpu ? selection.compute : 'cpu';
        const devices = onGpu ? selection.devices : [];
        const picked = await deps.calibrator.pick(
          m,
          {
            modelPath,
            fingerprint,
            compute,
            devices,
            gpuLayers: m.gpuLayers,
            mathCores: selection.mathCores,
            ...(selection.build.kind === 'native' ? { engineBuild: selection.build.key } : {}),
          },
          options.signal,
        );
        const layersOnCpu = m.gpuLayers < (m.fileInsights.totalLayers ?? Number.POSITIVE_INFINITY);
        const promptThreads = promptThreadsFor(picked, selection.mathCores, layersOnCpu);
        report(base + weightsShare + (1 - base - weightsShare) * 0.6);
        // 'auto': node-llama-cpp's fitting for one sequence (as large as free memory allows, up to the trained
        // size), computed without making a context (fitContextSize), so the tasks' context is the only full-size one.
        const fitted = setting === 'auto' ? await fitContextSize(m) : setting;
        const perSequence = Math.min(fitted, m.trainContextSize);
        /** The one-token decode rate prompt lookup's `auto` goes by: the thread calibration's, at the chosen count. */
        const decodeRate = picked.measured?.[String(picked.threads)];
        const chosen = await chooseSequences(m, selection.llama, { setting: concurrencySetting, contextSize: perSequence, onGpu });
        let sequences = chosen.sequences;
        let contextSize: number | 'auto' = perSequence;
        for (;;) {
          let draft: DraftContext | undefined;
          try {
            // Speculative decoding (speculative.ts): a draft model's context of as many sequences, else prompt lookup.
            const draftPath = deps.settings.draftModel;
            draft = draftPath
              ? await loadDraft(selection.llama, m, {
                  modelPath: draftPath,
                  contextSize: contextSize === 'auto' ? perSequence : contextSize,
                  sequences,
                  threads: picked.threads,
                  log: (msg) => deps.log(`model ${entry.id}: ${msg}`),
                  ...(options.signal ? { signal: options.signal } : {}),
                })
              : undefined;
            const lookup = deps.settings.promptLookup ?? DEFAULT_PROMPT_LOOKUP;
            const predictor = draft
              ? () => draftPredictor(nlc, draft!.context.getSequence())
              : lookup === 'on' || (lookup === 'auto' && lookupPays(decodeRate))
                ? () => lookupPredictor(nlc, lookup)
                : undefined;
            const onDispose = draft?.dispose;
            const pool = await BatchedContextPool.create(m, {
              contextSize,
              threads: picked.threads,
              promptThreads,
              sequences,
              predictor,
              ...(onDispose ? { onDispose } : {}),
            });
            // Where speculation does not pay its sequences get no predictor: node-llama-cpp's speculative path costs
            // every token of a fast model more than it saves (speculative.ts).
            const rate = decodeRate === undefined ? 'not measured' : `${Math.round(decodeRate)} tokens/s`;
            const speculation = draft
              ? `draft model ${path.basename(draftPath!)}`
              : lookup === 'auto'
                ? `prompt lookup (auto: ${predictor ? 'on' : 'off'}, decode ${rate}, on below ${LOOKUP_PAYS_BELOW_TOKENS_PER_S})`
                : lookup === 'on'
                  ? 'prompt lookup (on)'
                  : 'off';
            return { picked, promptThreads, pool, sequences, speculation };
          } catch (err) {
            await draft?.dispose();
            // 'auto' asked for more than fits after all: fewer sequences, down to one; then, for an 'auto' size,
            // node-llama-cpp's own fitting, which shrinks the context until it is made.
            if (concurrencySetting === 'auto' && sequences > 1) sequences = Math.max(1, Math.floor(sequences / 2));
            else if (setting === 'auto' && contextSize !== 'auto') contextSize = 'auto';
            else throw err;
          }
        }
      },
    });
    const { picked, promptThreads, pool, sequences, speculation } = prepared;
    const contextSize = pool.contextSize;
    const chatWrapper = chatWrapperFor(nlc, model);
    const totalLayers = model.fileInsights.totalLayers ?? null;
    const onGpu = selection.compute !== 'cpu' && model.gpuLayers > 0;
    const hardware: ModelHardware = {
      compute: onGpu ? selection.compute : 'cpu',
      devices: onGpu ? selection.devices : [],
      gpuLayers: model.gpuLayers,
      totalLayers,
      threads: picked.threads,
      threadsFrom: picked.from,
      ...(picked.cap !== undefined ? { threadsCap: picked.cap } : {}),
      promptThreads,
      ...(picked.measured ? { threadTokensPerSecond: picked.measured } : {}),
      sequences,
      sequencesFrom: concurrencySetting === 'auto' ? 'auto' : 'setting',
      ...(fallbackReason ? { fallbackReason } : {}),
      ...(pool.missingSeams.length ? { nativeSeamsMissing: [...pool.missingSeams] } : {}),
      speculation,
      build:
        selection.build.kind === 'native'
          ? { kind: 'native', key: selection.build.key, ...(pool.oneStep ? { oneStep: true } : {}) }
          : { kind: 'prebuilt', ...(selection.build.reason ? { reason: selection.build.reason } : {}) },
    };
    if (pool.missingSeams.length) deps.log(`model ${entry.id}: ${describeMissingSeams(pool.missingSeams)}`);
    report(base + weightsShare + (1 - base - weightsShare) * 0.8);
    const loaded: LoadedModel = {
      llama: selection.llama,
      model,
      grammars: new GrammarCache(selection.llama),
      trainContextSize: model.trainContextSize,
      longestToken: longestTokenBytes(model.fileInfo.metadata.tokenizer?.ggml?.tokens as readonly string[] | undefined),
      contextSize,
      hardware,
      chatWrapper,
      capabilities: loadedCapabilities(headerFacts(model.fileInfo.metadata), chatWrapper),
      fingerprint,
      pool,
      concurrency: sequences,
      active: 0,
    };
    hardware.warmupMs = await warmUp(loaded);
    if (onGpu) {
      const vram = await selection.llama.getVramState().catch(() => undefined);
      if (vram && vram.total > 0) hardware.vram = { total: vram.total, used: vram.used };
    }
    report(1);
    // After this load's entry is `loaded` (a microtask later), the scheduler may start `sequences` tasks at once.
    queueMicrotask(deps.onLoaded);
    deps.log(
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
 * The chat wrapper a model's prompts go through: node-llama-cpp's resolution (a specialized wrapper where it renders
 * as the file's Jinja template does, else the template itself); undefined for a file without a template (the
 * plain-text prompt). docs/model-families.md lists what each family's file resolves to.
 */
export function chatWrapperFor(nlc: NodeLlamaCpp, model: LlamaModel): ChatWrapper | undefined {
  const template = model.fileInfo.metadata.tokenizer?.chat_template;
  if (!template) return undefined;
  // Today's date, as llama.cpp gives it to templates (strftime "%d %b %Y", local time: Llama 3.1's "Today Date").
  const now = new Date();
  const month = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'][now.getMonth()];
  const dateString = `${String(now.getDate()).padStart(2, '0')} ${month} ${now.getFullYear()}`;
  let wrapper = nlc.resolveChatWrapper(model, {
    customWrapperSettings: { jinjaTemplate: { additionalRenderParameters: { date_string: dateString } } },
  });
  // A Harmony template (gpt-oss) that node-llama-cpp did not find equivalent to its Harmony wrapper falls to the Jinja
  // wrapper, which cannot render Harmony's channels (it forces the answer into `final`) nor its calls; node-llama-cpp's
  // own rule for such a template, when it skips the equivalence check, is the Harmony wrapper.
  if (wrapper instanceof nlc.JinjaTemplateChatWrapper && template.includes('<|start|>') && template.includes('<|channel|>'))
    wrapper = new nlc.HarmonyChatWrapper();
  // Gemma 3's template (found by rendering it, gemmaTemplate.ts): node-llama-cpp picks GemmaChatWrapper by the name,
  // whose prompt is not the template's (a `---` rule after the system text, functions documented in its own words).
  wrapper = gemma3WrapperFor(nlc, model, template) ?? wrapper;
  rawTextResults(nlc, wrapper);
  return wrapper;
}

/**
 * A tool result the client sent as text goes into the prompt as that text, as templates print a `tool` message's
 * content (and llama.cpp renders it): node-llama-cpp's wrappers write every result as JSON (`jsonDumps`), which turns
 * the text `{"temp_c":-3}` into the string literal `"{\"temp_c\":-3}"`. The wrapper's own result rendering is kept
 * (its prefix and suffix); only the quoted text is put back as it was sent.
 */
function rawTextResults(nlc: NodeLlamaCpp, wrapper: ChatWrapper): void {
  const render = wrapper.generateFunctionCallResult.bind(wrapper);
  const marker = '\u{F0000}tool-result\u{F0001}';
  const quoted = JSON.stringify(marker);
  wrapper.generateFunctionCallResult = (name, params, result) => {
    if (typeof result !== 'string') return render(name, params, result);
    const text = render(name, params, marker);
    if (!text.values.some((v) => typeof v === 'string' && v.includes(quoted))) return render(name, params, result);
    return nlc.LlamaText(text.values.map((v) => (typeof v === 'string' ? v.split(quoted).join(result) : v)));
  };
}

/**
 * A short generation on a sequence from the pool tasks will use, so that one-time costs (GPU pipeline compilation;
 * docs/hardware.md) fall inside `loading` rather than into the first task's first token.
 */
async function warmUp(loaded: LoadedModel): Promise<number> {
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
