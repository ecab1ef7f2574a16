// The CPU thread count a model's one-token steps decode with: measured while the model loads, by timing real decode
// steps over a few candidate counts, and cached per model file + machine + compute (+ the setting's bound) in the
// data directory, so each combination is measured once. No constant is close to the best on every machine and model
// (the figures: docs/gpu.md, docs/hardware.md), hence the measurement. A number in the setting is a bound: the
// candidates stop at it and prompts use it. That is not llama.cpp's `--threads` (used as given), on purpose: node-
// llama-cpp 3.21.1 makes a disposable thread pool for every decode (contextPool.ts), so where each step's work is
// small more threads are slower, not faster (bench/results.json, the threads grid). Calibration is an
// optimisation: a failure never fails the load (the bound, or min(4, cores), is used and the reason is logged).
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { LlamaModel, Token } from 'node-llama-cpp' with { 'resolution-mode': 'import' };
import type { ModelHardware } from '../../runtime/backend';
import { errorText } from '../../runtime/problems';
import { oneSequenceContext } from './contextPool';
import { MAX_THREADS, type ThreadsChoice } from './hardware';

/**
 * Thread counts worth timing on a machine with `cores` cores usable for math: powers of two below it, plus
 * cores − 1 and cores (on 16 cores: 1, 2, 4, 8, 15, 16).
 */
export function threadCandidates(cores: number): number[] {
  const c = Math.max(1, Math.min(MAX_THREADS, Math.floor(cores)));
  const set = new Set<number>([1]);
  for (let n = 2; n < c; n *= 2) set.add(n);
  if (c > 2) set.add(c - 1);
  set.add(c);
  return [...set].sort((a, b) => a - b);
}

export interface ThreadChoice {
  threads: number;
  /** Best decode tokens/s seen per candidate. */
  measured: Record<string, number>;
}

/**
 * Times every candidate, then times again those within 0.75× of the best (in reverse order, so a burst of load
 * hits different candidates), keeping each one's best. Within 3 % of the best, the larger count wins: prompt
 * processing scales with threads even where decoding has saturated.
 */
export async function chooseThreads(candidates: readonly number[], measure: (threads: number) => Promise<number>): Promise<ThreadChoice> {
  if (candidates.length === 0) throw new Error('no thread candidates');
  const best = new Map<number, number>();
  const record = (n: number, tps: number) => best.set(n, Math.max(best.get(n) ?? 0, Number.isFinite(tps) ? tps : 0));
  for (const n of candidates) record(n, await measure(n));
  if (candidates.length > 1) {
    const top = Math.max(...best.values());
    for (const n of [...candidates].reverse()) if ((best.get(n) ?? 0) >= 0.75 * top) record(n, await measure(n));
  }
  const top = Math.max(...best.values());
  let threads = candidates[0]!;
  for (const n of candidates) if ((best.get(n) ?? 0) >= 0.97 * top) threads = n;
  const measured: Record<string, number> = {};
  for (const n of candidates) measured[String(n)] = Math.round((best.get(n) ?? 0) * 10) / 10;
  return { threads, measured };
}

/** What identifies "the same model on the same machine" for the calibration cache. */
export function calibrationKey(parts: {
  modelFile: string;
  /** Content fingerprint (size + head hash): a file replaced in place with other weights is another model. */
  fingerprint: string;
  compute: string;
  devices: readonly string[];
  gpuLayers: number;
  mathCores: number;
  engine: string;
  /** The setting's bound on the candidates, when it is a number. */
  cap?: number;
}): string {
  const st = fs.statSync(parts.modelFile);
  const cpus = os.cpus();
  const machine = {
    platform: process.platform,
    arch: process.arch,
    cpu: cpus[0]?.model ?? 'unknown',
    logical: cpus.length,
    mathCores: parts.mathCores,
    memory: os.totalmem(),
  };
  const model = { file: path.resolve(parts.modelFile), size: st.size, mtimeMs: Math.floor(st.mtimeMs), fingerprint: parts.fingerprint };
  const run = {
    compute: parts.compute,
    devices: parts.devices,
    gpuLayers: parts.gpuLayers,
    engine: parts.engine,
    ...(parts.cap === undefined ? {} : { cap: parts.cap }),
  };
  return createHash('sha256').update(JSON.stringify({ machine, model, run })).digest('hex').slice(0, 32);
}

interface CacheEntry {
  threads: number;
  measured: Record<string, number>;
  at: string;
}

const CACHE_VERSION = 1;
/** Entries kept: one per model × hardware combination used recently. */
const CACHE_MAX_ENTRIES = 64;

/**
 * The calibration cache: one small JSON file in the data directory, replaced atomically (temp file + rename).
 * A missing, unreadable or malformed file means "measure again", never an error.
 */
export class ThreadCalibrationCache {
  constructor(readonly file: string) {}

  get(key: string): ThreadChoice | undefined {
    const e = this.read()[key];
    if (!e || !Number.isInteger(e.threads) || e.threads < 1 || e.threads > MAX_THREADS) return undefined;
    return { threads: e.threads, measured: typeof e.measured === 'object' && e.measured ? e.measured : {} };
  }

  set(key: string, choice: ThreadChoice): void {
    const entries = this.read();
    delete entries[key];
    entries[key] = { threads: choice.threads, measured: choice.measured, at: new Date().toISOString() };
    const keys = Object.keys(entries);
    for (const k of keys.slice(0, Math.max(0, keys.length - CACHE_MAX_ENTRIES))) delete entries[k];
    fs.mkdirSync(path.dirname(this.file), { recursive: true });
    const tmp = `${this.file}.${process.pid}.tmp`;
    fs.writeFileSync(tmp, JSON.stringify({ version: CACHE_VERSION, entries }, null, 1));
    fs.renameSync(tmp, this.file);
  }

  private read(): Record<string, CacheEntry> {
    try {
      const doc = JSON.parse(fs.readFileSync(this.file, 'utf8')) as { version?: unknown; entries?: unknown };
      if (doc.version !== CACHE_VERSION || typeof doc.entries !== 'object' || doc.entries === null) return {};
      return doc.entries as Record<string, CacheEntry>;
    } catch {
      return {};
    }
  }
}

/** The cache's file name in the data directory. */
export const THREAD_CALIBRATION_FILE = 'thread-calibration.json';

/** The model and the hardware it runs on: what a calibration is keyed by (with the machine). */
export interface CalibrationRun {
  modelPath: string;
  /** The model file's content fingerprint (snapshots.ts). */
  fingerprint: string;
  compute: string;
  devices: readonly string[];
  gpuLayers: number;
  mathCores: number;
  /** The native build's key when the model runs on one (nativeBuild.ts); absent: the prebuilt binary. */
  engineBuild?: string;
}

export interface PickedThreads {
  threads: number;
  from: ModelHardware['threadsFrom'];
  /** The setting's number when it is one: no decode uses more (prompts use it). */
  cap?: number;
  /** Decode tokens/s by candidate, when calibrated (now or from the cache). */
  measured?: Record<string, number>;
}

/**
 * Threads for prompt-sized decodes (contextPool.ts, PROMPT_BATCH_TOKENS) while any layer runs on the CPU: the
 * setting's number when there is one (as llama.cpp's `--threads-batch` defaults to `--threads`), else all math
 * cores (a prompt's batch pays for node-llama-cpp's per-decode thread pool that makes one-token steps on many
 * threads slow, contextPool.ts). With every layer on the GPU, the calibrated count.
 */
export function promptThreadsFor(picked: PickedThreads, mathCores: number, layersOnCpu: boolean): number {
  if (!layersOnCpu) return picked.threads;
  if (picked.cap !== undefined) return Math.max(picked.threads, picked.cap);
  if (picked.from === 'setting') return picked.threads;
  return Math.max(picked.threads, mathCores);
}

/**
 * Picks the thread count for each model a backend loads: what this process measured before for the same key, else
 * the cache file's entry, else a fresh measurement (then cached), among the counts up to the setting's number when
 * it is one (1: nothing to measure).
 */
export class ThreadCalibrator {
  private readonly cache?: ThreadCalibrationCache;
  /** Choices known in this process, by calibration key (also when there is no cache file). */
  private readonly known = new Map<string, ThreadChoice>();

  constructor(
    private readonly options: {
      setting: ThreadsChoice;
      /** The data directory; without it, choices are kept in memory only. */
      cacheDir?: string;
      log?: (msg: string) => void;
    },
  ) {
    if (options.cacheDir) this.cache = new ThreadCalibrationCache(path.join(options.cacheDir, THREAD_CALIBRATION_FILE));
  }

  async pick(model: LlamaModel, run: CalibrationRun, signal?: AbortSignal): Promise<PickedThreads> {
    const { setting } = this.options;
    const cap = setting === 'auto' ? undefined : Math.max(1, Math.min(MAX_THREADS, Math.floor(setting)));
    if (cap === 1) return { threads: 1, from: 'setting' };
    const bound = cap === undefined ? {} : { cap };
    const key = calibrationKey({
      modelFile: run.modelPath,
      fingerprint: run.fingerprint,
      compute: run.compute,
      devices: run.devices,
      gpuLayers: run.gpuLayers,
      mathCores: run.mathCores,
      engine: run.engineBuild ? `node-llama-cpp native ${run.engineBuild}` : `node-llama-cpp`,
      ...bound,
    });
    const known = this.known.get(key) ?? this.cache?.get(key);
    if (known) {
      this.known.set(key, known);
      return { threads: known.threads, from: 'cache', measured: known.measured, ...bound };
    }
    const started = Date.now();
    const prompt = timingPrompt(model);
    let choice;
    try {
      choice = await chooseThreads(threadCandidates(cap ?? run.mathCores), async (threads) => {
        signal?.throwIfAborted();
        return measureDecode(model, prompt, threads);
      });
    } catch (err) {
      signal?.throwIfAborted();
      // E.g. no memory for the small contexts it measures on.
      const threads = cap ?? Math.max(1, Math.min(4, run.mathCores));
      this.log(`thread calibration failed (${errorText(err, Number.POSITIVE_INFINITY)}); using ${threads} thread(s)`);
      return cap === undefined ? { threads, from: 'default' } : { threads, from: 'setting' };
    }
    this.known.set(key, choice);
    try {
      this.cache?.set(key, choice);
    } catch (err) {
      this.log(`thread calibration not cached: ${errorText(err, Number.POSITIVE_INFINITY)}`);
    }
    this.log(
      `threads for ${path.basename(run.modelPath)}: ${choice.threads} (decode tokens/s by threads ` +
        `${JSON.stringify(choice.measured)}, measured in ${Date.now() - started} ms)`,
    );
    return { threads: choice.threads, from: 'calibration', measured: choice.measured, ...bound };
  }

  private log(msg: string): void {
    this.options.log?.(msg);
  }
}

/** A short fixed prompt (BOS first when the model has one) for timing decode steps: calibration and warm-up. */
export function timingPrompt(model: LlamaModel): Token[] {
  const text = model.tokenize('The task runtime measures how fast this machine decodes.');
  return model.tokens.bos !== null ? [model.tokens.bos, ...text] : text;
}

/**
 * Decode tokens/s of `model` with `threads` threads, on a small context of its own: the prompt and one token
 * untimed, then real generation steps (sampling included) until 300 ms and at least 4 tokens, or 32 tokens.
 */
export async function measureDecode(model: LlamaModel, prompt: Token[], threads: number): Promise<number> {
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
