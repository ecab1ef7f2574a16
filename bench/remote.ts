// `remote` section: the cost of putting our durable runtime in front of a real engine. Same model, same run,
// alternating samples: llama.cpp's llama-server streaming its own POST /v1/chat/completions to a Node client, versus
// a task created through our LMSP door (POST /tasks) with the remote backend streaming from that same llama-server
// and the client following /tasks/{id}/events. Reported: tokens/s each way and their ratio (goal ≥ 0.9), first-token
// time each way and the difference (goal ≤ 5 ms); the same for POST /responses with `stream: true`. Needs
// llama-server built (node scripts/remote-engine/prepare.mjs); without it the section says so instead of building
// (a bench never downloads or builds).
// Run directly: node out/bench/remote.js
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { RemoteBackend } from '../src/backends/openai/remoteBackend';
import { writeTestModel } from '../src/backends/llama/testModel';
import { startEndpoint } from '../src/protocols/endpoint';
import { TaskRuntime } from '../src/runtime/runtime';
import { llamaServerBinary, startLlamaServer } from '../test/fixtures/llamaServer';
import { responsesStreamOnce, streamOnce, TOKEN } from './lmsp';

const INSTRUCTIONS = 'You are a benchmark.';
const PROMPT = 'Write a long story about a durable task runtime.';
const round = (n: number, d = 1) => Math.round(n * 10 ** d) / 10 ** d;
const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)];

/** llama-server's own stream, read the way our client reads ours: time to first content, tokens/s to the last. */
async function directOnce(base: string, tokens: number) {
  const t0 = performance.now();
  const res = await fetch(`${base}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      model: 'tiny',
      messages: [
        { role: 'system', content: INSTRUCTIONS },
        { role: 'user', content: PROMPT },
      ],
      max_tokens: tokens,
      temperature: 0,
      stream: true,
      stream_options: { include_usage: true },
    }),
  });
  const decoder = new TextDecoder();
  let buf = '';
  let first = 0;
  let last = 0;
  let outputTokens = 0;
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    buf += decoder.decode(chunk, { stream: true });
    let end: number;
    while ((end = buf.indexOf('\n\n')) >= 0) {
      const line = buf.slice(0, end);
      buf = buf.slice(end + 2);
      if (!line.startsWith('data: ') || line === 'data: [DONE]') continue;
      const j = JSON.parse(line.slice(6)) as { choices?: Array<{ delta?: { content?: string } }>; usage?: { completion_tokens: number } };
      if (j.choices?.[0]?.delta?.content) {
        const now = performance.now();
        if (!first) first = now;
        last = now;
      }
      if (j.usage) outputTokens = j.usage.completion_tokens;
    }
  }
  return { ttftMs: first - t0, tokensPerSecond: (outputTokens / (last - t0)) * 1000, outputTokens };
}

export async function remoteBench(opts: { modelPath?: string; tokens?: number; samples?: number } = {}): Promise<Record<string, unknown>> {
  try {
    llamaServerBinary();
  } catch (e) {
    return { skipped: (e as Error).message };
  }
  const tokens = opts.tokens ?? 400;
  const samples = opts.samples ?? 9;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'remote-bench-'));
  let modelPath = opts.modelPath;
  if (!modelPath) {
    modelPath = path.join(dir, 'tiny.gguf');
    writeTestModel(modelPath, { seed: 1 });
  }
  const engine = await startLlamaServer({ model: modelPath, ctx: 2048 });
  const backend = new RemoteBackend([{ name: 'local', urls: [engine.base] }]);
  await backend.refresh();
  const runtime = await TaskRuntime.open({ dataDir: path.join(dir, 'data'), backend });
  const ep = await startEndpoint(runtime, { port: 0, tokens: new Map([[TOKEN, 'bench']]) });
  try {
    // Warm both paths once (first request pays llama-server's slot setup).
    await directOnce(engine.base, 16);
    await streamOnce(ep, 16, 0, 'local/tiny');
    await responsesStreamOnce(ep, 16, 0, 'local/tiny');
    const direct: Array<Awaited<ReturnType<typeof directOnce>>> = [];
    const ours: Array<Awaited<ReturnType<typeof streamOnce>>> = [];
    const oursStream: Array<Awaited<ReturnType<typeof responsesStreamOnce>>> = [];
    for (let i = 0; i < samples; i++) {
      direct.push(await directOnce(engine.base, tokens));
      ours.push(await streamOnce(ep, tokens, 0, 'local/tiny'));
      oursStream.push(await responsesStreamOnce(ep, tokens, 0, 'local/tiny'));
    }
    const dTps = median(direct.map((r) => r.tokensPerSecond));
    const oTps = median(ours.map((r) => r.tokensPerSecond));
    const dTtft = median(direct.map((r) => r.ttftMs));
    const oTtft = median(ours.map((r) => r.ttftMs));
    const sTtft = median(oursStream.map((r) => r.ttftMs));
    return {
      tokens,
      samples,
      output_tokens: [median(direct.map((r) => r.outputTokens)), median(ours.map((r) => r.outputTokens))],
      llama_server_tokens_per_second: Math.round(dTps),
      ours_tokens_per_second: Math.round(oTps),
      tokens_per_second_ratio: round(oTps / dTps, 2),
      llama_server_first_token_ms: round(dTtft, 2),
      ours_first_token_ms: round(oTtft, 2),
      added_first_token_ms: round(oTtft - dTtft, 2),
      // The same through POST /responses with stream: true (one request; the answer is the stream).
      ours_responses_stream_tokens_per_second: Math.round(median(oursStream.map((r) => r.tokensPerSecond))),
      responses_stream_tokens_per_second_ratio: round(median(oursStream.map((r) => r.tokensPerSecond)) / dTps, 2),
      ours_responses_stream_first_token_ms: round(sTtft, 2),
      added_first_token_responses_stream_ms: round(sTtft - dTtft, 2),
    };
  } finally {
    await ep.close();
    await runtime.close();
    await engine.kill();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

if (require.main === module) {
  void remoteBench().then((r) => {
    console.log(JSON.stringify(r, null, 2));
    process.exit(0);
  });
}
