// `remote` section: the cost of putting our durable runtime in front of a real engine. Same model, same run,
// alternating samples: llama.cpp's llama-server streaming its own POST /v1/chat/completions to a Node client, versus
// a task created through our LMSP door (POST /tasks) with the remote backend streaming from that same llama-server
// and the client following /tasks/{id}/events. Reported: tokens/s each way and their ratio (goal ≥ 0.9), first-token
// time each way and the difference (goal ≤ 5 ms); the same for POST /responses with `stream: true`.
// Also, for the choice of engine API (issue #13: "/v1/responses where an engine advertises it if that measurably
// helps"): llama-server's POST /v1/responses stream beside its chat/completions stream, in the same alternation —
// first token, tokens/s, bytes per token, the client's CPU per token, and our parse cost per token (the backend's SSE
// parser + chunk validation, replayed over the very chunks received), plus what the responses stream reports at the
// token limit. Needs llama-server built (node scripts/remote-engine/prepare.mjs); without it the section says so
// instead of building (a bench never downloads or builds).
// Like for like (issue #14: "first delta ≤ 3 ms later than llama.cpp's server on the same model"): our embedded
// runtime (node-llama-cpp in process, the same GGUF file and thread count as llama-server) answering POST /responses
// with `stream: true`, beside llama-server's own POST /v1/responses stream, in the same alternation: first delta each
// way and the difference (`embedded_added_first_delta_ms`), tokens/s each way.
// Cache-aware routing (issue #40, routingBench): two llama-servers in one pool, 8 conversations x 4 turns with a
// 2 000-token history each, first token cache-aware against least-busy; `node out/bench/remote.js routing` runs it
// alone.
// Run directly: node out/bench/remote.js
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { applyChatEvent, type ChatStreamState } from '../src/backends/remote/chatStream';
import { LlamaBackend } from '../src/backends/llama/llamaBackend';
import { RemoteBackend } from '../src/backends/remote/remoteBackend';
import type { ChatMessage } from '../src/runtime/backend';
import { SseParser } from '../src/protocols/http/sseParser';
import { writeTestModel } from '../src/backends/llama/demoModel';
import { startEndpoint } from '../src/protocols/endpoint';
import { TaskRuntime } from '../src/runtime/runtime';
import { llamaServerBinary, startLlamaServer } from '../test/fixtures/llamaServer';
import { sseFrames } from '../test/fixtures/sse';
import { responsesStreamOnce, streamOnce, TOKEN } from './lmsp';

const INSTRUCTIONS = 'You are a benchmark.';
const PROMPT = 'Write a long story about a durable task runtime.';
const round = (n: number, d = 1) => Math.round(n * 10 ** d) / 10 ** d;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)];

type Api = 'chat' | 'responses';

interface ResponsesState {
  status?: string;
  outputTokens?: number;
}

/**
 * One event of llama-server's /v1/responses stream, validated as strictly as applyChatEvent validates a chat chunk:
 * the content of `response.output_text.delta`, usage and status from `response.completed`. (Measurement only: the
 * backend does not use this API, see docs/remote.md.)
 */
function applyResponsesEvent(data: string, st: ResponsesState, onDelta: (text: string) => void): boolean {
  const ev = JSON.parse(data) as { type?: unknown; delta?: unknown; response?: { status?: unknown; usage?: { output_tokens?: unknown } } };
  if (typeof ev !== 'object' || ev === null || typeof ev.type !== 'string') throw new Error('not a responses event');
  if (ev.type === 'response.output_text.delta') {
    if (typeof ev.delta !== 'string') throw new Error('delta is not text');
    if (ev.delta) onDelta(ev.delta);
  } else if (ev.type === 'response.completed' || ev.type === 'response.incomplete' || ev.type === 'response.failed') {
    st.status = String(ev.response?.status);
    const n = ev.response?.usage?.output_tokens;
    if (Number.isSafeInteger(n)) st.outputTokens = n as number;
    return true;
  } else if (ev.type === 'error') {
    throw new Error('error event');
  }
  return false;
}

function requestBody(api: Api, tokens: number): Record<string, unknown> {
  return api === 'chat'
    ? {
        model: 'tiny',
        messages: [
          { role: 'system', content: INSTRUCTIONS },
          { role: 'user', content: PROMPT },
        ],
        max_tokens: tokens,
        temperature: 0,
        stream: true,
        stream_options: { include_usage: true },
      }
    : { model: 'tiny', instructions: INSTRUCTIONS, input: PROMPT, max_output_tokens: tokens, temperature: 0, stream: true };
}

/** Feeds recorded chunks through the backend's parser and `api`'s event reader; returns the content pieces seen. */
function parseChunks(api: Api, chunks: Uint8Array[]): number {
  const parser = new SseParser();
  const chat: ChatStreamState = { chunks: 0 };
  const resp: ResponsesState = {};
  let pieces = 0;
  const onDelta = () => pieces++;
  for (const c of chunks) {
    for (const data of parser.push(c)) {
      if (api === 'chat') applyChatEvent(data, chat, onDelta);
      else if (data !== '[DONE]') applyResponsesEvent(data, resp, onDelta);
    }
  }
  return pieces;
}

/**
 * One stream straight from llama-server, read the way our client reads ours: time to first content, tokens/s to the
 * last, bytes and the client process's CPU per token, and the chunks as received (for the parse replay).
 */
async function directOnce(base: string, tokens: number, api: Api = 'chat') {
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const res = await fetch(`${base}/${api === 'chat' ? 'chat/completions' : 'responses'}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(requestBody(api, tokens)),
  });
  const chunks: Uint8Array[] = [];
  async function* tap(body: AsyncIterable<Uint8Array>) {
    for await (const c of body) {
      chunks.push(c);
      yield c;
    }
  }
  let first = 0;
  let last = 0;
  const chat: ChatStreamState = { chunks: 0 };
  const resp: ResponsesState = {};
  const onDelta = () => {
    const now = performance.now();
    if (!first) first = now;
    last = now;
  };
  for await (const f of sseFrames(tap(res.body as unknown as AsyncIterable<Uint8Array>))) {
    if (api === 'chat') applyChatEvent(f.data, chat, onDelta);
    else if (f.data !== '[DONE]') applyResponsesEvent(f.data, resp, onDelta);
  }
  const cpu = process.cpuUsage(cpu0);
  const outputTokens = (api === 'chat' ? chat.outputTokens : resp.outputTokens) ?? 0;
  return {
    ttftMs: first - t0,
    tokensPerSecond: (outputTokens / (last - t0)) * 1000,
    outputTokens,
    bytes: chunks.reduce((n, c) => n + c.length, 0),
    cpuUsPerToken: (cpu.user + cpu.system) / outputTokens,
    /** What the stream said at the end: the chat finish reason, or the responses status. */
    end: api === 'chat' ? (chat.finishReason ?? '') : (resp.status ?? ''),
    chunks,
  };
}

/** Our parse cost per content piece: the recorded chunks through the parser and event reader, repeated. */
function parseUsPerToken(api: Api, chunks: Uint8Array[]): number {
  parseChunks(api, chunks); // warm
  const reps = 50;
  const t0 = process.cpuUsage();
  let pieces = 0;
  for (let i = 0; i < reps; i++) pieces += parseChunks(api, chunks);
  const t = process.cpuUsage(t0);
  return (t.user + t.system) / pieces;
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
  const threads = 1;
  const engine = await startLlamaServer({ model: modelPath, ctx: 2048, threads });
  const backend = new RemoteBackend([{ name: 'local', urls: [engine.base] }]);
  await backend.refresh();
  const runtime = await TaskRuntime.open({ dataDir: path.join(dir, 'data'), backend });
  const ep = await startEndpoint(runtime, { port: 0, tokens: new Map([[TOKEN, 'bench']]) });
  // The same model in process, with llama-server's context size and thread count, on the CPU as the llama-server
  // built here (scripts/remote-engine/prepare.mjs builds it without a GPU backend).
  const embeddedBackend = new LlamaBackend({ models: [{ id: 'tiny', source: modelPath }], contextSize: 2048, threads, gpu: 'off' });
  const embedded = await TaskRuntime.open({ dataDir: path.join(dir, 'embedded'), backend: embeddedBackend });
  const embeddedEp = await startEndpoint(embedded, { port: 0, tokens: new Map([[TOKEN, 'bench']]) });
  try {
    // Warm every path once (first request pays llama-server's slot setup).
    await directOnce(engine.base, 16);
    await directOnce(engine.base, 16, 'responses');
    await streamOnce(ep, 16, 0, 'local/tiny');
    await responsesStreamOnce(ep, 16, 0, 'local/tiny');
    await responsesStreamOnce(embeddedEp, 16, 0, 'tiny');
    const inProcess: Array<Awaited<ReturnType<typeof responsesStreamOnce>>> = [];
    const direct: Array<Awaited<ReturnType<typeof directOnce>>> = [];
    const responses: Array<Awaited<ReturnType<typeof directOnce>>> = [];
    const ours: Array<Awaited<ReturnType<typeof streamOnce>>> = [];
    const oursStream: Array<Awaited<ReturnType<typeof responsesStreamOnce>>> = [];
    for (let i = 0; i < samples; i++) {
      // Alternate the order so neither API always follows the other.
      if (i % 2) responses.push(await directOnce(engine.base, tokens, 'responses'));
      direct.push(await directOnce(engine.base, tokens));
      if (!(i % 2)) responses.push(await directOnce(engine.base, tokens, 'responses'));
      ours.push(await streamOnce(ep, tokens, 0, 'local/tiny'));
      oursStream.push(await responsesStreamOnce(ep, tokens, 0, 'local/tiny'));
      inProcess.push(await responsesStreamOnce(embeddedEp, tokens, 0, 'tiny'));
    }
    const dTps = median(direct.map((r) => r.tokensPerSecond));
    const oTps = median(ours.map((r) => r.tokensPerSecond));
    const dTtft = median(direct.map((r) => r.ttftMs));
    const oTtft = median(ours.map((r) => r.ttftMs));
    const rTps = median(responses.map((r) => r.tokensPerSecond));
    const perToken = (runs: typeof direct, f: (r: (typeof direct)[number]) => number) => round(median(runs.map(f)), 1);
    const sTtft = median(oursStream.map((r) => r.ttftMs));
    const rTtft = median(responses.map((r) => r.ttftMs));
    const eTtft = median(inProcess.map((r) => r.ttftMs));
    const eTps = median(inProcess.map((r) => r.tokensPerSecond));
    // Paired: each sample's embedded first delta minus the llama-server /v1/responses one taken next to it.
    const pairedAdded = median(inProcess.map((r, i) => r.ttftMs - responses[i].ttftMs));
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
      // chat/completions versus responses, both straight from llama-server (the API choice, docs/remote.md).
      api_chat_tokens_per_second: Math.round(dTps),
      api_responses_tokens_per_second: Math.round(rTps),
      api_responses_vs_chat_tokens_per_second: round(rTps / dTps, 2),
      api_chat_first_token_ms: round(dTtft, 2),
      api_responses_first_token_ms: round(rTtft, 2),
      api_chat_bytes_per_token: perToken(direct, (r) => r.bytes / r.outputTokens),
      api_responses_bytes_per_token: perToken(responses, (r) => r.bytes / r.outputTokens),
      api_chat_client_cpu_us_per_token: perToken(direct, (r) => r.cpuUsPerToken),
      api_responses_client_cpu_us_per_token: perToken(responses, (r) => r.cpuUsPerToken),
      api_chat_parse_us_per_token: round(parseUsPerToken('chat', direct[0].chunks), 2),
      api_responses_parse_us_per_token: round(parseUsPerToken('responses', responses[0].chunks), 2),
      api_chat_end_at_token_limit: direct[0].end,
      api_responses_end_at_token_limit: responses[0].end,
      // The same through POST /responses with stream: true (one request; the answer is the stream).
      ours_responses_stream_tokens_per_second: Math.round(median(oursStream.map((r) => r.tokensPerSecond))),
      responses_stream_tokens_per_second_ratio: round(median(oursStream.map((r) => r.tokensPerSecond)) / dTps, 2),
      ours_responses_stream_first_token_ms: round(sTtft, 2),
      added_first_token_responses_stream_ms: round(sTtft - dTtft, 2),
      // Like for like: our embedded runtime on the same model file and threads versus llama-server, both POST
      // /responses streams.
      embedded_threads: threads,
      embedded_first_delta_ms: round(eTtft, 2),
      llama_server_responses_first_delta_ms: round(rTtft, 2),
      embedded_added_first_delta_ms: round(eTtft - rTtft, 2),
      embedded_added_first_delta_paired_ms: round(pairedAdded, 2),
      embedded_added_first_delta_goal: '<= 3 ms',
      embedded_tokens_per_second: Math.round(eTps),
      embedded_vs_llama_server_tokens_per_second: round(eTps / rTps, 2),
      // Cache-aware routing against least-busy in a pool of two llama-servers of their own (routingBench).
      cache_aware_routing: await routingBench(),
    };
  } finally {
    await ep.close();
    await runtime.close();
    await embeddedEp.close();
    await embedded.close();
    await embeddedBackend.dispose();
    await engine.kill();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** Pseudo-random words (a seeded LCG): text that is not a repetition, about a token per character on the test model. */
function historyText(seed: number, chars: number): string {
  const words = ['task', 'store', 'engine', 'slot', 'queue', 'durable', 'stream', 'event', 'pool', 'cache', 'turn', 'model'];
  let x = seed >>> 0 || 1;
  let out = '';
  while (out.length < chars) {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    out += `${words[x % words.length]}${(x >>> 8) % 100} `;
  }
  return out.slice(0, chars);
}

/**
 * Cache-aware routing (issue #40): two real llama-servers (4 slots each, on the engine test model whose trained
 * context, 8192 tokens, holds the whole history; the plain test models' 2048 would not leave room for four turns) in
 * one pool; 8 conversations at once, 4 turns each, every conversation with its own history of `historyTokens` tokens
 * that its turns share (about a token per character on this model); starts 150 ms apart, 50-450 ms between a
 * conversation's turns (users are not in step). First token per turn through the backend
 * (RemoteBackend.generate), cache-aware (as shipped) against least-busy: the same pool with its routing keys withheld
 * (the bench wraps RemoteEngine.route; nothing in the shipped code switches it off). Rounds alternate the order;
 * histories are new in every round, so no round finds another's prefix cached. Reported: the median first token over
 * all turns and over turns 2-4 (turn 1 is a cold prompt either way), their ratio (goal <= 0.5x), and how the
 * cache-aware requests were routed.
 */
export async function routingBench(
  opts: { conversations?: number; turns?: number; historyTokens?: number; rounds?: number; outputTokens?: number } = {},
): Promise<Record<string, unknown>> {
  try {
    llamaServerBinary();
  } catch (e) {
    return { skipped: (e as Error).message };
  }
  const conversations = opts.conversations ?? 8;
  const turns = opts.turns ?? 4;
  const historyTokens = opts.historyTokens ?? 2000;
  const rounds = opts.rounds ?? 2;
  const outputTokens = opts.outputTokens ?? 8;
  const [a, b] = await Promise.all([
    startLlamaServer({ parallel: 4, extraArgs: ['--metrics'] }),
    startLlamaServer({ parallel: 4, extraArgs: ['--metrics'] }),
  ]);
  /** Prompt tokens both servers evaluated so far (their /metrics: tokens found in a slot's cache are not counted). */
  const evaluated = async () => {
    let n = 0;
    for (const s of [a, b]) {
      const text = await (await fetch(`${s.url}/metrics`)).text();
      n += Number(/^llamacpp:prompt_tokens_total\s+([\d.e+]+)/m.exec(text)?.[1] ?? NaN);
    }
    return n;
  };
  const evaluatedTokens: Record<string, number> = { cache_aware: 0, least_busy: 0 };
  type Mode = 'cache_aware' | 'least_busy';
  const firstTokens: Record<Mode, number[][]> = { cache_aware: [], least_busy: [] };
  const routed: Record<string, number> = {};
  let promptTokens = 0;
  let seed = 1;
  const runRound = async (mode: Mode) => {
    const backend = new RemoteBackend([{ name: 'pool', urls: [a.base, b.base], kind: 'llama.cpp' }]);
    await backend.refresh();
    const engine = backend.engines[0];
    if (mode === 'least_busy') {
      const route = engine.route.bind(engine);
      engine.route = (model, keys, tried) => route(model, { whole: keys.whole, turns: [], prefixes: [] }, tried);
    }
    const perTurn: number[][] = Array.from({ length: turns }, () => []);
    const evaluatedBefore = await evaluated();
    await Promise.all(
      Array.from({ length: conversations }, async (_, c) => {
        const mine = seed++;
        const messages: ChatMessage[] = [{ role: 'user', content: `${historyText(mine, historyTokens)}\nWhat comes next?` }];
        // Users are not in step: staggered starts, a think time of 50-450 ms between turns (seeded).
        await sleep(c * 150);
        for (let t = 0; t < turns; t++) {
          if (t) await sleep(50 + ((mine * 7919 + t * 104729) % 400));
          const start = performance.now();
          let first: number | undefined;
          let text = '';
          const r = await backend.generate(
            { model: 'pool/tiny', instructions: INSTRUCTIONS, messages: [...messages], maxOutputTokens: outputTokens, temperature: 0 },
            {
              signal: new AbortController().signal,
              onText: (piece) => {
                first ??= performance.now() - start;
                text += piece;
              },
            },
          );
          perTurn[t].push(first ?? performance.now() - start);
          promptTokens = Math.max(promptTokens, r.inputTokens);
          messages.push({ role: 'assistant', content: text }, { role: 'user', content: `Turn ${t + 2}: and then?` });
        }
      }),
    );
    if (mode === 'cache_aware') {
      for (const ep of engine.endpoints) for (const [via, n] of Object.entries(ep.routed)) routed[via] = (routed[via] ?? 0) + n;
    }
    perTurn.forEach((v, t) => (firstTokens[mode][t] ??= []).push(...v));
    evaluatedTokens[mode] += (await evaluated()) - evaluatedBefore;
    await backend.dispose();
  };
  try {
    // Warm both servers' slots once.
    await Promise.all([directOnce(a.base, 4), directOnce(b.base, 4)]);
    for (let r = 0; r < rounds; r++) {
      const order: Mode[] = r % 2 ? ['least_busy', 'cache_aware'] : ['cache_aware', 'least_busy'];
      for (const mode of order) await runRound(mode);
    }
    const all = (m: Mode) => median(firstTokens[m].flat());
    const later = (m: Mode) => median(firstTokens[m].slice(1).flat());
    return {
      servers: 2,
      slots_per_server: 4,
      conversations,
      turns,
      history_tokens: historyTokens,
      largest_prompt_tokens: promptTokens,
      rounds,
      cache_aware_first_token_ms: round(all('cache_aware'), 1),
      least_busy_first_token_ms: round(all('least_busy'), 1),
      first_token_ratio: round(all('cache_aware') / all('least_busy'), 2),
      cache_aware_later_turns_first_token_ms: round(later('cache_aware'), 1),
      least_busy_later_turns_first_token_ms: round(later('least_busy'), 1),
      later_turns_first_token_ratio: round(later('cache_aware') / later('least_busy'), 2),
      first_token_ratio_goal: '<= 0.5',
      cache_aware_first_token_ms_by_turn: firstTokens.cache_aware.map((v) => round(median(v), 1)),
      least_busy_first_token_ms_by_turn: firstTokens.least_busy.map((v) => round(median(v), 1)),
      cache_aware_routed: routed,
      // Prompt tokens the servers evaluated (not found in a slot's cache), all rounds.
      cache_aware_prompt_tokens_evaluated: evaluatedTokens.cache_aware,
      least_busy_prompt_tokens_evaluated: evaluatedTokens.least_busy,
    };
  } finally {
    await Promise.all([a.kill(), b.kill()]);
  }
}

if (require.main === module && process.argv[2] === 'routing') {
  void routingBench().then((r) => {
    console.log(JSON.stringify(r, null, 2));
    process.exit(0);
  });
} else if (require.main === module) {
  void remoteBench().then((r) => {
    console.log(JSON.stringify(r, null, 2));
    process.exit(0);
  });
}
