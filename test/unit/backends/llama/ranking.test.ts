// Reranking on a real generated reranker (issue 41 item 1; the tiny Qwen3-architecture model with a rank head from
// demoModel.ts): one score per document in 0 … 1, in the documents' order, the same alone as in a batch, token
// counts per pair; a pair too long for the context refused with its param before anything runs; a chat model (no rank
// head) refused unsupported_capability param model; an aborted call. The runtime's part: a backend without rerank,
// and rerank calls counted with embeddings calls in flight.
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { CompositeBackend } from '../../../../src/backends/composite';
import { LlamaBackend } from '../../../../src/backends/llama/llamaBackend';
import { RequestRefusedError, type ModelBackend } from '../../../../src/runtime/backend';
import { EmbeddingCalls } from '../../../../src/runtime/embeddings';
import { RuntimeError } from '../../../../src/runtime/errors';
import { testModelPath, testRerankerPath } from '../../../fixtures/testModel';

const signal = () => new AbortController().signal;

describe('LlamaBackend.rerank', () => {
  const backend = new LlamaBackend({
    models: [
      { id: 'reranker', source: testRerankerPath() },
      { id: 'tiny', source: testModelPath() },
    ],
    threads: 1,
    concurrency: 1,
  });
  after(() => backend.dispose());

  it('scores each document in 0 … 1 in the documents order, the same alone and in a batch, with token counts', async () => {
    const documents = ['hello world', 'the task runtime', 'data and time', 'x'];
    const r = await backend.rerank('reranker', 'hello', documents, { signal: signal() });
    assert.equal(r.scores.length, 4);
    for (const s of r.scores) assert.ok(s > 0 && s < 1, String(s));
    assert.equal(new Set(r.scores).size, 4, 'random weights give distinct scores');
    // BOS query EOS document EOS: each pair is longer than its document alone.
    assert.equal(r.tokens.length, 4);
    assert.ok(r.tokens.every((t, i) => t > documents[i].length));
    assert.ok(r.tokens[1] > r.tokens[3]);
    const alone = await backend.rerank('reranker', 'hello', ['data and time'], { signal: signal() });
    assert.equal(alone.scores[0], r.scores[2]);
    assert.equal(alone.tokens[0], r.tokens[2]);
    const reversed = await backend.rerank('reranker', 'hello', [...documents].reverse(), { signal: signal() });
    assert.deepEqual([...reversed.scores].reverse(), r.scores);
    // Another query scores otherwise.
    const other = await backend.rerank('reranker', 'runtime data', documents, { signal: signal() });
    assert.notDeepEqual(other.scores, r.scores);
  });

  it('refuses a pair longer than the ranking context, naming the document, before ranking', async () => {
    await assert.rejects(backend.rerank('reranker', 'q', ['short', 'word '.repeat(3000)], { signal: signal() }), (e: unknown) => {
      assert.ok(e instanceof RequestRefusedError);
      assert.equal(e.code, 'context_length_exceeded');
      assert.equal(e.param, 'documents.1');
      return true;
    });
  });

  it('a model without a rank head → unsupported_capability, param model; known once loaded', async () => {
    await assert.rejects(backend.rerank('tiny', 'q', ['d'], { signal: signal() }), (e: unknown) => {
      assert.ok(e instanceof RequestRefusedError);
      assert.equal(e.code, 'unsupported_capability');
      assert.equal(e.param, 'model');
      return true;
    });
    assert.equal(backend.supportsRerank('tiny'), false);
    assert.equal(backend.supportsRerank('reranker'), true);
  });

  it('an aborted call rejects without ranking', async () => {
    const ac = new AbortController();
    ac.abort();
    await assert.rejects(backend.rerank('reranker', 'q', ['d'], { signal: ac.signal }), { name: 'AbortError' });
  });
});

/** A backend that neither embeds nor ranks. */
const plain: ModelBackend = {
  name: 'none',
  supportsResume: () => false,
  listModels: () => [],
  resolveModel: (m) => (m === 'r/x' || m === undefined ? 'r/x' : undefined),
  isLoaded: () => true,
  load: async () => {},
  generate: () => Promise.reject(new Error('not here')),
  dispose: async () => {},
};

describe('EmbeddingCalls.rerank (runtime)', () => {
  it('unknown model → model_not_found; a backend without rerank → unsupported_capability, param model', async () => {
    const calls = new EmbeddingCalls(plain);
    const call = (model: string, c = calls) => c.rerank({ principal: 'a', model, query: 'q', documents: ['d'], signal: signal() });
    await assert.rejects(call('nope'), { code: 'model_not_found' });
    await assert.rejects(call('r/x'), (e: unknown) => {
      assert.ok(e instanceof RuntimeError);
      assert.equal(e.code, 'unsupported_capability');
      assert.equal(e.param, 'model');
      return true;
    });
    const composite = new CompositeBackend([plain]);
    assert.equal(composite.supportsRerank('r/x'), false);
    await assert.rejects(call('r/x', new EmbeddingCalls(composite)), { code: 'unsupported_capability', param: 'model' });
  });

  it('a backend refusal becomes a RuntimeError with its param; rerank and embed calls share the cap', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const backend: ModelBackend = {
      ...plain,
      embed: async (_m, inputs) => {
        await gate;
        return { vectors: inputs.map(() => new Float32Array([1])), tokens: inputs.map(() => 1), dimensions: 1 };
      },
      rerank: async (_m, _q, documents) => {
        if (documents[0] === 'too long') throw new RequestRefusedError('context_length_exceeded', 'too long', 'documents.0');
        await gate;
        return { scores: documents.map(() => 0.5), tokens: documents.map(() => 3) };
      },
    };
    const calls = new EmbeddingCalls(backend, 2);
    await assert.rejects(calls.rerank({ principal: 'a', model: 'r/x', query: 'q', documents: ['too long'], signal: signal() }), (e: unknown) => {
      assert.ok(e instanceof RuntimeError);
      assert.equal(e.code, 'context_length_exceeded');
      assert.equal(e.param, 'documents.0');
      return true;
    });
    const held = [
      calls.embed({ principal: 'a', model: undefined, inputs: ['x'], signal: signal() }),
      calls.rerank({ principal: 'a', model: undefined, query: 'q', documents: ['d'], signal: signal() }),
    ];
    await assert.rejects(calls.rerank({ principal: 'a', model: undefined, query: 'q', documents: ['d'], signal: signal() }), (e: unknown) => {
      assert.ok(e instanceof RuntimeError);
      assert.equal(e.code, 'limit_exceeded');
      assert.equal(e.limit?.name, 'max_embedding_calls_per_principal');
      return true;
    });
    release();
    await Promise.all(held);
    const after = await calls.rerank({ principal: 'a', model: undefined, query: 'q', documents: ['d', 'e'], signal: signal() });
    assert.deepEqual(after, { model: 'r/x', scores: [0.5, 0.5], tokens: [3, 3] });
  });
});
