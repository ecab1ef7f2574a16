// Raw node-llama-cpp generation speed (the API LlamaBackend uses: LlamaContextSequence.evaluate) versus the same
// generation through LlamaBackend.generate. Both force a fixed number of tokens by not stopping at an end token:
// node-llama-cpp's documented `yieldEogToken` here, the backend's `suppressEndOfGeneration` (which sets it) there.
// Run directly: node out/bench/rawGeneration.js [tokens=400] [threads=1,2] [modelPath]

import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { LlamaBackend } from '../src/backends/llama/llamaBackend';
import { plainTextPrompt } from '../src/backends/llama/prompt';
import { writeTestModel } from '../src/backends/llama/demoModel';
import { BatchedContextPool } from '../src/backends/llama/contextPool';
import type { ChatMessage } from '../src/runtime/backend';
import type { Llama, LlamaModel, Token } from 'node-llama-cpp' with { 'resolution-mode': 'import' };

export interface GenerationBenchOptions {
  modelPath: string;
  tokens: number;
  threads: number;
  /** Offload every layer to this GPU build ('auto': the best that works here); default: CPU only. */
  gpu?: 'auto' | 'cuda' | 'vulkan' | 'metal';
}
export interface GenerationBenchResult {
  tokensPerSecond: number;
  timeToFirstTokenMs: number;
}

const INSTRUCTIONS = 'You are a benchmark.';
const MESSAGES: ChatMessage[] = [{ role: 'user', content: 'Write a long story about a durable task runtime.' }];

/** node-llama-cpp as the benches use it: the prebuilt binary for `gpu` (default CPU only), errors logged only. */
export async function benchLlama(gpu: GenerationBenchOptions['gpu'] | false = false) {
  const nlc = await import('node-llama-cpp');
  // maxThreads 0: the context's thread count is used as given (the backend does the same).
  return nlc.getLlama({ gpu, build: 'never', logLevel: nlc.LlamaLogLevel.error, maxThreads: 0 });
}

/**
 * One stream of node-llama-cpp on `llama`: loads the model, evaluates `input` for exactly `tokens` tokens (an end
 * token does not stop it), decoding each token as a streaming consumer must (the backend does the same), and disposes
 * of the model. The moments are performance.now() values: the evaluate's start, its first token, its end.
 */
export async function timedRawStream(
  llama: Llama,
  opts: { modelPath: string; threads: number; tokens: number; gpuLayers?: 'max' | 0; input: (model: LlamaModel) => Token[] },
): Promise<{ n: number; started: number; firstAt: number; ended: number }> {
  const model = await llama.loadModel({ modelPath: opts.modelPath, gpuLayers: opts.gpuLayers ?? 0 });
  const context = await model.createContext({ contextSize: Math.min(4096, model.trainContextSize), threads: opts.threads, sequences: 1 });
  const sequence = context.getSequence();
  const input = opts.input(model);
  const started = performance.now();
  let firstAt = 0;
  let n = 0;
  const last: Token[] = [];
  for await (const token of sequence.evaluate(input, { temperature: 0.8, seed: 1, yieldEogToken: true })) {
    if (n === 0) firstAt = performance.now();
    model.detokenize([token], false, last);
    last.push(token);
    if (++n >= opts.tokens) break;
  }
  const ended = performance.now();
  await context.dispose();
  await model.dispose();
  return { n, started, firstAt, ended };
}

export async function rawGenerationBench(opts: GenerationBenchOptions): Promise<GenerationBenchResult> {
  const llama = await benchLlama(opts.gpu);
  try {
    const { n, started, firstAt, ended } = await timedRawStream(llama, {
      modelPath: opts.modelPath,
      threads: opts.threads,
      tokens: opts.tokens,
      gpuLayers: opts.gpu ? 'max' : 0,
      input: (model) => {
        const prompt = model.tokenize(plainTextPrompt(INSTRUCTIONS, MESSAGES));
        return model.tokens.bos !== null ? [model.tokens.bos, ...prompt] : prompt;
      },
    });
    return { tokensPerSecond: (n / (ended - started)) * 1000, timeToFirstTokenMs: firstAt - started };
  } finally {
    await llama.dispose();
  }
}

/**
 * `streams` sequences of one context generating at once. Aggregate tokens/s: all tokens over the wall time from the
 * first evaluate to the last token. Raw (default): node-llama-cpp's own batching and batch order, nothing of ours —
 * what this binary gives at that concurrency. `pool`: the sequences come from the backend's own pool
 * (`BatchedContextPool`: batch items in sequence order, decodes gathered, lowest free ids) — the runtime's decode
 * path without its tasks and HTTP.
 */
export async function rawBatchedBench(
  opts: GenerationBenchOptions & { streams: number; prompt: (i: number) => string; pool?: boolean; promptThreads?: number },
): Promise<number> {
  const llama = await benchLlama(opts.gpu);
  try {
    const model = await llama.loadModel({ modelPath: opts.modelPath, gpuLayers: opts.gpu ? 'max' : 0 });
    const shape = { contextSize: Math.min(4096, model.trainContextSize), threads: opts.threads, sequences: opts.streams };
    const pool = opts.pool ? await BatchedContextPool.create(model, { ...shape, promptThreads: opts.promptThreads }) : undefined;
    const context = pool ? undefined : await model.createContext(shape);
    const started = performance.now();
    const counts = await Promise.all(
      Array.from({ length: opts.streams }, async (_, i) => {
        const tokens = model.tokenize(opts.prompt(i));
        const sequence = pool ? (await pool.acquire(tokens)).sequence : context!.getSequence();
        let n = 0;
        try {
          for await (const token of sequence.evaluate(tokens, { temperature: 0.8, seed: i, yieldEogToken: true })) {
            void token;
            if (++n >= opts.tokens) break;
          }
        } finally {
          await pool?.release(sequence);
        }
        return n;
      }),
    );
    const ended = performance.now();
    await (pool ?? context!).dispose();
    await model.dispose();
    return (counts.reduce((a, b) => a + b, 0) / (ended - started)) * 1000;
  } finally {
    await llama.dispose();
  }
}

export async function backendGenerationBench(opts: GenerationBenchOptions): Promise<GenerationBenchResult> {
  const backend = new LlamaBackend({
    models: [{ source: opts.modelPath }],
    threads: opts.threads,
    suppressEndOfGeneration: true,
  });
  try {
    const id = backend.resolveModel(undefined)!;
    await backend.load(id);
    let firstAt = 0;
    const started = performance.now();
    const result = await backend.generate(
      { model: id, instructions: INSTRUCTIONS, messages: MESSAGES, maxOutputTokens: opts.tokens, temperature: 0.8, seed: 1 },
      {
        signal: new AbortController().signal,
        onText: () => {
          if (!firstAt) firstAt = performance.now();
        },
      },
    );
    const ended = performance.now();
    if (result.outputTokens !== opts.tokens) throw new Error(`expected ${opts.tokens} tokens, got ${result.outputTokens}`);
    return { tokensPerSecond: (result.outputTokens / (ended - started)) * 1000, timeToFirstTokenMs: firstAt - started };
  } finally {
    await backend.dispose();
  }
}

async function main(): Promise<void> {
  const tokens = Number(process.argv[2] ?? 400);
  const threadsList = (process.argv[3] ?? '1,2').split(',').map(Number);
  let modelPath = process.argv[4];
  let cleanup: string | undefined;
  if (!modelPath) {
    cleanup = fs.mkdtempSync(path.join(os.tmpdir(), 'task-runtime-bench-'));
    modelPath = path.join(cleanup, 'tiny.gguf');
    writeTestModel(modelPath);
  }
  try {
    for (const threads of threadsList) {
      for (const [name, fn] of [
        ['raw', rawGenerationBench],
        ['backend', backendGenerationBench],
      ] as const) {
        const runs: GenerationBenchResult[] = [];
        for (let i = 0; i < 3; i++) runs.push(await fn({ modelPath, tokens, threads }));
        const best = runs.reduce((a, b) => (b.tokensPerSecond > a.tokensPerSecond ? b : a));
        console.log(
          `${name.padEnd(8)} threads=${threads} tokens=${tokens}: best ${best.tokensPerSecond.toFixed(0)} tok/s, ` +
            `ttft ${best.timeToFirstTokenMs.toFixed(1)} ms (runs: ${runs.map((r) => r.tokensPerSecond.toFixed(0)).join(', ')})`,
        );
      }
    }
  } finally {
    if (cleanup) fs.rmSync(cleanup, { recursive: true, force: true });
  }
}

if (require.main === module) {
  main().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
