// Choosing the hardware a model runs on: the GPU API (with the CPU as the fallback that never fails a task) and
// the CPU thread count, decided by measurement and cached per model file + machine.
//
// Why measure threads instead of a constant (decode tokens/s, CPU only; ../shared/design/GPU.md and docs/runtime.md):
//   16 cores: demo model (0.5 MB) best at 1–4 threads, 16 threads 0.4× of that; 82 MB model best at 8–16;
//             643 MB model best at 15–16, 1 thread 0.16× of that.
//   2 cores:  1 thread best for models up to ~100 MB (2 threads collapse to 1/25 when Node shares the cores).
// No constant is within 0.9× of the best on both machines, so `auto` times real decode steps over a few candidate
// counts while the model loads (well under a second for small models; a few seconds once for multi-GB ones on a
// CPU) and caches the winner in the data directory, keyed by the model file and the machine.
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

export const GPU_CHOICES = ['auto', 'off', 'cuda', 'vulkan', 'metal'] as const;
export type GpuChoice = (typeof GPU_CHOICES)[number];
/** 'auto' = node-llama-cpp's fitting by free VRAM; a number = at most that many layers; 0 = none. */
export type GpuLayersChoice = 'auto' | number;
/** 'auto' = calibrated at load; a number = exactly that many threads. */
export type ThreadsChoice = 'auto' | number;

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
  const run = { compute: parts.compute, devices: parts.devices, gpuLayers: parts.gpuLayers, engine: parts.engine };
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
