// Embeddings on the real tiny demo model (issue 41 item 1): one embedding context per loaded model, made on first use
// and freed with the model; vectors of the model's size, L2-normalized, the same for the same input whatever else is
// in the batch and in whatever order; token-array inputs; refusals (too long, a token id outside
// the vocabulary) before anything is evaluated. The runtime's part: unknown models, backends without embeddings,
// each principal's calls in flight.
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { CompositeBackend } from '../../../../src/backends/composite';
import { LlamaBackend } from '../../../../src/backends/llama/llamaBackend';
import { RequestRefusedError, type EmbedResult, type ModelBackend } from '../../../../src/runtime/backend';
import { EmbeddingCalls } from '../../../../src/runtime/embeddings';
import { RuntimeError } from '../../../../src/runtime/errors';
import { testModelPath } from '../../../fixtures/testModel';

const signal = () => new AbortController().signal;
const norm = (v: Float32Array) => Math.sqrt(v.reduce((a, x) => a + x * x, 0));

describe('LlamaBackend.embed', () => {
  const backend = new LlamaBackend({ models: [{ id: 'tiny', source: testModelPath() }], threads: 1, concurrency: 1 });
  after(() => backend.dispose());

  it('loads the model, gives one normalized vector of the model size per input, with token counts', async () => {
    const r = await backend.embed('tiny', ['hello world', 'a second, longer input to embed'], { signal: signal() });
    assert.equal(r.vectors.length, 2);
    assert.ok(r.dimensions > 0);
    for (const v of r.vectors) {
      assert.equal(v.length, r.dimensions);
      assert.ok(Math.abs(norm(v) - 1) < 1e-5, `norm ${norm(v)}`);
      assert.ok(v.every(Number.isFinite));
    }
    assert.equal(r.tokens.length, 2);
    assert.ok(r.tokens[0] > 0 && r.tokens[1] > r.tokens[0], JSON.stringify(r.tokens));
    assert.notDeepEqual(Array.from(r.vectors[0]), Array.from(r.vectors[1]));
    assert.equal(backend.isLoaded('tiny'), true);
  });

  it('the same input gives the same vector alone, in a batch and in another order', async () => {
    const alone = (await backend.embed('tiny', ['alpha'], { signal: signal() })).vectors[0];
    const batch = await backend.embed('tiny', ['beta', 'alpha', 'gamma'], { signal: signal() });
    const reversed = await backend.embed('tiny', ['gamma', 'alpha', 'beta'], { signal: signal() });
    assert.deepEqual(Array.from(batch.vectors[1]), Array.from(alone));
    assert.deepEqual(Array.from(reversed.vectors[0]), Array.from(batch.vectors[2]));
    assert.deepEqual(Array.from(reversed.vectors[2]), Array.from(batch.vectors[0]));
  });

  it('a token array is embedded (BOS/EOS counted) and left unchanged', async () => {
    const ids: EmbedResult = await backend.embed('tiny', ['tokens and text'], { signal: signal() });
    const tokenIds = Array.from({ length: 5 }, (_, i) => 10 + i);
    const copy = [...tokenIds];
    const r = await backend.embed('tiny', [tokenIds], { signal: signal() });
    assert.deepEqual(tokenIds, copy);
    assert.equal(r.vectors[0].length, ids.dimensions);
    assert.ok(r.tokens[0] >= tokenIds.length);
  });

  it('refuses an input longer than the embedding context, naming it', async () => {
    const long = Array.from({ length: 9000 }, () => 20);
    await assert.rejects(backend.embed('tiny', ['short', long], { signal: signal() }), (e: unknown) => {
      assert.ok(e instanceof RequestRefusedError);
      assert.equal(e.code, 'context_length_exceeded');
      assert.equal(e.param, 'input.1');
      return true;
    });
  });

  it('refuses a token id outside the vocabulary', async () => {
    await assert.rejects(backend.embed('tiny', [[1, 2, 10_000_000]], { signal: signal() }), (e: unknown) => {
      assert.ok(e instanceof RequestRefusedError);
      assert.equal(e.code, 'invalid_request');
      assert.equal(e.param, 'input');
      return true;
    });
  });

  it('an aborted call rejects without embedding', async () => {
    const ac = new AbortController();
    ac.abort();
    await assert.rejects(backend.embed('tiny', ['x'], { signal: ac.signal }), { name: 'AbortError' });
  });
});

/** A backend that serves no embeddings (a remote engine today). */
const noEmbeddings: ModelBackend = {
  name: 'none',
  supportsResume: () => false,
  listModels: () => [],
  resolveModel: (m) => (m === 'r/x' || m === undefined ? 'r/x' : undefined),
  isLoaded: () => true,
  load: async () => {},
  generate: () => Promise.reject(new Error('not here')),
  dispose: async () => {},
};

describe('EmbeddingCalls (runtime)', () => {
  it('unknown model → model_not_found; a backend without embed → unsupported_capability, param model', async () => {
    const calls = new EmbeddingCalls(noEmbeddings);
    await assert.rejects(calls.embed({ principal: 'a', model: 'nope', inputs: ['x'], signal: signal() }), (e: unknown) => {
      assert.ok(e instanceof RuntimeError);
      assert.equal(e.code, 'model_not_found');
      return true;
    });
    await assert.rejects(calls.embed({ principal: 'a', model: 'r/x', inputs: ['x'], signal: signal() }), (e: unknown) => {
      assert.ok(e instanceof RuntimeError);
      assert.equal(e.code, 'unsupported_capability');
      assert.equal(e.param, 'model');
      return true;
    });
    // Through the composite, a model of the backend without embed is refused the same way.
    const composite = new CompositeBackend([noEmbeddings]);
    assert.equal(composite.supportsEmbeddings('r/x'), false);
    await assert.rejects(new EmbeddingCalls(composite).embed({ principal: 'a', model: 'r/x', inputs: ['x'], signal: signal() }), {
      code: 'unsupported_capability',
    });
  });

  it('a principal at its calls in flight is refused limit_exceeded; another principal is not', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const slow: ModelBackend = {
      ...noEmbeddings,
      embed: async (_m, inputs) => {
        await gate;
        return { vectors: inputs.map(() => new Float32Array([1])), tokens: inputs.map(() => 1), dimensions: 1 };
      },
    };
    const calls = new EmbeddingCalls(slow, 2);
    const call = (principal: string) => calls.embed({ principal, model: undefined, inputs: ['x'], signal: signal() });
    const held = [call('a'), call('a')];
    await assert.rejects(call('a'), (e: unknown) => {
      assert.ok(e instanceof RuntimeError);
      assert.equal(e.code, 'limit_exceeded');
      assert.equal(e.limit?.name, 'max_embedding_calls_per_principal');
      assert.equal(e.limit?.unit, 'requests');
      return true;
    });
    const other = call('b');
    release();
    for (const r of await Promise.all([...held, other])) assert.equal(r.model, 'r/x');
    // Slots come back when calls end.
    assert.equal((await call('a')).vectors.length, 1);
  });
});
