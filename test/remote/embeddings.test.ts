// Embeddings against llama.cpp's own server as the oracle (issue 41 item 1): the same GGUF, the same inputs, through
// the llama backend's embedding context and llama-server's /v1/embeddings (`--embeddings`), give vectors with cosine
// ≥ 0.9999, for a model whose file declares its pooling (mean, last) and for one that declares none (llama.cpp's
// default; llama-server is told `--pooling last`, which is what a model without pooling gives in node-llama-cpp); the
// prompt tokens agree, with the inputs of a call spread over two embedding lanes. (On the generated models mean and
// last pooling differ at cosine ~0.23: the bound discriminates.)
// Passed through: `serve --engine x=<llama-server> --engine-kind x=llama.cpp` answers /lmsp/v1/embeddings for
// `x/tiny` with llama-server's own vectors (|Δ| ≤ 1e-6 per element: normalized again on our side) and usage; a
// llama-server started without --embeddings is refused 400 unsupported_capability (its 501), not a 500.
// Run with: node scripts/remote-engine/run.mjs (builds llama-server on first use, then runs this suite).
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, describe, it } from 'node:test';
import { writeTestModel, type TestModelOptions } from '../../src/backends/llama/demoModel';
import { LlamaBackend } from '../../src/backends/llama/llamaBackend';
import { startLlamaServer } from '../fixtures/llamaServer';
import { startServe } from '../fixtures/serveProcess';

const INPUTS = [
  'hello',
  'The quick brown fox jumps over the lazy dog.',
  'Embeddings of a longer input: several sentences, punctuation, numbers 12345 and some more words to pool over.',
];

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

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tr-embed-oracle-'));
after(() => fs.rmSync(dir, { recursive: true, force: true }));

const cases: Array<{ name: string; pooling: TestModelOptions['poolingType']; serverArgs: string[] }> = [
  { name: 'mean pooling from the file', pooling: 'mean', serverArgs: [] },
  { name: 'last pooling from the file', pooling: 'last', serverArgs: [] },
  { name: 'no pooling in the file (last token)', pooling: undefined, serverArgs: ['--pooling', 'last'] },
];

for (const c of cases) {
  describe(`embeddings equal llama-server's: ${c.name}`, () => {
    it('cosine ≥ 0.9999 for each input, text and token arrays; same dimensions', async () => {
      const file = path.join(dir, `embed-${c.pooling ?? 'none'}.gguf`);
      writeTestModel(file, { seed: 3, embd: 128, layers: 2, ...(c.pooling ? { poolingType: c.pooling } : {}) });
      const server = await startLlamaServer({ model: file, ctx: 2048, extraArgs: ['--embeddings', ...c.serverArgs] });
      // Two threads: two embedding lanes (embedding.ts), so the inputs of one call run on different contexts at once.
      const backend = new LlamaBackend({ models: [{ id: 'm', source: file }], threads: 2, concurrency: 1 });
      try {
        const r = await fetch(`${server.base}/embeddings`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'tiny', input: INPUTS, encoding_format: 'float' }),
        });
        assert.equal(r.status, 200, await r.clone().text());
        const theirs = (await r.json()) as { data: Array<{ index: number; embedding: number[] }>; usage: { prompt_tokens: number } };
        const ours = await backend.embed('m', INPUTS, { signal: new AbortController().signal });
        assert.equal(ours.dimensions, theirs.data[0].embedding.length);
        // The same tokens evaluated (BOS/EOS as the model's file says): usage agrees.
        assert.equal(
          ours.tokens.reduce((a, b) => a + b, 0),
          theirs.usage.prompt_tokens,
        );
        for (const [i] of INPUTS.entries()) {
          const cos = cosine(Array.from(ours.vectors[i]), theirs.data.find((d) => d.index === i)!.embedding);
          assert.ok(cos >= 0.9999, `input ${i}: cosine ${cos}`);
        }
        // Token arrays: llama-server's tokenization of the text, given back as ids.
        const tok = await fetch(`${server.url}/tokenize`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ content: INPUTS[1], add_special: false }),
        });
        const ids = ((await tok.json()) as { tokens: number[] }).tokens;
        const byIds = await backend.embed('m', [ids], { signal: new AbortController().signal });
        const cos = cosine(Array.from(byIds.vectors[0]), Array.from(ours.vectors[1]));
        assert.ok(cos >= 0.9999, `token array: cosine ${cos}`);
      } finally {
        await backend.dispose();
        await server.kill();
      }
    });
  });
}

describe('embeddings passed through to a llama.cpp engine', () => {
  it("serve --engine answers llama-server's vectors and usage; an engine without --embeddings → 400 unsupported_capability", async () => {
    const file = path.join(dir, 'embed-remote.gguf');
    writeTestModel(file, { seed: 3, embd: 128, layers: 2, poolingType: 'mean' });
    const server = await startLlamaServer({ model: file, ctx: 2048, extraArgs: ['--embeddings'] });
    const plain = await startLlamaServer({ model: file, ctx: 2048 });
    const serve = await startServe([
      '--engine',
      `x=${server.base}`,
      '--engine',
      `p=${plain.base}`,
      '--engine-kind',
      'x=llama.cpp',
      '--engine-kind',
      'p=llama.cpp',
    ]);
    try {
      const direct = await fetch(`${server.base}/embeddings`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'tiny', input: INPUTS, encoding_format: 'float' }),
      });
      const theirs = (await direct.json()) as { data: Array<{ index: number; embedding: number[] }>; usage: { prompt_tokens: number } };
      const ours = await serve.lmspCall('POST', '/embeddings', { model: 'x/tiny', input: INPUTS, encoding_format: 'float' });
      assert.equal(ours.status, 200, JSON.stringify(ours.json));
      assert.equal(ours.json.model, 'x/tiny');
      assert.equal(ours.json.data.length, INPUTS.length);
      for (const [i] of INPUTS.entries()) {
        const a = ours.json.data[i].embedding as number[];
        const b = theirs.data.find((d) => d.index === i)!.embedding;
        assert.equal(a.length, b.length);
        const worst = Math.max(...a.map((v, k) => Math.abs(v - b[k])));
        assert.ok(worst <= 1e-6, `input ${i}: max |Δ| ${worst}`);
      }
      assert.equal(ours.json.usage.prompt_tokens, theirs.usage.prompt_tokens);
      const off = await serve.lmspCall('POST', '/embeddings', { model: 'p/tiny', input: 'x' });
      assert.equal(off.status, 400, JSON.stringify(off.json));
      assert.equal(off.json.error.code, 'unsupported_capability');
    } finally {
      await serve.stop();
      await Promise.all([server.kill(), plain.kill()]);
    }
  });
});
