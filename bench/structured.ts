// Schema-constrained generation against free text on the same model, backend and thread count (issue #19 item 8):
// what the grammar costs per token, and, side by side in the same run, llama.cpp's own llama-server (built from the
// bundled source, test/fixtures/llamaServer.ts) constraining the same schema with its `json_schema` on the same GGUF,
// thread count and context size. Free text runs a fixed length (end tokens suppressed; llama-server: ignore_eos);
// constrained runs end where their document ends, so every rate is total output tokens over total request time
// (prompt included; llama-server's over the HTTP round trip, as a client sees it), over the same seeds, the four
// kinds interleaved per seed. Our grammar is compiled once before timing (cached per model and schema); llama-server
// converts the schema on each request, as it does for any client.
// Goals (issue #19): ours ≥ 0.9× llama-server's constrained rate; grammar overhead (1 − constrained/free) ≤ 15 %.
// Measured here (2 cores shared with other work, load 4-7, demo model, 1 thread, 8 seeds, two runs): ours
// constrained 1029 / 900 tok/s against free 1168 / 1084 (grammar overhead 11.9 % / 17.0 %, around the 15 % goal;
// the UTF-8 guard's token bias is in it); llama-server constrained 2762 / 2446, free 2945 / 2551 (overhead 6.2 % /
// 4.1 %): ours ÷ theirs 0.37× constrained, 0.40-0.43× free. 2026-12-03, quiet machine (load 0.3), two runs: ours
// constrained 1154 / 1161 against free 1257 / 1234 (overhead 8.3 % / 6.0 %: the 15 % goal met), llama-server
// constrained 2733 / 2677: ours ÷ theirs 0.42 / 0.43× constrained, 0.45-0.47× free — the goal of 0.9× is not met,
// and the gap is the per-token path (free text is as far behind), not the grammar. All 8 free llama-server runs of
// a pass hit the parse error above.
// Run directly: node out/bench/structured.js [threads=1] [seeds=8]

import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { LlamaBackend } from '../src/backends/llama/llamaBackend';
import { writeTestModel } from '../src/backends/llama/demoModel';
import type { GenerateRequest, OutputFormat } from '../src/runtime/backend';
import { llamaServerBinary, startLlamaServer, type LlamaServer } from '../test/fixtures/llamaServer';

const obj = (properties: Record<string, unknown>) => ({ type: 'object', properties, required: Object.keys(properties), additionalProperties: false });
/** Long documents of a similar length: 16 small records. */
const FORMAT: OutputFormat = {
  type: 'json_schema',
  name: 'records',
  strict: true,
  schema: obj({
    records: {
      type: 'array',
      minItems: 16,
      maxItems: 16,
      items: obj({
        id: { type: 'integer' },
        name: { type: 'string', minLength: 4, maxLength: 12 },
        kind: { enum: ['a', 'b', 'c'] },
        score: { type: ['number', 'null'] },
      }),
    },
  }),
};

const PROMPT = 'List records as JSON.';
const TEMPERATURE = 0.8;
const CONTEXT = 2048;

interface Sample {
  tokens: number;
  ms: number;
  /** A constrained document cut at the token cap (not ended by its grammar): it does not parse, and counts as cut. */
  cut?: boolean;
}

/**
 * llama-server free text of exactly `nPredict` tokens (ignore_eos). On the demo model's noise the server answers
 * many of them 500 "does not match the expected Content-only format": its output parser (run even on /completion)
 * refuses the text once it is generated. The tokens were generated all the same, so such a request counts as
 * `nPredict` tokens over its time; `parseErrors` says how often it happened.
 */
async function serverFree(engine: LlamaServer, seed: number, nPredict: number, counter: { parseErrors: number }): Promise<Sample> {
  const started = performance.now();
  try {
    return await serverOnce(engine, seed, false, nPredict);
  } catch (e) {
    if (!/Content-only format/.test((e as Error).message)) throw e;
    counter.parseErrors++;
    return { tokens: nPredict, ms: performance.now() - started };
  }
}

/** One llama-server /completion: constrained by `json_schema`, or free text of a fixed length. */
async function serverOnce(engine: LlamaServer, seed: number, constrained: boolean, nPredict: number): Promise<Sample> {
  const started = performance.now();
  const res = await fetch(`${engine.url}/completion`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      prompt: PROMPT,
      n_predict: nPredict,
      temperature: TEMPERATURE,
      seed,
      cache_prompt: false,
      ...(constrained && FORMAT.type === 'json_schema' ? { json_schema: FORMAT.schema } : { ignore_eos: true }),
    }),
  });
  const body = (await res.json()) as { content?: string; tokens_predicted?: number; stop_type?: string; error?: unknown };
  const ms = performance.now() - started;
  if (res.status !== 200 || typeof body.tokens_predicted !== 'number')
    throw new Error(`llama-server /completion: ${res.status} ${JSON.stringify(body).slice(0, 300)}`);
  if (!constrained) return { tokens: body.tokens_predicted, ms };
  // Its document is JSON too, or the comparison is void; one cut at the token cap (stop_type `limit`: the random
  // weights wrote a long string) is counted as cut, as ours is, and its tokens still count: they were generated under
  // the grammar in that time. A document that ended otherwise and does not parse is an error.
  const cut = body.stop_type === 'limit' && body.tokens_predicted >= nPredict;
  try {
    JSON.parse(body.content ?? '');
  } catch (e) {
    if (!cut) throw new Error(`llama-server's constrained document does not parse (stop_type ${body.stop_type}): ${(e as Error).message}`);
    return { tokens: body.tokens_predicted, ms, cut: true };
  }
  return { tokens: body.tokens_predicted, ms };
}

export async function structuredBench(opts: {
  modelPath: string;
  threads?: number;
  seeds?: number;
  /** Where our side looks for a native engine build (LlamaBackend's nativeBuilds; default: the prebuilt binary). */
  nativeBuilds?: string;
}): Promise<Record<string, unknown>> {
  // One thread: what `auto` picks on the 2 shared cores here (bench hardware: demo_auto_threads); at 2 threads under
  // load our evaluate loop collapses (41 tok/s free, 60 constrained) while llama-server keeps 2445 constrained.
  const threads = opts.threads ?? 1;
  const seeds = Array.from({ length: opts.seeds ?? 8 }, (_, i) => i + 1);
  let serverSkipped: string | undefined;
  try {
    llamaServerBinary();
  } catch (e) {
    serverSkipped = (e as Error).message;
  }
  const backend = new LlamaBackend({
    models: [{ source: opts.modelPath }],
    threads,
    contextSize: CONTEXT,
    gpu: 'off',
    suppressEndOfGeneration: true,
    ...(opts.nativeBuilds ? { nativeBuilds: opts.nativeBuilds } : {}),
  });
  const engine = serverSkipped ? undefined : await startLlamaServer({ model: opts.modelPath, ctx: CONTEXT, threads });
  try {
    const id = backend.resolveModel(undefined)!;
    await backend.load(id);
    const base: GenerateRequest = { model: id, messages: [{ role: 'user', content: PROMPT }], temperature: TEMPERATURE };
    const run = async (req: GenerateRequest): Promise<Sample> => {
      const started = performance.now();
      let text = '';
      const r = await backend.generate(req, { signal: new AbortController().signal, onText: (t) => (text += t) });
      const sample = { tokens: r.outputTokens, ms: performance.now() - started };
      if (!req.format) return sample;
      // Ours, like llama-server's: a document cut at the token cap counts as cut; one that ended and does not parse
      // is an error (the grammar failed).
      try {
        JSON.parse(text);
      } catch (e) {
        if (r.finishReason !== 'max_output_tokens')
          throw new Error(`our constrained document does not parse (${r.finishReason}): ${(e as Error).message}`);
        return { ...sample, cut: true };
      }
      return sample;
    };
    const compileStarted = performance.now();
    await run({ ...base, format: FORMAT, seed: 1000, maxOutputTokens: 4 });
    const firstUseMs = performance.now() - compileStarted;
    // Warm llama-server's slot and both of its paths once.
    if (engine) {
      await serverOnce(engine, 1000, true, 1500);
      await serverFree(engine, 1000, 16, { parseErrors: 0 });
    }
    const sum = (xs: Sample[]) => xs.reduce((a, b) => ({ tokens: a.tokens + b.tokens, ms: a.ms + b.ms }), { tokens: 0, ms: 0 });
    const rate = (xs: Sample[]) => {
      const t = sum(xs);
      return (t.tokens / t.ms) * 1000;
    };
    const constrained: Sample[] = [];
    const free: Sample[] = [];
    const theirs: Sample[] = [];
    const theirsFree: Sample[] = [];
    const counter = { parseErrors: 0 };
    const cutCount = (xs: Sample[]) => xs.filter((x) => x.cut).length;
    for (const seed of seeds) {
      const c = await run({ ...base, format: FORMAT, seed, maxOutputTokens: 1500 });
      constrained.push(c);
      if (engine) theirs.push(await serverOnce(engine, seed, true, 1500));
      // Free text of the same length as our document, same seed.
      const n = Math.max(1, c.tokens);
      free.push(await run({ ...base, seed, maxOutputTokens: n }));
      if (engine) theirsFree.push(await serverFree(engine, seed, n, counter));
    }
    const constrainedRate = rate(constrained);
    const freeRate = rate(free);
    const out: Record<string, unknown> = {
      threads,
      generations: seeds.length,
      tokens: sum(constrained).tokens,
      free_tokens_per_s: Math.round(freeRate),
      constrained_tokens_per_s: Math.round(constrainedRate),
      constrained_over_free: Number((constrainedRate / freeRate).toFixed(3)),
      grammar_overhead_pct: Number((100 * (1 - constrainedRate / freeRate)).toFixed(1)),
      grammar_first_use_ms: Math.round(firstUseMs),
      cut_documents: cutCount(constrained),
    };
    if (!engine) return { ...out, llama_server: { skipped: serverSkipped } };
    const theirRate = rate(theirs);
    const theirFreeRate = rate(theirsFree);
    return {
      ...out,
      llama_server_tokens: sum(theirs).tokens,
      llama_server_cut_documents: cutCount(theirs),
      llama_server_constrained_tokens_per_s: Math.round(theirRate),
      llama_server_free_tokens_per_s: Math.round(theirFreeRate),
      llama_server_free_parse_errors: counter.parseErrors,
      llama_server_grammar_overhead_pct: Number((100 * (1 - theirRate / theirFreeRate)).toFixed(1)),
      ours_over_llama_server_constrained: Number((constrainedRate / theirRate).toFixed(3)),
      ours_over_llama_server_free: Number((freeRate / theirFreeRate).toFixed(3)),
    };
  } finally {
    await engine?.kill();
    await backend.dispose();
  }
}

if (require.main === module) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'task-runtime-bench-'));
  const modelPath = path.join(dir, 'tiny.gguf');
  writeTestModel(modelPath, { seed: 1 });
  structuredBench({ modelPath, threads: Number(process.argv[2] ?? 1), seeds: Number(process.argv[3] ?? 8) })
    .then((r) => console.log(JSON.stringify(r, null, 2)))
    .catch((err: unknown) => {
      console.error(err);
      process.exitCode = 1;
    })
    .finally(() => fs.rmSync(dir, { recursive: true, force: true }));
}
