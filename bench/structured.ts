// Schema-constrained generation against free text on the same model, backend and thread count (issue #19 item 8):
// what the grammar costs per token. Free text runs a fixed length (end tokens suppressed); constrained runs end
// where their document ends, so both rates are total output tokens over total generation time, over the same seeds.
// The grammar is compiled once before timing (it is cached per model and schema). The llama.cpp server comparison
// of the issue needs a server build and is not part of this part.
// Run directly: node out/bench/structured.js [threads=2] [seeds=8]

import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { LlamaBackend } from '../src/backends/llama/llamaBackend';
import { writeTestModel } from '../src/backends/llama/demoModel';
import type { GenerateRequest, OutputFormat } from '../src/runtime/backend';

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
      items: obj({ id: { type: 'integer' }, name: { type: 'string', minLength: 4, maxLength: 12 }, kind: { enum: ['a', 'b', 'c'] }, score: { type: ['number', 'null'] } }),
    },
  }),
};

export async function structuredBench(opts: { modelPath: string; threads?: number; seeds?: number }): Promise<Record<string, unknown>> {
  const threads = opts.threads ?? 2;
  const seeds = Array.from({ length: opts.seeds ?? 8 }, (_, i) => i + 1);
  const backend = new LlamaBackend({ models: [{ source: opts.modelPath }], threads, suppressEndOfGeneration: true });
  try {
    const id = backend.resolveModel(undefined)!;
    await backend.load(id);
    const base: GenerateRequest = { model: id, messages: [{ role: 'user', content: 'List records as JSON.' }], temperature: 0.8 };
    const run = async (req: GenerateRequest) => {
      const started = performance.now();
      const r = await backend.generate(req, { signal: new AbortController().signal, onText: () => undefined });
      return { tokens: r.outputTokens, ms: performance.now() - started };
    };
    const compileStarted = performance.now();
    await run({ ...base, format: FORMAT, seed: 1000, maxOutputTokens: 4 });
    const firstUseMs = performance.now() - compileStarted;
    const sum = (xs: Array<{ tokens: number; ms: number }>) => xs.reduce((a, b) => ({ tokens: a.tokens + b.tokens, ms: a.ms + b.ms }), { tokens: 0, ms: 0 });
    const constrained: Array<{ tokens: number; ms: number }> = [];
    for (const seed of seeds) constrained.push(await run({ ...base, format: FORMAT, seed, maxOutputTokens: 1500 }));
    const c = sum(constrained);
    // Free text of the same lengths, same seeds.
    const free: Array<{ tokens: number; ms: number }> = [];
    for (const [i, seed] of seeds.entries()) free.push(await run({ ...base, seed, maxOutputTokens: Math.max(1, constrained[i]!.tokens) }));
    const f = sum(free);
    const constrainedRate = (c.tokens / c.ms) * 1000;
    const freeRate = (f.tokens / f.ms) * 1000;
    return {
      threads,
      generations: seeds.length,
      tokens: c.tokens,
      free_tokens_per_s: Math.round(freeRate),
      constrained_tokens_per_s: Math.round(constrainedRate),
      constrained_over_free: Number((constrainedRate / freeRate).toFixed(3)),
      grammar_first_use_ms: Math.round(firstUseMs),
    };
  } finally {
    await backend.dispose();
  }
}

if (require.main === module) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'task-runtime-bench-'));
  const modelPath = path.join(dir, 'tiny.gguf');
  writeTestModel(modelPath, { seed: 1 });
  structuredBench({ modelPath, threads: Number(process.argv[2] ?? 2), seeds: Number(process.argv[3] ?? 8) })
    .then((r) => console.log(JSON.stringify(r, null, 2)))
    .catch((err: unknown) => {
      console.error(err);
      process.exitCode = 1;
    })
    .finally(() => fs.rmSync(dir, { recursive: true, force: true }));
}
