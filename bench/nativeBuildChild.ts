// One measurement of the `native_build` bench section (bench/nativeBuild.ts), in a process of its own so that every
// figure starts from a fresh process with one llama.cpp binary loaded, on node-llama-cpp's prebuilt binary or this
// machine's native build (chosen by hardware.ts's selectLlama, as tasks get it):
//   raw N   one stream of node-llama-cpp on exactly N threads (what the binary gives per thread count);
//   ours    one stream through our LlamaBackend, THREADS threads (0: auto, calibrated: what a task gets).
// The native build runs as `native` (with one native step per token, oneStep.ts, where the build has the
// decode-and-sample patch) or `native-twostep`: the same build with its addon's decodeBatchAndSample hidden from every
// context (node-llama-cpp's own decodeBatch + sampleToken round trips, as before the patch).
// Decode tokens/s (the tokens after the first over the time after it). Prints one JSON line.
// argv: MODEL prebuilt|native|native-twostep raw|ours THREADS TOKENS
import { createRequire } from 'node:module';
import { LlamaBackend } from '../src/backends/llama/llamaBackend';
import { selectLlama } from '../src/backends/llama/hardware';
import { localNativeBuild, nativeBuildsRoot } from '../src/backends/llama/nativeBuild';
import { importNodeLlamaCpp } from '../src/backends/llama/nodeLlamaCpp';
import { timedRawStream } from './rawGeneration';

async function raw(modelPath: string, nativeBuilds: string | false, threads: number, tokens: number) {
  const nlc = await importNodeLlamaCpp();
  const selection = await selectLlama(nlc, 'off', () => undefined, nativeBuilds);
  try {
    const { n, firstAt, ended } = await timedRawStream(selection.llama, {
      modelPath,
      threads,
      tokens,
      input: (model) => model.tokenize('You are a benchmark. Write a long story about a lighthouse.'),
    });
    return { build: selection.build, threads, tokensPerSecond: ((n - 1) / (ended - firstAt)) * 1000 };
  } finally {
    await selection.llama.dispose();
  }
}

/**
 * Hides decodeBatchAndSample from the native build's contexts in this process: the addon's exports (require's cached
 * object, which hardware.ts's loader gets too) make each AddonContext with an own property over the method.
 */
function hideOneStep(): void {
  const state = localNativeBuild();
  if (state.state !== 'ready') throw new Error(state.reason);
  const bindings = createRequire(__filename)(state.bindingPath) as Record<string, unknown>;
  const Original = bindings.AddonContext as new (...args: unknown[]) => object;
  bindings.AddonContext = function AddonContext(...args: unknown[]) {
    const ctx = new Original(...args);
    Object.defineProperty(ctx, 'decodeBatchAndSample', { value: undefined, configurable: true, writable: true });
    return ctx;
  };
}

async function ours(modelPath: string, nativeBuilds: string | false, threads: number, tokens: number) {
  const backend = new LlamaBackend({
    models: [{ source: modelPath }],
    threads: threads > 0 ? threads : 'auto',
    gpu: 'off',
    concurrency: 1,
    nativeBuilds,
    suppressEndOfGeneration: true,
  });
  try {
    const id = backend.resolveModel(undefined)!;
    await backend.load(id);
    const hw = backend.listModels()[0]!.hardware!;
    let firstAt = 0;
    let counted = 0;
    const result = await backend.generate(
      {
        model: id,
        messages: [{ role: 'user', content: 'Write a long story about a lighthouse.' }],
        maxOutputTokens: tokens,
        temperature: 0.8,
        seed: 1,
      },
      {
        signal: new AbortController().signal,
        onText: (_t, n) => {
          if (!firstAt) firstAt = performance.now();
          else counted += n;
        },
      },
    );
    const ended = performance.now();
    if (result.outputTokens !== tokens) throw new Error(`expected ${tokens} tokens, got ${result.outputTokens}`);
    return { build: hw.build, threads: hw.threads, measured: hw.threadTokensPerSecond, tokensPerSecond: (counted / (ended - firstAt)) * 1000 };
  } finally {
    await backend.dispose();
  }
}

async function main(): Promise<void> {
  const [modelPath, build, mode, threads, tokens] = process.argv.slice(2);
  const nativeBuilds = build === 'native' || build === 'native-twostep' ? nativeBuildsRoot() : false;
  if (build === 'native-twostep') hideOneStep();
  const r =
    mode === 'raw'
      ? await raw(modelPath!, nativeBuilds, Number(threads), Number(tokens))
      : await ours(modelPath!, nativeBuilds, Number(threads), Number(tokens));
  const used = r.build as { kind: string; reason?: string } | undefined;
  if (nativeBuilds !== false && used?.kind !== 'native') throw new Error(`the native build did not load (${used?.reason ?? '?'})`);
  process.stdout.write(`${JSON.stringify(r)}\n`);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
