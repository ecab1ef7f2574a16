// `npm run bench -- speculative`: speculative decoding (prompt lookup, src/backends/llama/speculative.ts) on the demo
// model, side by side in one run: the same requests on three backends that differ only in `promptLookup` (off, auto,
// on), interleaved round by round. "Copying": a greedy answer to a prompt that holds the answer to an earlier prompt —
// the random-weight model's greedy output falls into a loop, and lookup drafts it; "not copying": seeded sampling at
// temperature 1, whose output rarely repeats (what back-off saves). Also whether every output is token-for-token the
// same with and without speculation (free text, a JSON schema, a forced tool call, temperature 0).
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { writeTestModel } from '../src/backends/llama/demoModel';
import { LlamaBackend } from '../src/backends/llama/llamaBackend';
import type { PromptLookupChoice } from '../src/backends/llama/speculative';
import type { GenerateRequest, GenerateResult } from '../src/runtime/backend';

const ROUNDS = 7;
const TOKENS = 400;
const BIG_ROUNDS = 5;
const BIG_TOKENS = 160;
const never = () => new AbortController().signal;

async function run(b: LlamaBackend, req: GenerateRequest): Promise<{ text: string; ms: number; r: GenerateResult }> {
  let text = '';
  const t0 = performance.now();
  const r = await b.generate(req, { signal: never(), onText: (t) => (text += t) });
  return { text, ms: performance.now() - t0, r };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** Tokens/s of off / auto / on, interleaved round by round, on a copying and a not-copying prompt. */
async function speeds(
  modelPath: string,
  tokens: number,
  rounds: number,
): Promise<{ out: Record<string, unknown>; copying: GenerateRequest; backends: LlamaBackend[] }> {
  const choices: PromptLookupChoice[] = ['off', 'auto', 'on'];
  // One thread calibration for all three (a shared cache): the same thread count, and `auto` decides by its rate.
  const cacheDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tr-spec-cal-'));
  let decision = '';
  const log = (m: string) => {
    const found = /speculative: (prompt lookup \(auto[^)]*\))/.exec(m);
    if (found) decision = found[1]!;
  };
  const backends: LlamaBackend[] = [];
  for (const promptLookup of choices) {
    const b = new LlamaBackend({
      models: [{ source: modelPath, demo: true }],
      promptLookup,
      threads: 'auto',
      cacheDir,
      concurrency: 1,
      suppressEndOfGeneration: true,
      log,
    });
    backends.push(b);
  }
  const base: GenerateRequest = {
    model: '',
    instructions: 'You are a test.',
    messages: [{ role: 'user', content: 'Rewrite this.' }],
    temperature: 0,
  };
  const first = await run(backends[0]!, { ...base, maxOutputTokens: tokens });
  const copying: GenerateRequest = { ...base, messages: [{ role: 'user', content: first.text }], maxOutputTokens: tokens };
  const sampled: GenerateRequest = { ...copying, temperature: 1 };
  for (const b of backends) await run(b, copying); // warm: loads, first decodes
  const rates: Record<string, number[]> = {};
  const counts: Record<string, GenerateResult['speculative']> = {};
  for (let round = 0; round < rounds; round++) {
    for (const [i, b] of backends.entries()) {
      for (const [name, req] of [
        ['copying', copying],
        ['not_copying', { ...sampled, seed: round + 1 }],
      ] as const) {
        const x = await run(b, req);
        (rates[`${name}_${choices[i]}`] ??= []).push((x.r.outputTokens / x.ms) * 1000);
        counts[`${name}_${choices[i]}`] = x.r.speculative;
      }
    }
  }
  fs.rmSync(cacheDir, { recursive: true, force: true });
  const out: Record<string, unknown> = { tokens, rounds, auto_decided: decision };
  for (const [k, v] of Object.entries(rates)) out[`${k}_tokens_per_s`] = Math.round(median(v));
  for (const name of ['copying', 'not_copying']) {
    for (const c of ['auto', 'on']) {
      out[`${name}_${c}_vs_off`] = +(median(rates[`${name}_${c}`]!) / median(rates[`${name}_off`]!)).toFixed(2);
      out[`${name}_${c}_drafted_accepted`] = counts[`${name}_${c}`] ?? { drafted: 0, accepted: 0 };
    }
  }
  return { out, copying, backends };
}

export async function speculativeBench({ modelPath }: { modelPath: string }): Promise<Record<string, unknown>> {
  const { out: demo, copying, backends } = await speeds(modelPath, TOKENS, ROUNDS);
  try {
    // Identity at temperature 0: free text, a JSON schema, a forced tool call (the unit test proves the same).
    const schema = { type: 'object', properties: { a: { type: 'string' }, b: { type: 'array', items: { type: 'integer' } } }, required: ['a', 'b'] };
    const cases: Record<string, GenerateRequest> = {
      free: copying,
      json_schema: { ...copying, format: { type: 'json_schema', name: 'x', schema, strict: true }, maxOutputTokens: 200 },
      forced_tool_call: {
        ...copying,
        tools: [{ name: 'f', parameters: { type: 'object', properties: { s: { type: 'string' } }, required: ['s'] } }],
        toolChoice: 'required',
        maxOutputTokens: 200,
      },
    };
    const identical: Record<string, unknown> = {};
    for (const [name, req] of Object.entries(cases)) {
      const a = await run(backends[0]!, req);
      const b = await run(backends[2]!, req);
      identical[name] = { same: a.text === b.text, drafted: b.r.speculative?.drafted ?? 0, accepted: b.r.speculative?.accepted ?? 0 };
    }
    demo.identical_at_temperature_0 = identical;
  } finally {
    for (const b of backends) await b.dispose();
  }
  // A model whose decode outweighs the per-token overhead: the batching bench's 86 MB shape.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tr-spec-'));
  const bigPath = path.join(dir, 'embd512x8.gguf');
  writeTestModel(bigPath, { seed: 3, embd: 512, layers: 8, contextLength: 4096 });
  try {
    const { out: big, backends: bigBackends } = await speeds(bigPath, BIG_TOKENS, BIG_ROUNDS);
    for (const b of bigBackends) await b.dispose();
    return {
      demo: { model: 'demo (embd 64, 2 layers, 0.5 MB), calibrated threads', ...demo },
      embd512x8: { model: 'embd 512, 8 layers (86 MB), calibrated threads', ...big },
    };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
