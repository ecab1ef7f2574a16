// `native_build` section of `npm run bench`: node-llama-cpp's prebuilt binary against this machine's native build
// (OpenMP, native CPU flags; `task-runtime build-engine`, src/backends/llama/nativeBuild.ts), side by side in one run,
// the same generated models: one stream's decode tokens/s at exactly 1 and 2 threads (NATIVE_BENCH_THREADS; raw
// node-llama-cpp), and through our backend at 1 thread and with threads auto (what a task gets) — there three ways:
// prebuilt, native without the one-step path (`native_twostep`: node-llama-cpp's decodeBatch + sampleToken round
// trips) and native with it (`native`: oneStep.ts, one decodeBatchAndSample per token). Each figure from a fresh child
// process (nativeBuildChild.ts), the builds alternating, best of ROUNDS. Without a cached build the native side is
// skipped with a line that says so. Figures: docs/native-build.md.
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { writeTestModel } from '../src/backends/llama/demoModel';
import { localNativeBuild } from '../src/backends/llama/nativeBuild';

const ROUNDS = Number(process.env.NATIVE_BENCH_ROUNDS ?? 3);
/** Thread counts of the raw runs (the GPU check passes 1,4,16 on 16 cores). */
const THREADS = (process.env.NATIVE_BENCH_THREADS ?? '1,2').split(',').map(Number);
/** Which models (default both). */
const MODELS = (process.env.NATIVE_BENCH_MODELS ?? 'demo,embd512x8').split(',');
const round = (n: number, d = 1) => Math.round(n * 10 ** d) / 10 ** d;

interface ChildResult {
  build: { kind: string; key?: string };
  threads: number;
  tokensPerSecond: number;
  measured?: Record<string, number>;
}

type Build = 'prebuilt' | 'native' | 'native-twostep';

function child(model: string, build: Build, mode: 'raw' | 'ours', threads: number, tokens: number): ChildResult {
  const out = execFileSync(process.execPath, [path.join(__dirname, 'nativeBuildChild.js'), model, build, mode, String(threads), String(tokens)], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
    timeout: 300_000,
  });
  return JSON.parse(out.trim().split('\n').pop()!) as ChildResult;
}

/** `onPart`: called with each model's figures as they are measured (a run cut short still reports them). */
export async function nativeBuildBench(opts: { onPart?: (part: Record<string, unknown>) => void } = {}): Promise<Record<string, unknown>> {
  const onPart = opts.onPart;
  const state = localNativeBuild();
  const builds: Array<'prebuilt' | 'native'> = state.state === 'ready' ? ['prebuilt', 'native'] : ['prebuilt'];
  /** Through our backend: the native build with and without the one-step path. */
  const oursBuilds: Build[] = state.state === 'ready' ? ['prebuilt', 'native-twostep', 'native'] : ['prebuilt'];
  const label = (b: Build) => b.replace('-', '_');
  const results: Record<string, unknown> = {
    native_build:
      state.state === 'ready'
        ? state.key
        : `skipped: ${state.state === 'absent' ? 'no native build cached' : state.reason} (run task-runtime build-engine)`,
    cores: os.cpus().length,
  };
  if (state.state !== 'ready') process.stderr.write(`bench native_build: native side skipped: ${results.native_build as string}\n`);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tr-native-bench-'));
  try {
    const models = [
      { name: 'demo', file: path.join(dir, 'demo.gguf'), tokens: 400, make: (f: string) => writeTestModel(f, { seed: 1 }) },
      // The batching bench's size (embd 512 × 8 layers, ~86 MB): decode costs enough for threads to pay.
      {
        name: 'embd512x8',
        file: path.join(dir, 'm512.gguf'),
        tokens: 160,
        make: (f: string) => writeTestModel(f, { seed: 2, embd: 512, layers: 8 }),
      },
    ];
    for (const m of models.filter((x) => MODELS.includes(x.name))) {
      const before = new Set(Object.keys(results));
      m.make(m.file);
      const best: Record<string, number> = {};
      const chosen: Record<string, string> = {};
      const keep = (k: string, v: number) => (best[k] = Math.max(best[k] ?? 0, v));
      for (let r = 0; r < ROUNDS; r++) {
        for (const threads of THREADS) {
          for (const build of builds) keep(`${build}_${threads}t`, child(m.file, build, 'raw', threads, m.tokens).tokensPerSecond);
        }
        for (const build of oursBuilds) keep(`${label(build)}_ours_1t`, child(m.file, build, 'ours', 1, m.tokens).tokensPerSecond);
        for (const build of oursBuilds) {
          const o = child(m.file, build, 'ours', 0, m.tokens);
          keep(`${label(build)}_ours_auto`, o.tokensPerSecond);
          chosen[label(build)] = `${o.threads} thread(s), calibration ${JSON.stringify(o.measured ?? {})}`;
        }
      }
      for (const [k, v] of Object.entries(best)) results[`${m.name}_${k}_tokens_per_s`] = round(v, 0);
      for (const [b, c] of Object.entries(chosen)) results[`${m.name}_${b}_ours_auto_threads`] = c;
      if (builds.includes('native')) {
        for (const t of [...THREADS.map((n) => `${n}t`), 'ours_1t', 'ours_auto']) {
          results[`${m.name}_native_over_prebuilt_${t}`] = round(best[`native_${t}`]! / best[`prebuilt_${t}`]!, 2);
        }
        for (const t of ['ours_1t', 'ours_auto']) {
          results[`${m.name}_onestep_over_twostep_${t}`] = round(best[`native_${t}`]! / best[`native_twostep_${t}`]!, 2);
          results[`${m.name}_twostep_over_prebuilt_${t}`] = round(best[`native_twostep_${t}`]! / best[`prebuilt_${t}`]!, 2);
        }
        const bestOf = (b: string) => Math.max(...THREADS.map((n) => best[`${b}_${n}t`]!));
        results[`${m.name}_native_best_over_prebuilt_best`] = round(bestOf('native') / bestOf('prebuilt'), 2);
      }
      onPart?.(Object.fromEntries(Object.entries(results).filter(([k]) => !before.has(k) || k === 'native_build')));
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  return results;
}

if (require.main === module) {
  void nativeBuildBench().then((r) => console.log(JSON.stringify(r, null, 2)));
}
