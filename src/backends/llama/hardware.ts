// What a model runs on: the settings' vocabulary (gpu, gpuLayers, threads; read by the CLI and the editor) and the
// hardware decisions made when a model loads: which llama.cpp binary (GPU API) and how many layers go on the GPU.
// Invariants: nothing is compiled or downloaded at run time: the binaries are node-llama-cpp's prebuilt ones (tested
// by node-llama-cpp in a child process first) and, on the CPU, this machine's native build when `build-engine` made
// one (nativeBuild.ts: verified in a child process when built; a build that does not load falls back to the
// prebuilt binary with the reason logged); the CPU is the fallback that never fails a task, and every fallback keeps
// its reason for the model's status. The thread count is measured in threadCalibration.ts. Why these defaults, and
// the figures: docs/hardware.md; what a GPU machine needs (Vulkan on a headless NVIDIA server): docs/gpu.md.
import type { Llama, LlamaModel } from 'node-llama-cpp' with { 'resolution-mode': 'import' };
import { createRequire } from 'node:module';
import { errorText } from '../../runtime/problems';
import { llamaLogger } from './llamaLog';
import { findNativeBuild, machineIdentity, nativeBuildKey, type NativeBuildState } from './nativeBuild';
import type { NodeLlamaCpp } from './nodeLlamaCpp';

export const GPU_CHOICES = ['auto', 'off', 'cuda', 'vulkan', 'metal'] as const;
export type GpuChoice = (typeof GPU_CHOICES)[number];
/** 'auto' = node-llama-cpp's fitting by free VRAM; a number = at most that many layers; 0 = none. */
export type GpuLayersChoice = 'auto' | number;
/** 'auto' = calibrated at load; a number = exactly that many threads. */
export type ThreadsChoice = 'auto' | number;

/** The most threads a setting, a flag or a calibration may give. */
export const MAX_THREADS = 256;
export const MAX_GPU_LAYERS = 10_000;

export function isGpuChoice(v: unknown): v is GpuChoice {
  return typeof v === 'string' && (GPU_CHOICES as readonly string[]).includes(v);
}

/**
 * Parses 'auto' | integer text (CLI) or values (settings) for threads / gpu layers; undefined when invalid.
 * `min` is 1 for threads, 0 for layers.
 */
export function parseAutoOrInt(v: unknown, min: number, max: number): 'auto' | number | undefined {
  if (v === 'auto') return 'auto';
  const n = typeof v === 'string' && /^[0-9]+$/.test(v) ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < min || n > max) return undefined;
  return n;
}

export interface LlamaSelection {
  llama: Llama;
  /** 'cpu' or the GPU API of the loaded binary. */
  compute: string;
  devices: string[];
  /** Cores useful for math (physical cores), the ceiling of the thread candidates. */
  mathCores: number;
  /** Why the CPU is used although a GPU was asked for (or looked for under 'auto'). */
  fallbackReason?: string;
  /** Which llama.cpp binary: node-llama-cpp's prebuilt one, or this machine's native build (its cache key). */
  build: EngineBuild;
}

export type EngineBuild = { kind: 'prebuilt'; reason?: string } | { kind: 'native'; key: string };

/** Where to look for a native build: a cache folder (nativeBuild.ts's root), or false for the prebuilt binary only. */
export type NativeBuildsChoice = string | false;

/**
 * Loads the llama.cpp binary for `choice`: a GPU build when one is asked for (or, under 'auto', present) and works,
 * else the CPU build, with the reason kept for the model's status.
 */
export async function selectLlama(
  nlc: NodeLlamaCpp,
  choice: GpuChoice,
  log: (line: string) => void = () => {},
  nativeBuilds: NativeBuildsChoice = false,
): Promise<LlamaSelection> {
  // llama.cpp's own lines go to our log (llamaLog.ts), never to the console or stdout.
  const common = { build: 'never', logLevel: nlc.LlamaLogLevel.error, logger: llamaLogger(log), maxThreads: 0 } as const;
  const native = nativeBuilds === false ? undefined : findNativeBuild(nativeBuilds, nativeBuildKey(await nlc.getModuleVersion(), machineIdentity()));
  let fallbackReason: string | undefined;
  // With a native build and no GPU runtime at all, no prebuilt binary is loaded just to find that out.
  const probeGpu = choice !== 'off' && !(choice === 'auto' && native?.state === 'ready' && !(await anyGpuRuntime(nlc)));
  if (probeGpu) {
    try {
      const llama = await nlc.getLlama({ ...common, gpu: choice });
      if (llama.gpu !== false) {
        const devices = await llama.getGpuDeviceNames().catch(() => [] as string[]);
        return { llama, compute: llama.gpu, devices, mathCores: llama.cpuMathCores, build: { kind: 'prebuilt' } };
      }
      fallbackReason = await noGpuReason(nlc);
      await llama.dispose().catch(() => undefined);
    } catch (err) {
      const why =
        err instanceof Error && [err.name, err.constructor.name, err.message].includes('NoBinaryFoundError')
          ? `no ${choice === 'auto' ? 'GPU' : choice} build of llama.cpp works on this machine`
          : errorText(err, Number.POSITIVE_INFINITY);
      fallbackReason = `GPU "${choice}" is not usable here (${why}); running on the CPU`;
    }
  } else if (choice === 'auto') {
    fallbackReason = 'no GPU found (no CUDA, Vulkan or Metal runtime on this machine); running on the CPU';
  }
  const reasonPart = fallbackReason ? { fallbackReason } : {};
  let prebuiltReason: string | undefined;
  if (native?.state === 'ready') {
    try {
      const llama = await loadNativeLlama(nlc, native, common);
      log(`engine: native build ${native.key} (${describeCmake(native.manifest.cmakeOptions)}), from ${native.dir}`);
      return { llama, compute: 'cpu', devices: [], mathCores: llama.cpuMathCores, ...reasonPart, build: { kind: 'native', key: native.key } };
    } catch (err) {
      // errorText spells no absolute path (the reason reaches GET /models; the cache is under a user's home).
      prebuiltReason = `the native build ${native.key} did not load (${errorText(err, Number.POSITIVE_INFINITY)})`;
    }
  } else if (native) {
    prebuiltReason = native.reason;
  }
  if (prebuiltReason) log(`engine: prebuilt binary: ${prebuiltReason}`);
  const llama = await nlc.getLlama({ ...common, gpu: false });
  return {
    llama,
    compute: 'cpu',
    devices: [],
    mathCores: llama.cpuMathCores,
    ...reasonPart,
    build: { kind: 'prebuilt', ...(prebuiltReason ? { reason: prebuiltReason } : {}) },
  };
}

async function anyGpuRuntime(nlc: NodeLlamaCpp): Promise<boolean> {
  const types = await nlc.getLlamaGpuTypes('supported').catch(() => [] as const);
  return types.some((t) => t !== false);
}

function describeCmake(options: Record<string, string>): string {
  return Object.entries(options)
    .map(([k, v]) => `${k}=${v}`)
    .join(' ');
}

/**
 * Loads the native build's addon through node-llama-cpp's own factory (`Llama._create`, what `getLlama` calls for a
 * local build inside node_modules; node-llama-cpp has no option for a build folder of ours). Pinned node-llama-cpp:
 * the factory's absence is reported as the reason, never a crash.
 */
async function loadNativeLlama(
  nlc: NodeLlamaCpp,
  build: NativeBuildState & { state: 'ready' },
  common: { logLevel: unknown; logger: unknown },
): Promise<Llama> {
  const factory = (nlc.Llama as unknown as { _create?: (options: Record<string, unknown>) => Promise<Llama> })._create;
  if (typeof factory !== 'function') throw new Error('this node-llama-cpp has no Llama._create to load a build with');
  const bindings: unknown = createRequire(__filename)(build.bindingPath);
  return await factory.call(nlc.Llama, {
    bindings,
    bindingPath: build.bindingPath,
    buildType: 'localBuild',
    buildMetadata: {
      buildOptions: {
        customCmakeOptions: build.manifest.cmakeOptions,
        gpu: false,
        llamaCpp: { repo: 'ggml-org/llama.cpp', release: build.manifest.llamaCppRelease },
      },
    },
    logLevel: common.logLevel,
    logger: common.logger,
    maxThreads: 0,
    vramPadding: 0,
    // node-llama-cpp's default RAM padding (getLlama's defaultLlamaRamPadding).
    ramPadding: (total: number) => Math.floor(Math.min(total * 0.25, 1024 ** 3 * (process.platform === 'linux' ? 1 : 6))),
    skipLlamaInit: false,
    debug: false,
    numa: false,
    tempDir: false,
  });
}

/** "prebuilt binary" or "native build KEY": what the hardware report says the model runs on. */
export function describeEngineBuild(build: EngineBuild): string {
  return build.kind === 'native' ? `native build ${build.key}` : 'prebuilt binary';
}

async function noGpuReason(nlc: NodeLlamaCpp): Promise<string> {
  const detected = (await nlc.getLlamaGpuTypes('supported').catch(() => [])).filter((t) => t !== false);
  return detected.length
    ? `the ${detected.join('/')} build did not work on this machine; running on the CPU`
    : 'no GPU found (no CUDA, Vulkan or Metal runtime on this machine); running on the CPU';
}

export interface PlacedModel<T> {
  model: LlamaModel;
  /** What `prepare` made on the model where it runs (on the GPU path: what proved the model fits). */
  prepared: T;
  /** Why the model runs on the CPU although a GPU was wanted; the selection's reason when it had one. */
  fallbackReason?: string;
}

/**
 * Loads the weights on the selected binary with at most `gpuLayers` layers offloaded ('auto': node-llama-cpp fits
 * them to free VRAM), then runs `prepare` on the model (which makes the tasks' one context: it is made once, and on
 * the GPU path it is what proves the model fits). A model or context that does not fit in free VRAM, or a GPU that
 * fails while loading, loads again on the CPU instead: after the GPU attempt's memory is freed.
 */
export async function placeModel<T>(
  selection: LlamaSelection,
  params: {
    modelPath: string;
    gpuLayers: GpuLayersChoice;
    /** Makes what tasks use on the model (its context); `onGpu`: some layers are offloaded. */
    prepare: (model: LlamaModel, onGpu: boolean) => Promise<T>;
    signal?: AbortSignal;
    onProgress: (progress: number) => void;
  },
): Promise<PlacedModel<T>> {
  const { modelPath, gpuLayers, signal, onProgress } = params;
  const loadWith = (layers: GpuLayersChoice) =>
    selection.llama.loadModel({ modelPath, gpuLayers: layers, loadSignal: signal, onLoadProgress: onProgress });
  const onCpu = async (fallbackReason?: string): Promise<PlacedModel<T>> => {
    const model = await loadWith(0);
    try {
      return { model, prepared: await params.prepare(model, false), ...(fallbackReason ? { fallbackReason } : {}) };
    } catch (err) {
      await model.dispose().catch(() => undefined);
      throw err;
    }
  };
  if (selection.compute === 'cpu' || gpuLayers === 0) return onCpu(selection.fallbackReason);
  let onGpu: LlamaModel | undefined;
  try {
    onGpu = await loadWith(gpuLayers);
    const prepared = await params.prepare(onGpu, onGpu.gpuLayers > 0);
    if (onGpu.gpuLayers === 0) {
      return { model: onGpu, prepared, fallbackReason: 'the model does not fit in free GPU memory; running on the CPU' };
    }
    return { model: onGpu, prepared, ...(selection.fallbackReason ? { fallbackReason: selection.fallbackReason } : {}) };
  } catch (err) {
    await onGpu?.dispose().catch(() => undefined);
    signal?.throwIfAborted();
    return onCpu(`the GPU could not hold the model (${errorText(err, Number.POSITIVE_INFINITY)}); running on the CPU`);
  }
}
