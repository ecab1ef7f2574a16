// Child of the batching bench: the product's `serve` (src/cli/serve.ts, what dist/cli.js runs) in its own process,
// as llama-server runs in its own, so that the bench's HTTP clients never share our event loop. The bench model is
// served through serve's extension seam with end-of-generation suppressed (fixed-length streams, like llama-server's
// ignore_eos); every other option is serve's own. The CPU prebuilt binary unless --gpu / --engine-build auto say
// otherwise (the GPU check, scripts/gpu-check.sh, passes them).
// Usage: node out/bench/batchingServeChild.js MODEL.gguf [serve options...]
import { parseArgs } from '../src/cli/args';
import { serve } from '../src/cli/serve';
import { LlamaBackend } from '../src/backends/llama/llamaBackend';
import { nativeBuildsRoot } from '../src/backends/llama/nativeBuild';

async function main(argv: string[]): Promise<void> {
  const [modelPath, ...rest] = argv;
  const args = parseArgs(['serve', ...rest]);
  if (args.command !== 'serve' || !modelPath) throw new Error('usage: batchingServeChild MODEL.gguf [serve options]');
  const backend = new LlamaBackend({
    models: [{ id: 'bench', source: modelPath }],
    contextSize: args.contextSize,
    threads: args.threads,
    gpu: args.gpu ?? 'off',
    gpuLayers: args.gpuLayers ?? 'auto',
    nativeBuilds: args.engineBuild === 'auto' ? nativeBuildsRoot() : false,
    concurrency: args.concurrency,
    keepAliveMs: 0,
    suppressEndOfGeneration: true,
  });
  await serve(args, { backends: [backend] });
}

main(process.argv.slice(2)).catch((e: unknown) => {
  process.stderr.write(`batching serve child: ${e instanceof Error ? e.message : String(e)}\n`);
  process.exit(1);
});
