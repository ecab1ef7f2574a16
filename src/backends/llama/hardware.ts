// What a model runs on: the settings' vocabulary (gpu, gpuLayers, threads; read by the CLI and the editor) and the
// hardware decisions made when a model loads: which llama.cpp binary (GPU API) and how many layers go on the GPU.
// Invariants: only prebuilt binaries are used (never compiled, never downloaded at run time), and node-llama-cpp
// tests each one in a child process first; the CPU is the fallback that never fails a task, and every fallback keeps
// its reason for the model's status. The thread count is measured in threadCalibration.ts. Why these defaults, and
// the figures: docs/hardware.md; what a GPU machine needs (Vulkan on a headless NVIDIA server): docs/gpu.md.
import type { Llama, LlamaModel } from 'node-llama-cpp' with { 'resolution-mode': 'import' };
import { errorText } from '../../runtime/problems';
import { llamaLogger } from './llamaLog';
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
}

/**
 * Loads the llama.cpp binary for `choice`: a GPU build when one is asked for (or, under 'auto', present) and works,
 * else the CPU build, with the reason kept for the model's status.
 */
export async function selectLlama(nlc: NodeLlamaCpp, choice: GpuChoice, log: (line: string) => void = () => {}): Promise<LlamaSelection> {
  // llama.cpp's own lines go to our log (llamaLog.ts), never to the console or stdout.
  const common = { build: 'never', logLevel: nlc.LlamaLogLevel.error, logger: llamaLogger(log), maxThreads: 0 } as const;
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
          : errorText(err, Number.POSITIVE_INFINITY);
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
