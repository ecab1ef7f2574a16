// Reranking against llama.cpp's own server as the oracle (issue 41 item 1): the same generated reranker (a tiny
// Qwen3-architecture model with a two-label rank head, demoModel.ts), the same query and documents, through the llama
// backend's ranking context and llama-server's /v1/rerank (`--reranking`), give the same scores (|Δ| ≤ 1e-5, measured
// ≤ 1.1e-7: both are the head's softmax P("yes"), and ours tokenizes query and documents as llama-server does), the
// same order and the same prompt tokens. Scores of this model spread over ~0.15 … 0.25, so the bound discriminates.
// Passed through: `serve --engine r=<llama-server --reranking> --engine-kind r=llama.cpp` answers /lmsp/v1/rerank
// for `r/tiny` with llama-server's own scores, order and usage; an engine kind without a rerank route (Ollama) is
// refused 400 unsupported_capability param model before anything is sent.
// Run with: node scripts/remote-engine/run.mjs (builds llama-server on first use, then runs this suite).
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, describe, it } from 'node:test';
import { writeTestModel } from '../../src/backends/llama/demoModel';
import { LlamaBackend } from '../../src/backends/llama/llamaBackend';
import { startLlamaServer } from '../fixtures/llamaServer';
import { startServe } from '../fixtures/serveProcess';

const QUERY = 'hello runtime';
const DOCUMENTS = [
  'hello world',
  'the task runtime',
  'data and time',
  'x',
  'A longer document: several sentences, punctuation, numbers 12345 and some more words to rank.',
  'stream the local model tokens',
];

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tr-rerank-oracle-'));
after(() => fs.rmSync(dir, { recursive: true, force: true }));

describe("rerank equals llama-server's", () => {
  it('same scores (|Δ| ≤ 1e-5), same order, same prompt tokens', async () => {
    const file = path.join(dir, 'reranker.gguf');
    writeTestModel(file, { seed: 3, embd: 128, layers: 2, poolingType: 'rank' });
    const server = await startLlamaServer({ model: file, ctx: 2048, extraArgs: ['--reranking'] });
    const backend = new LlamaBackend({ models: [{ id: 'm', source: file }], threads: 1, concurrency: 1 });
    try {
      const r = await fetch(`${server.base}/rerank`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'tiny', query: QUERY, documents: DOCUMENTS }),
      });
      assert.equal(r.status, 200, await r.clone().text());
      const theirs = (await r.json()) as { results: Array<{ index: number; relevance_score: number }>; usage: { prompt_tokens: number } };
      const ours = await backend.rerank('m', QUERY, DOCUMENTS, { signal: new AbortController().signal });
      assert.equal(theirs.results.length, DOCUMENTS.length);
      for (const t of theirs.results) {
        const delta = Math.abs(ours.scores[t.index] - t.relevance_score);
        assert.ok(delta <= 1e-5, `document ${t.index}: ours ${ours.scores[t.index]}, llama-server ${t.relevance_score}`);
      }
      const ourOrder = ours.scores.map((s, i) => ({ s, i })).sort((a, b) => b.s - a.s);
      assert.deepEqual(
        ourOrder.map((x) => x.i),
        theirs.results.map((x) => x.index),
      );
      // Adjacent scores are further apart than the bound, so the order is a real check.
      for (let k = 1; k < ourOrder.length; k++) assert.ok(ourOrder[k - 1].s - ourOrder[k].s > 2e-4, JSON.stringify(ourOrder));
      assert.equal(
        ours.tokens.reduce((a, b) => a + b, 0),
        theirs.usage.prompt_tokens,
      );
    } finally {
      await backend.dispose();
      await server.kill();
    }
  });
});

describe('rerank passed through to a llama.cpp engine', () => {
  it("serve --engine answers llama-server's scores, order and usage; an Ollama engine → 400 unsupported_capability", async () => {
    const file = path.join(dir, 'reranker-remote.gguf');
    writeTestModel(file, { seed: 3, embd: 128, layers: 2, poolingType: 'rank' });
    const server = await startLlamaServer({ model: file, ctx: 2048, extraArgs: ['--reranking'] });
    const serve = await startServe([
      '--engine',
      `r=${server.base}`,
      '--engine',
      `o=${server.base}`,
      '--engine-kind',
      'r=llama.cpp',
      '--engine-kind',
      'o=ollama',
    ]);
    try {
      const direct = await fetch(`${server.base}/rerank`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'tiny', query: QUERY, documents: DOCUMENTS }),
      });
      const theirs = (await direct.json()) as { results: Array<{ index: number; relevance_score: number }>; usage: { prompt_tokens: number } };
      const ours = await serve.lmspCall('POST', '/rerank', { model: 'r/tiny', query: QUERY, documents: DOCUMENTS, top_n: 3 });
      assert.equal(ours.status, 200, JSON.stringify(ours.json));
      assert.equal(ours.json.model, 'r/tiny');
      assert.deepEqual(ours.json.results, theirs.results.slice(0, 3));
      assert.equal(ours.json.usage.prompt_tokens, theirs.usage.prompt_tokens);
      const ollama = await serve.lmspCall('POST', '/rerank', { model: 'o/tiny', query: QUERY, documents: DOCUMENTS });
      assert.equal(ollama.status, 400, JSON.stringify(ollama.json));
      assert.equal(ollama.json.error.code, 'unsupported_capability');
      assert.equal(ollama.json.error.param, 'model');
    } finally {
      await serve.stop();
      await server.kill();
    }
  });
});
