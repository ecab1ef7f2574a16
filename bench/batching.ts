// `batching` section (issue #20): many tasks of one model at once, and a prompt prefix shared with the previous
// request. Side by side in one run, same GGUF (a generated model, embd 512, 8 layers, like the issue's figures),
// same thread count:
// - aggregate tokens/s of 1, 4 and 8 concurrent streams: ours (`serve`'s runtime + POST /responses streams, the
//   model's one batched context) against llama.cpp's llama-server (-np 8, POST /completion streams, ignore_eos),
//   rounds alternating which side goes first; at 1 stream also raw node-llama-cpp (one sequence, evaluate());
// - first-token time of a request whose 2 000-token prefix the previous request had: ours (prefix reuse) against
//   llama-server with cache_prompt through its chat template (/v1/chat/completions: the same tokens after the
//   prefix as our templated /responses), and ours without a shared prefix (uncached).
// Goals (issue #20): ≥ 0.9× llama-server at 4 and 8 streams, 1 stream ≥ 0.95× raw node-llama-cpp, cached-prefix
// first token ≤ 1.2× llama-server's and ≤ 0.25× our own uncached.
// - threads × streams (1, half and all the cores × 1, 4, 8 streams): the backend's sequence pool against llama-server
//   with -t T; per stream count the slowest thread count over the fastest, and each side's best against the other's;
// - the same uncached 2 000-token prompt through a serve with --threads auto (prompt batches on every math core,
//   contextPool.ts) against the --threads 1 serve.
// Needs llama-server built (node scripts/remote-engine/prepare.mjs); without it only our side and raw are measured.
// Ours is `serve` in its own process (batchingServeChild.ts), as llama-server is, so the clients here never share
// its event loop. Also raw node-llama-cpp with N sequences of one context (its own batching and batch order,
// nothing of ours), and the CPU cap of `auto` through the backend's own sequence pool at 4–16 sequences.
// Measured 2026-12-02 on the shared 2-core machine, 1 thread, quiet (load 0.2–0.7), after the batch order
// (contextPool.ts, sequenceOrderStrategy), four runs: ours 239–245 / 478–518 / 551–681 tokens/s at 1 / 4 / 8
// streams, llama-server 277–286 / 459–680 / 671–839, ours ÷ llama-server 0.84–0.88 / 0.70–1.11 / 0.66–1.01, raw
// 206–212 / 292–314 / 347–356. Before it: ours ÷ llama-server 0.70 at 4 streams, 0.55 at 8 (docs/hardware.md).
// 2 000-token shared prefix, first token: ours 74–79 ms cached, llama-server 118–125 ms (chat template,
// cache_prompt; 0.63×, goal met), ours uncached 1 842–1 904 ms (0.04×).
// Not met in every run: 0.9× at 4 and 8 streams — llama-server's figure moves ±25 % between runs here, ours ±10 %.
// 2026-12-03, three runs (load 1.0–1.6): ours ÷ llama-server 0.77–0.84 / 1.17–1.24 / 0.80–0.98 at 1 / 4 / 8 streams;
// grid, slowest thread count ÷ fastest per stream count, ours 0.40 / 0.96 / 0.96 (2 threads at 1 stream: the
// per-decode thread pool, contextPool.ts), llama-server 0.53 / 0.50 / 0.72; the 2 000-token prompt's first token
// with --threads auto 0.53–0.57× --threads 1 (1 thread calibrated, 2 for prompts).
// 2026-12-03, later, after the first-sampling guard and the gate's `expect` (contextPool.ts), four runs (load
// 0.3–2.7): ours ÷ llama-server 0.74–0.82 / 0.75–1.57 / 0.75–1.13 at 1 / 4 / 8 streams (llama-server's own 4-stream
// figure went from 184 to 398 tokens/s between runs), 1 stream 1.00–1.11× raw; first token at 8 streams ours
// 41–52 ms, llama-server 26–48 ms; the guard alone, side by side in one process, costs nothing measurable.
// 2026-12-03, a number in --threads made a bound (threadCalibration.ts: steps on the fastest count up to it, prompts
// on it), two runs: grid, slowest ÷ fastest per stream count, ours 0.94–0.96 / 0.94–0.96 / 0.88–0.95 (before
// 0.39–0.45 at 1 stream), llama-server 0.38–0.44 / 0.42–0.54 / 0.47–0.66; ours ÷ llama-server 0.78–0.80 /
// 1.06–1.11 / 0.74–0.86 at 1 / 4 / 8 streams, 0.99–1.05× raw at 1.
// Run directly: node out/bench/batching.js
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { writeTestModel } from '../src/backends/llama/demoModel';
import { plainTextPrompt } from '../src/backends/llama/prompt';
import { modelFingerprint } from '../src/backends/llama/snapshots';
import { promptThreadsFor, ThreadCalibrator } from '../src/backends/llama/threadCalibration';
import { llamaServerBinary, startLlamaServer, type LlamaServer } from '../test/fixtures/llamaServer';
import { sseFrames, type SseFrame } from '../test/fixtures/sse';
import { startServe } from '../test/fixtures/serveProcess';
import { benchLlama, rawBatchedBench, rawGenerationBench } from './rawGeneration';

const round = (n: number, d = 1) => Math.round(n * 10 ** d) / 10 ** d;
const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)]!;
const STORY = 'Write a long story about a durable task runtime.';

export interface StreamRun {
  ttftMs: number;
  endAt: number;
  startAt: number;
  outputTokens: number;
}

/** What one frame of a stream says: a piece of text arrived, the output's token count, or the stream's end. */
export interface FrameReading {
  text?: boolean;
  tokens?: number;
  done?: boolean;
}

/**
 * POSTs `body` and follows the SSE answer: the first and last text frames' times, and the output tokens (one per
 * text frame unless a frame gives the count).
 */
export async function timedStream(
  url: string,
  body: unknown,
  read: (f: SseFrame) => FrameReading,
  headers: Record<string, string> = {},
): Promise<StreamRun> {
  const startAt = performance.now();
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  if (res.status !== 200) throw new Error(`POST ${new URL(url).pathname}: ${res.status} ${await res.text()}`);
  let first = 0;
  let last = 0;
  let outputTokens = 0;
  for await (const f of sseFrames(res.body)) {
    const r = read(f);
    if (r.done) break;
    if (r.text) {
      if (!first) first = f.at;
      last = f.at;
      outputTokens++;
    }
    if (r.tokens !== undefined) outputTokens = r.tokens;
  }
  return { ttftMs: first - startAt, startAt, endAt: last, outputTokens };
}

/** Our serve child's LMSP base URL and token. */
export interface OursEndpoint {
  lmspUrl: string;
  token: string;
}

export function oursOnce(ep: OursEndpoint, input: string, tokens: number): Promise<StreamRun> {
  return timedStream(
    `${ep.lmspUrl}/responses`,
    { model: 'bench', input, max_output_tokens: tokens, temperature: 0.8, stream: true },
    (f) => {
      if (f.event === 'response.output_text.delta') return { text: true };
      if (f.event === 'response.completed' || f.event === 'response.incomplete') {
        return { tokens: (JSON.parse(f.data) as { response: { usage: { output_tokens: number } } }).response.usage.output_tokens };
      }
      return {};
    },
    { authorization: `Bearer ${ep.token}` },
  );
}

export function theirsOnce(server: LlamaServer, input: string, tokens: number): Promise<StreamRun> {
  return timedStream(
    `${server.url}/completion`,
    { prompt: input, n_predict: tokens, temperature: 0.8, stream: true, ignore_eos: true, cache_prompt: true },
    (f) => {
      const chunk = JSON.parse(f.data) as { stop?: boolean; tokens_predicted?: number };
      if (!chunk.stop) return { text: true };
      return typeof chunk.tokens_predicted === 'number' ? { tokens: chunk.tokens_predicted } : {};
    },
  );
}

/**
 * The same request through llama-server's chat template (/v1/chat/completions, cache_prompt), for the cached-prefix
 * case: our /responses applies the model's template too, so both evaluate the same tokens after the shared prefix
 * (its raw /completion would re-evaluate only the one differing character).
 */
function theirsChatOnce(server: LlamaServer, input: string, tokens: number): Promise<StreamRun> {
  return timedStream(
    `${server.url}/v1/chat/completions`,
    { messages: [{ role: 'user', content: input }], max_tokens: tokens, temperature: 0.8, stream: true, cache_prompt: true },
    (f) => {
      if (f.data === '[DONE]') return { done: true };
      const chunk = JSON.parse(f.data) as { choices?: Array<{ delta?: { content?: string } }> };
      return { text: Boolean(chunk.choices?.[0]?.delta?.content) };
    },
  );
}

/** N streams at once: aggregate tokens/s (all tokens over first start to last delta) and the median first token. */
export async function concurrent(n: number, once: (input: string) => Promise<StreamRun>) {
  const runs = await Promise.all(Array.from({ length: n }, (_, i) => once(`${i}: ${STORY}`)));
  const span = Math.max(...runs.map((r) => r.endAt)) - Math.min(...runs.map((r) => r.startAt));
  const tokens = runs.reduce((s, r) => s + r.outputTokens, 0);
  return { tps: (tokens / span) * 1000, ttft: median(runs.map((r) => r.ttftMs)), tokens };
}

/** About `n` tokens of the demo tokenizer (one per character or so) of varied text. */
function prefixText(n: number, salt: string): string {
  const words = ['task', 'runtime', 'durable', 'stream', 'model', 'batch', 'prefix', 'token', 'server', 'queue'];
  let s = `${salt} `;
  for (let i = 0; s.length < n; i++) s += words[(i * 7 + salt.length) % words.length] + (i % 11 === 10 ? '. ' : ' ');
  return s.slice(0, n);
}

/** What `--threads T` gives a load of this model here: the step and prompt counts (ThreadCalibrator, modelLoad.ts). */
async function threadsForSetting(modelPath: string, setting: number): Promise<{ threads: number; promptThreads: number }> {
  const llama = await benchLlama();
  try {
    const model = await llama.loadModel({ modelPath, gpuLayers: 0 });
    const mathCores = llama.cpuMathCores;
    const run = { modelPath, fingerprint: modelFingerprint(modelPath), compute: 'cpu', devices: [], gpuLayers: 0, mathCores };
    const picked = await new ThreadCalibrator({ setting }).pick(model, run);
    await model.dispose();
    return { threads: picked.threads, promptThreads: promptThreadsFor(picked, mathCores, true) };
  } finally {
    await llama.dispose();
  }
}

/**
 * Aggregate tokens/s for each thread count × number of streams a user can set: the backend's own sequence pool
 * (one context of N sequences, all N generating; no tasks or HTTP) with the threads that `--threads T` gives (a
 * bound: the step count calibrated up to T, prompts on T), and llama-server (-t T, -np 8, N /completion streams).
 * Thread counts: 1, half the cores and all of them. Rounds interleave the cells.
 */
async function threadsGrid(opts: {
  modelPath: string;
  tokens: number;
  rounds: number;
  ctx: number;
  llamaServer: boolean;
}): Promise<Record<string, unknown>> {
  const cores = os.availableParallelism();
  const threadCounts = [...new Set([1, Math.max(1, Math.floor(cores / 2)), cores])];
  const streams = [1, 4, 8];
  const cells = threadCounts.flatMap((t) => streams.map((n) => ({ t, n, key: `${t}x${n}` })));
  const ours = new Map<string, number[]>(cells.map((c) => [c.key, []]));
  const theirs = new Map<string, number[]>(cells.map((c) => [c.key, []]));
  const given = new Map<number, { threads: number; promptThreads: number }>();
  for (const t of threadCounts) given.set(t, await threadsForSetting(opts.modelPath, t));
  for (let r = 0; r < opts.rounds; r++) {
    for (const c of cells) {
      const { threads, promptThreads } = given.get(c.t)!;
      ours.get(c.key)!.push(
        await rawBatchedBench({
          modelPath: opts.modelPath,
          tokens: opts.tokens,
          threads,
          promptThreads,
          streams: c.n,
          prompt: (i) => `${i}: ${STORY}`,
          pool: true,
        }),
      );
    }
    if (!opts.llamaServer) continue;
    for (const t of threadCounts) {
      const server = await startLlamaServer({ model: opts.modelPath, ctx: opts.ctx, threads: t, parallel: 8 });
      try {
        await concurrent(8, (input) => theirsOnce(server, input, opts.tokens));
        for (const n of streams) theirs.get(`${t}x${n}`)!.push((await concurrent(n, (input) => theirsOnce(server, input, opts.tokens))).tps);
      } finally {
        await server.kill();
      }
    }
  }
  const table = (m: Map<string, number[]>) => Object.fromEntries(cells.map((c) => [c.key, Math.round(median(m.get(c.key)!))]));
  // For each number of streams (the workload), the slowest thread count against the fastest, and the best of each
  // side against each other.
  const byStreams = (t: Record<string, number>, f: (v: number[]) => number) =>
    Object.fromEntries(streams.map((n) => [n, f(threadCounts.map((th) => t[`${th}x${n}`]!))]));
  const oursTable = table(ours);
  const out: Record<string, unknown> = {
    threads_grid_cells: 'threads x streams',
    threads_grid_pool_step_and_prompt_threads: Object.fromEntries([...given].map(([t, g]) => [t, `${g.threads}/${g.promptThreads}`])),
    threads_grid_pool_tokens_per_second: oursTable,
    threads_grid_pool_worst_over_best_by_streams: byStreams(oursTable, (v) => round(Math.min(...v) / Math.max(...v), 2)),
  };
  if (opts.llamaServer) {
    const theirsTable = table(theirs);
    out.threads_grid_llama_server_tokens_per_second = theirsTable;
    out.threads_grid_llama_server_worst_over_best_by_streams = byStreams(theirsTable, (v) => round(Math.min(...v) / Math.max(...v), 2));
    const oursBest = byStreams(oursTable, (v) => Math.max(...v));
    const theirsBest = byStreams(theirsTable, (v) => Math.max(...v));
    out.threads_grid_best_over_llama_server_best_by_streams = Object.fromEntries(streams.map((n) => [n, round(oursBest[n]! / theirsBest[n]!, 2)]));
  }
  return out;
}

export async function batchingBench(
  opts: { tokens?: number; rounds?: number; threads?: number; streams?: number[]; prefixTokens?: number; embd?: number; layers?: number } = {},
): Promise<Record<string, unknown>> {
  const tokens = opts.tokens ?? 96;
  const rounds = opts.rounds ?? 3;
  const threads = opts.threads ?? 1;
  const streams = opts.streams ?? [1, 4, 8];
  const prefixTokens = opts.prefixTokens ?? 2000;
  const maxStreams = Math.max(...streams);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'batching-bench-'));
  const modelPath = path.join(dir, 'bench.gguf');
  writeTestModel(modelPath, { seed: 3, embd: opts.embd ?? 512, layers: opts.layers ?? 8, contextLength: 4096 });
  const ctx = 4096;
  let server: LlamaServer | undefined;
  let skipped: string | undefined;
  try {
    llamaServerBinary();
  } catch (e) {
    skipped = (e as Error).message;
  }
  // Ours in its own process, as llama-server is: the clients below never share its event loop.
  const ours = await startServe(
    ['--threads', String(threads), '--concurrency', String(maxStreams), '--context-size', String(ctx), '--gpu', 'off'],
    path.join(dir, 'data'),
    [path.join(__dirname, 'batchingServeChild.js'), modelPath],
  );
  const ep = { lmspUrl: ours.lmsp, token: ours.token };
  const out: Record<string, unknown> = {
    model: `generated, embd ${opts.embd ?? 512}, ${opts.layers ?? 8} layers, ${Math.round(fs.statSync(modelPath).size / 1e6)} MB`,
    tokens_per_stream: tokens,
    threads,
    rounds,
    load_average: os.loadavg().map((l) => round(l, 1)),
  };
  try {
    if (!skipped) server = await startLlamaServer({ model: modelPath, ctx, threads, parallel: maxStreams });
    const oursStream = (input: string) => oursOnce(ep, input, tokens);
    // The bench model has no chat template, so our /responses evaluates the plain-text prompt (prompt.ts): llama-server
    // gets that same text, so both sides evaluate the same tokens (70 here, against 53 for the bare input).
    const theirs = server
      ? (input: string) => theirsOnce(server!, plainTextPrompt(undefined, [{ role: 'user', content: input }]), tokens)
      : undefined;
    // Warm both (our first request loads the model).
    await oursStream('warm');
    await concurrent(maxStreams, oursStream);
    if (theirs) await concurrent(maxStreams, theirs);
    for (const n of streams) {
      const o: Array<{ tps: number; ttft: number }> = [];
      const t: Array<{ tps: number; ttft: number }> = [];
      const raw: number[] = [];
      for (let r = 0; r < rounds; r++) {
        // Alternate which side goes first.
        if (theirs && r % 2) t.push(await concurrent(n, theirs));
        o.push(await concurrent(n, oursStream));
        if (theirs && !(r % 2)) t.push(await concurrent(n, theirs));
        if (n === 1) raw.push((await rawGenerationBench({ modelPath, tokens, threads })).tokensPerSecond);
        else raw.push(await rawBatchedBench({ modelPath, tokens, threads, streams: n, prompt: (i) => `${i}: ${STORY}` }));
      }
      const oTps = median(o.map((x) => x.tps));
      out[`streams_${n}_ours_tokens_per_second`] = Math.round(oTps);
      out[`streams_${n}_ours_first_token_ms`] = round(median(o.map((x) => x.ttft)));
      if (t.length) {
        const tTps = median(t.map((x) => x.tps));
        out[`streams_${n}_llama_server_tokens_per_second`] = Math.round(tTps);
        out[`streams_${n}_llama_server_first_token_ms`] = round(median(t.map((x) => x.ttft)));
        out[`streams_${n}_ratio`] = round(oTps / tTps, 2);
      }
      if (raw.length) {
        out[`streams_${n}_raw_node_llama_cpp_tokens_per_second`] = Math.round(median(raw));
        out[`streams_${n}_vs_raw`] = round(oTps / median(raw), 2);
        if (t.length) out[`streams_${n}_raw_vs_llama_server`] = round(median(raw) / median(t.map((x) => x.tps)), 2);
      }
    }
    // The CPU cap of `auto` (contextPool.ts AUTO_CONCURRENCY_CAP.cpu): the aggregate of the backend's own sequence
    // pool (its batch order and gathering, no tasks or HTTP) at 4 to 16 sequences of one context; rounds interleave
    // the counts.
    const capCounts = [4, 8, 12, 16];
    const capRuns = new Map<number, number[]>(capCounts.map((n) => [n, []]));
    for (let r = 0; r < rounds; r++) {
      for (const n of capCounts)
        capRuns.get(n)!.push(await rawBatchedBench({ modelPath, tokens, threads, streams: n, prompt: (i) => `${i}: ${STORY}`, pool: true }));
    }
    out.cpu_cap_pool_tokens_per_second = Object.fromEntries(capCounts.map((n) => [n, Math.round(median(capRuns.get(n)!))]));
    out.cpu_cap_pool_16_over_8 = round(median(capRuns.get(16)!) / median(capRuns.get(8)!), 2);
    // Threads × concurrency (issue #20: no setting a user can choose should collapse below 0.5× of the best).
    Object.assign(out, await threadsGrid({ modelPath, tokens, rounds, ctx, llamaServer: !skipped }));
    // Cached prefix: each request shares its first `prefixTokens` characters with the request before it.
    const shared = prefixText(prefixTokens, 'shared');
    const cached: number[] = [];
    const cachedTheirs: number[] = [];
    const uncached: number[] = [];
    const short = 8;
    await oursStream(`${shared} question 0`);
    if (theirs) await theirsChatOnce(server!, `${shared} question 0`, short);
    for (let r = 1; r <= rounds; r++) {
      cached.push((await oursOnce(ep, `${shared} question ${r}`, short)).ttftMs);
      if (theirs) cachedTheirs.push((await theirsChatOnce(server!, `${shared} question ${r}`, short)).ttftMs);
      uncached.push((await oursOnce(ep, `${prefixText(prefixTokens, `fresh${r}`)} question`, short)).ttftMs);
      // The fresh prefix took a sequence: bring the shared one back as the latest for the next round.
      await oursOnce(ep, `${shared} question ${r}b`, 1);
      if (theirs) await theirsChatOnce(server!, `${shared} question ${r}b`, 1);
    }
    out.prefix_tokens = prefixTokens;
    out.cached_prefix_ours_first_token_ms = round(median(cached));
    out.uncached_ours_first_token_ms = round(median(uncached));
    out.cached_vs_uncached_ours = round(median(cached) / median(uncached), 2);
    if (cachedTheirs.length) {
      out.cached_prefix_llama_server_first_token_ms = round(median(cachedTheirs));
      out.cached_prefix_ratio = round(median(cached) / median(cachedTheirs), 2);
    }
    // Prompt threads (contextPool.ts): the same uncached prompts through a serve with --threads auto — one-token
    // steps on the calibrated count, a prompt's batches on every math core — against the --threads 1 serve above.
    const auto = await startServe(
      ['--threads', 'auto', '--concurrency', '1', '--context-size', String(ctx), '--gpu', 'off'],
      path.join(dir, 'data-auto'),
      [path.join(__dirname, 'batchingServeChild.js'), modelPath],
    );
    try {
      const autoEp = { lmspUrl: auto.lmsp, token: auto.token };
      await oursOnce(autoEp, 'warm', short);
      const uncachedAuto: number[] = [];
      for (let r = 1; r <= rounds; r++) uncachedAuto.push((await oursOnce(autoEp, `${prefixText(prefixTokens, `auto${r}`)} question`, short)).ttftMs);
      const models = (await (await fetch(`${auto.lmsp}/models`, { headers: { authorization: `Bearer ${auto.token}` } })).json()) as {
        data: Array<{ id: string; task_runtime?: { hardware?: { threads?: number; prompt_threads?: number } } }>;
      };
      const hw = models.data.find((m) => m.id === 'bench')?.task_runtime?.hardware;
      out.auto_threads = hw?.threads;
      out.auto_prompt_threads = hw?.prompt_threads;
      out.uncached_auto_threads_first_token_ms = round(median(uncachedAuto));
      out.uncached_auto_over_one_thread = round(median(uncachedAuto) / median(uncached), 2);
    } finally {
      await auto.stop();
    }
    out.goals = '>= 0.9x llama-server at 4 and 8 streams; 1 stream >= 0.95x raw; cached first token <= 1.2x llama-server, <= 0.25x uncached';
    if (skipped) out.llama_server = `not measured: ${skipped}`;
    return out;
  } finally {
    await ours.stop();
    await server?.kill();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

if (require.main === module) {
  const rounds = process.argv[2] ? Number(process.argv[2]) : undefined;
  const threads = process.argv[3] ? Number(process.argv[3]) : undefined;
  void batchingBench({ rounds, threads }).then((r) => {
    console.log(JSON.stringify(r, null, 2));
    process.exit(0);
  });
}
