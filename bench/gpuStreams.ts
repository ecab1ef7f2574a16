// `gpu_streams` section: the GPU check's main measurement (scripts/gpu-check.sh runs it on a lent GPU machine; here
// it runs its CPU half). Side by side in one run on the same generated GGUF: our `serve` (its own process,
// batchingServeChild.ts: the runtime, the model's one batched context, POST /responses streams) against llama.cpp's
// llama-server (-np N, /completion streams, ignore_eos) at 1/4/16/32 streams, rounds alternating which side goes
// first; then the first token through our Messages door (POST /v1/messages, stream) and Responses door (POST
// /v1/responses, stream) against llama-server's /v1/chat/completions stream. Goal on a GPU machine (issue 42):
// ≥ 0.9× llama-server at 16 and 32 streams, GPU builds on both sides.
// Settings (environment, so that the shell script can drive it): GPU_CHECK_GPU (our --gpu: cuda|vulkan|auto|off;
// default off), GPU_CHECK_STREAMS (default 1,4,16,32), GPU_CHECK_EMBD / GPU_CHECK_LAYERS (default 1024 × 16, the
// ~643 MB model of docs/gpu.md), GPU_CHECK_TOKENS (per stream, default 128), GPU_CHECK_ROUNDS (default 2),
// GPU_CHECK_THREADS (both sides' CPU threads; default all cores), GPU_CHECK_ENGINE_BUILD (our --engine-build,
// default auto), TASK_RUNTIME_LLAMA_SERVER (the llama-server binary; absent: that side is skipped with a line),
// GPU_CHECK_LLAMA_SERVER_ARGS (more llama-server arguments, e.g. "-ngl 999").
// Run directly: node out/bench/gpuStreams.js
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { writeTestModel } from '../src/backends/llama/demoModel';
import { plainTextPrompt } from '../src/backends/llama/prompt';
import { llamaServerBinary, startLlamaServer, type LlamaServer } from '../test/fixtures/llamaServer';
import { startServe } from '../test/fixtures/serveProcess';
import { concurrent, oursOnce, theirsOnce, timedStream, type StreamRun } from './batching';

const round = (n: number, d = 1) => Math.round(n * 10 ** d) / 10 ** d;
const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)]!;
const env = (name: string, fallback: string) => process.env[name] || fallback;

export interface GpuStreamsOptions {
  gpu?: string;
  streams?: number[];
  embd?: number;
  layers?: number;
  tokens?: number;
  rounds?: number;
  threads?: number;
  engineBuild?: string;
  llamaServerArgs?: string[];
  /** Called with each part as it finishes, so that a run cut short still reports what it measured. */
  onPart?: (part: Record<string, unknown>) => void;
}

function fromEnv(): GpuStreamsOptions {
  return {
    gpu: env('GPU_CHECK_GPU', 'off'),
    streams: env('GPU_CHECK_STREAMS', '1,4,16,32').split(',').map(Number),
    embd: Number(env('GPU_CHECK_EMBD', '1024')),
    layers: Number(env('GPU_CHECK_LAYERS', '16')),
    tokens: Number(env('GPU_CHECK_TOKENS', '128')),
    rounds: Number(env('GPU_CHECK_ROUNDS', '2')),
    threads: Number(env('GPU_CHECK_THREADS', String(os.availableParallelism()))),
    engineBuild: env('GPU_CHECK_ENGINE_BUILD', 'auto'),
    llamaServerArgs: env('GPU_CHECK_LLAMA_SERVER_ARGS', '').split(/\s+/).filter(Boolean),
  };
}

/** Our door's first token: POST → the first text delta of a streamed answer (ms), median of `n`. */
async function doorFirstToken(n: number, once: () => Promise<StreamRun>): Promise<number> {
  const ttft: number[] = [];
  for (let i = 0; i < n; i++) ttft.push((await once()).ttftMs);
  return round(median(ttft), 1);
}

export async function gpuStreamsBench(given: GpuStreamsOptions = {}): Promise<Record<string, unknown>> {
  const o = { ...fromEnv(), ...given };
  const streams = o.streams!;
  const maxStreams = Math.max(...streams);
  const tokens = o.tokens!;
  const out: Record<string, unknown> = {};
  const part = (r: Record<string, unknown>) => {
    Object.assign(out, r);
    o.onPart?.(r);
  };
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpu-streams-'));
  const modelPath = path.join(dir, 'bench.gguf');
  const ctx = 1024;
  writeTestModel(modelPath, { seed: 3, embd: o.embd!, layers: o.layers!, contextLength: 4096 });
  part({
    model: `generated, embd ${o.embd}, ${o.layers} layers, ${Math.round(fs.statSync(modelPath).size / 1e6)} MB`,
    gpu: o.gpu,
    engine_build: o.engineBuild,
    threads: o.threads,
    tokens_per_stream: tokens,
    rounds: o.rounds,
  });
  let skipped: string | undefined;
  try {
    llamaServerBinary();
  } catch (e) {
    skipped = (e as Error).message;
    part({ llama_server: `skipped: ${skipped}` });
  }
  const serveArgs = [
    '--threads',
    String(o.threads),
    '--concurrency',
    String(maxStreams),
    '--context-size',
    String(ctx),
    '--gpu',
    o.gpu!,
    '--engine-build',
    o.engineBuild!,
  ];
  const ours = await startServe(serveArgs, path.join(dir, 'data'), [path.join(__dirname, 'batchingServeChild.js'), modelPath]);
  let server: LlamaServer | undefined;
  try {
    const ep = { lmspUrl: ours.lmsp, token: ours.token };
    const oursStream = (input: string) => oursOnce(ep, input, tokens);
    await oursStream('warm');
    const models = (await (await fetch(`${ours.lmsp}/models`, { headers: { authorization: `Bearer ${ours.token}` } })).json()) as {
      data: Array<{ id: string; task_runtime?: { hardware?: { summary?: string } } }>;
    };
    part({ ours_hardware: models.data.find((m) => m.id === 'bench')?.task_runtime?.hardware?.summary ?? '?' });
    if (!skipped) {
      try {
        server = await startLlamaServer({ model: modelPath, ctx, threads: o.threads, parallel: maxStreams, extraArgs: o.llamaServerArgs });
        part({ llama_server: `${path.basename(llamaServerBinary())} ${o.llamaServerArgs!.join(' ')}`.trim() });
      } catch (e) {
        // Ours is still measured: a GPU machine's minutes are few.
        part({ llama_server: `did not start: ${(e as Error).message.slice(-600)}` });
      }
    }
    // The generated model has no chat template: our /responses evaluates the plain-text prompt, so llama-server is
    // given that same text.
    const theirs = server
      ? (input: string) => theirsOnce(server!, plainTextPrompt(undefined, [{ role: 'user', content: input }]), tokens)
      : undefined;
    await concurrent(maxStreams, oursStream);
    if (theirs) await concurrent(maxStreams, theirs);
    for (const n of streams) {
      const a: Array<{ tps: number; ttft: number }> = [];
      const b: Array<{ tps: number; ttft: number }> = [];
      for (let r = 0; r < o.rounds!; r++) {
        const sides = [
          () => concurrent(n, oursStream).then((x) => a.push(x)),
          ...(theirs ? [() => concurrent(n, theirs).then((x) => b.push(x))] : []),
        ];
        if (r % 2) sides.reverse();
        for (const side of sides) await side();
      }
      const best = (v: Array<{ tps: number }>) => Math.max(...v.map((x) => x.tps));
      const r: Record<string, unknown> = {
        [`streams_${n}_ours_tokens_per_s`]: round(best(a), 0),
        [`streams_${n}_ours_first_token_ms`]: round(median(a.map((x) => x.ttft)), 1),
      };
      if (b.length) {
        r[`streams_${n}_llama_server_tokens_per_s`] = round(best(b), 0);
        r[`streams_${n}_llama_server_first_token_ms`] = round(median(b.map((x) => x.ttft)), 1);
        r[`streams_${n}_ours_over_llama_server`] = round(best(a) / best(b), 2);
      }
      part(r);
    }
    // The doors' first token, one request at a time (short answers: the first token is the figure).
    const text = (f: { event?: string }, name: string) => ({ text: f.event === name });
    const messages = () =>
      timedStream(
        `${ours.url}/v1/messages`,
        { model: 'bench', max_tokens: 8, stream: true, messages: [{ role: 'user', content: 'Say hello.' }] },
        (f) => (f.event === 'message_stop' ? { done: true } : text(f, 'content_block_delta')),
        { 'x-api-key': ours.token, 'anthropic-version': '2023-06-01' },
      );
    const responses = () =>
      timedStream(
        `${ours.url}/v1/responses`,
        { model: 'bench', max_output_tokens: 8, stream: true, input: 'Say hello.' },
        (f) => (f.event === 'response.completed' || f.event === 'response.incomplete' ? { done: true } : text(f, 'response.output_text.delta')),
        { authorization: `Bearer ${ours.token}` },
      );
    const doors: Record<string, unknown> = {
      messages_door_first_token_ms: await doorFirstToken(5, messages),
      responses_door_first_token_ms: await doorFirstToken(5, responses),
    };
    if (server) {
      const chat = () =>
        timedStream(
          `${server!.url}/v1/chat/completions`,
          { messages: [{ role: 'user', content: 'Say hello.' }], max_tokens: 8, stream: true },
          (f) => (f.data === '[DONE]' ? { done: true } : { text: /"content":"[^"]/.test(f.data) }),
        );
      doors.llama_server_chat_first_token_ms = await doorFirstToken(5, chat);
    }
    part(doors);
  } finally {
    await server?.kill();
    await ours.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
  return out;
}

/**
 * The CPU half as `npm run bench -- gpu_streams` runs it on a machine without a GPU: the same measurements on a model
 * and stream counts that a 2-core machine gets through in a minute or two (the environment still overrides).
 */
export function gpuStreamsCpuHalf(): Promise<Record<string, unknown>> {
  const e = process.env;
  return gpuStreamsBench({
    gpu: e.GPU_CHECK_GPU || 'off',
    streams: (e.GPU_CHECK_STREAMS || '1,4').split(',').map(Number),
    embd: Number(e.GPU_CHECK_EMBD || 256),
    layers: Number(e.GPU_CHECK_LAYERS || 4),
    tokens: Number(e.GPU_CHECK_TOKENS || 64),
    threads: Number(e.GPU_CHECK_THREADS || 1),
  });
}

if (require.main === module) {
  const print = (r: Record<string, unknown>) => {
    for (const [k, v] of Object.entries(r)) console.log(`${k.padEnd(44)} ${typeof v === 'object' ? JSON.stringify(v) : String(v)}`);
  };
  gpuStreamsBench({ onPart: print }).then(
    () => process.exit(0),
    (e: unknown) => {
      console.error(e);
      process.exit(1);
    },
  );
}
