// `embeddings` section (issue 41 item 1's bench goal: ≥ 0.9× llama-server's embeddings/s): 1 000 chunks of ~200
// tokens through our `serve`'s POST /lmsp/v1/embeddings against llama.cpp's llama-server's POST /v1/embeddings, the
// same generated GGUF (pooling mean, wide enough that compute dominates HTTP), the same thread count, side by side in
// one run with the order alternating per round. Requests of BATCH inputs, CONCURRENT in flight, both sides alike.
// Ours is the product's `serve` (dist/cli.js) in its own process, as llama-server runs in its own, so the client
// here shares neither's event loop. llama-server runs with --parallel 1 and its default batch sizes: with more slots
// (several inputs in one decode) its vectors stop agreeing with its own one-slot ones (measured min cosine 0.75 on
// these chunks at --parallel 2 and 4, its /v1/embeddings batching sequences of mean pooling) and it is slower here;
// that configuration is measured once after the rounds (`llama_server_at_our_lanes`) for the record. Also the
// cosine of our vectors and llama-server's for the first chunks (they must agree, ≥ 0.9999, or the figures compare
// different work). Needs llama-server built
// (node scripts/remote-engine/prepare.mjs); without it only our side is measured and the section says why.
// Run directly: node out/bench/embeddings.js   (or npm run bench -- embeddings)
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { lanePlan } from '../src/backends/llama/embedding';
import { writeTestModel } from '../src/backends/llama/demoModel';
import { llamaServerBinary, startLlamaServer, type LlamaServer } from '../test/fixtures/llamaServer';
import { startServe } from '../test/fixtures/serveProcess';

export interface EmbeddingsBenchOptions {
  chunks?: number;
  /** Inputs per request. */
  batch?: number;
  /** Requests in flight. */
  concurrent?: number;
  threads?: number;
  rounds?: number;
  /** llama-server's --parallel for the side-by-side (default 1: see the header). */
  serverParallel?: number;
  embd?: number;
  layers?: number;
}

const round = (n: number, d = 1) => Math.round(n * 10 ** d) / 10 ** d;
const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)];
const WORDS = 'alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau upsilon'.split(' ');

/** `n` distinct texts of `words` words each (the generated model's byte-level vocabulary: ~6 tokens per word). */
function chunkTexts(n: number, words: number): string[] {
  return Array.from({ length: n }, (_, i) => {
    const out = [`chunk ${i}:`];
    let k = i;
    for (let w = 0; w < words; w++) {
      out.push(`${WORDS[k % WORDS.length]}${k % 7}`);
      k = (k * 31 + 7) % 1009;
    }
    return out.join(' ');
  });
}

interface Side {
  url: string;
  headers: Record<string, string>;
  model: string;
}

interface Answer {
  data: Array<{ index: number; embedding: number[] }>;
  usage: { prompt_tokens: number };
}

async function embedOnce(side: Side, input: string[]): Promise<Answer> {
  const res = await fetch(side.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...side.headers },
    body: JSON.stringify({ model: side.model, input, encoding_format: 'float' }),
  });
  if (res.status !== 200) throw new Error(`${side.url} answered ${res.status}: ${await res.text()}`);
  return (await res.json()) as Answer;
}

/** Every chunk through `side` in requests of `batch`, `concurrent` in flight: embeddings/s and tokens/s. */
async function runAll(side: Side, chunks: string[], batch: number, concurrent: number) {
  const requests: string[][] = [];
  for (let i = 0; i < chunks.length; i += batch) requests.push(chunks.slice(i, i + batch));
  let next = 0;
  let vectors = 0;
  let tokens = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: concurrent }, async () => {
      while (next < requests.length) {
        const input = requests[next++];
        const answer = await embedOnce(side, input);
        if (answer.data.length !== input.length) throw new Error(`${answer.data.length} vectors for ${input.length} inputs`);
        vectors += answer.data.length;
        tokens += answer.usage.prompt_tokens;
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  return { perSecond: vectors / seconds, tokensPerSecond: tokens / seconds, seconds, tokens };
}

function cosine(a: readonly number[], b: readonly number[]): number {
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i] * b[i];
    na += a[i] * a[i];
    nb += b[i] * b[i];
  }
  return dot / Math.sqrt(na * nb);
}

export async function embeddingsBench(opts: EmbeddingsBenchOptions = {}): Promise<Record<string, unknown>> {
  const n = opts.chunks ?? 1000;
  const batch = opts.batch ?? 32;
  const concurrent = opts.concurrent ?? 4;
  const threads = opts.threads ?? Math.min(4, os.cpus().length);
  const rounds = opts.rounds ?? 3;
  const embd = opts.embd ?? 384;
  const layers = opts.layers ?? 4;
  const lanes = lanePlan(8192, threads).length;
  const parallel = opts.serverParallel ?? 1;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'embeddings-bench-'));
  const modelPath = path.join(dir, 'embed.gguf');
  writeTestModel(modelPath, { seed: 7, embd, layers, poolingType: 'mean', contextLength: 8192 });
  const chunks = chunkTexts(n, 32);
  let skipped: string | undefined;
  try {
    llamaServerBinary();
  } catch (e) {
    skipped = (e as Error).message;
  }
  const ours = await startServe(
    ['--model', modelPath, '--threads', String(threads), '--gpu', 'off', '--concurrency', '1', '--keep-alive', '0'],
    path.join(dir, 'data'),
  );
  let server: LlamaServer | undefined;
  try {
    const oursSide: Side = { url: `${ours.lmsp}/embeddings`, headers: { authorization: `Bearer ${ours.token}` }, model: 'embed' };
    server = skipped ? undefined : await startLlamaServer({ model: modelPath, ctx: 2048, threads, parallel, extraArgs: ['--embeddings'] });
    const theirsSide: Side | undefined = server && { url: `${server.base}/embeddings`, headers: {}, model: 'tiny' };
    // Warm both (our first request loads the model and makes the lanes) and compare vectors on the first chunks.
    const sample = chunks.slice(0, 8);
    const mine = await embedOnce(oursSide, sample);
    let minCosine: number | undefined;
    let tokensAgree: boolean | undefined;
    if (theirsSide) {
      const theirs = await embedOnce(theirsSide, sample);
      minCosine = Math.min(...sample.map((_, i) => cosine(mine.data[i].embedding, theirs.data.find((d) => d.index === i)!.embedding)));
      tokensAgree = mine.usage.prompt_tokens === theirs.usage.prompt_tokens;
    }
    const oursRuns: Array<Awaited<ReturnType<typeof runAll>>> = [];
    const theirsRuns: Array<Awaited<ReturnType<typeof runAll>>> = [];
    for (let r = 0; r < rounds; r++) {
      // Alternate which side goes first, so neither always runs on a machine the other just warmed.
      if (theirsSide && r % 2) theirsRuns.push(await runAll(theirsSide, chunks, batch, concurrent));
      oursRuns.push(await runAll(oursSide, chunks, batch, concurrent));
      if (theirsSide && !(r % 2)) theirsRuns.push(await runAll(theirsSide, chunks, batch, concurrent));
    }
    // llama-server with as many slots as we have lanes: once, for the record (see the header).
    let atLanes: Record<string, unknown> | undefined;
    if (theirsSide && lanes > 1 && parallel !== lanes) {
      await server!.kill();
      server = await startLlamaServer({ model: modelPath, ctx: 2048, threads, parallel: lanes, extraArgs: ['--embeddings'] });
      const side: Side = { ...theirsSide, url: `${server.base}/embeddings` };
      const theirs = await embedOnce(side, sample);
      const cos = Math.min(...sample.map((_, i) => cosine(mine.data[i].embedding, theirs.data.find((d) => d.index === i)!.embedding)));
      const run = await runAll(side, chunks, batch, concurrent);
      atLanes = { parallel: lanes, embeddings_per_s: round(run.perSecond), min_cosine_vs_ours: round(cos, 6) };
    }
    const oursRate = median(oursRuns.map((x) => x.perSecond));
    const theirsRate = theirsRuns.length ? median(theirsRuns.map((x) => x.perSecond)) : undefined;
    return {
      model: `generated, embd ${embd}, ${layers} layers, pooling mean, ${round(fs.statSync(modelPath).size / 1e6)} MB`,
      chunks: n,
      tokens_per_chunk: round(oursRuns[0].tokens / n),
      batch,
      concurrent_requests: concurrent,
      threads,
      our_lanes: lanes,
      llama_server_parallel: parallel,
      rounds,
      load_average: os.loadavg().map((l) => round(l, 1)),
      ours_embeddings_per_s: round(oursRate),
      llama_server_embeddings_per_s: theirsRate === undefined ? null : round(theirsRate),
      ours_over_llama_server: theirsRate === undefined ? null : round(oursRate / theirsRate, 2),
      ours_runs_per_s: oursRuns.map((x) => round(x.perSecond)),
      llama_server_runs_per_s: theirsRuns.map((x) => round(x.perSecond)),
      ours_tokens_per_s: round(median(oursRuns.map((x) => x.tokensPerSecond))),
      llama_server_tokens_per_s: theirsRuns.length ? round(median(theirsRuns.map((x) => x.tokensPerSecond))) : null,
      min_cosine_vs_llama_server: minCosine === undefined ? null : round(minCosine, 6),
      prompt_tokens_agree: tokensAgree ?? null,
      ...(atLanes ? { llama_server_at_our_lanes: atLanes } : {}),
      ...(skipped ? { llama_server_skipped: skipped } : {}),
    };
  } finally {
    await server?.kill();
    await ours.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

if (require.main === module) {
  embeddingsBench().then(
    (r) => {
      console.log(JSON.stringify(r, null, 2));
      process.exit(0);
    },
    (e: unknown) => {
      console.error(e);
      process.exit(1);
    },
  );
}
