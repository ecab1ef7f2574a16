// Embeddings on the real tiny demo model (issue 41 item 1): one embedding context per loaded model, made on first use
// and freed with the model; vectors of the model's size, L2-normalized, the same for the same input whatever else is
// in the batch and in whatever order; token-array inputs; refusals (too long, a token id outside
// the vocabulary) before anything is evaluated. The runtime's part: unknown models, backends without embeddings,
// each principal's calls in flight. The lanes (several embedding contexts evaluating at once): the plan, inputs of a
// call started on free lanes together, a long input kept for the full lane, queued inputs of an aborted call dropped,
// and the vectors of a call spread over lanes equal to one lane's, one input at a time.
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { CompositeBackend } from '../../../../src/backends/composite';
import type { LlamaModel } from 'node-llama-cpp' with { 'resolution-mode': 'import' };
import { EMBEDDING_LANES_MAX, EmbeddingLanes, lanePlan, SHORT_LANE_TOKENS } from '../../../../src/backends/llama/embedding';
import { LlamaBackend } from '../../../../src/backends/llama/llamaBackend';
import { importNodeLlamaCpp } from '../../../../src/backends/llama/nodeLlamaCpp';
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

describe('embedding lanes', () => {
  const cosine = (a: Float32Array, b: Float32Array) => a.reduce((s, x, i) => s + x * b[i], 0);
  // ~700 tokens: only the full lane (lane 0) takes it.
  const long = Array.from({ length: 45 }, (_, i) => `word${i} and more`).join(' ');

  it('plans one lane per thread up to the maximum, the threads split, the first lane full and the others short', () => {
    assert.deepEqual(lanePlan(2048, 1), [{ size: 2048, threads: 1 }]);
    assert.deepEqual(lanePlan(2048, 2), [
      { size: 2048, threads: 1 },
      { size: SHORT_LANE_TOKENS, threads: 1 },
    ]);
    const seven = lanePlan(8192, 7);
    assert.equal(seven.length, EMBEDDING_LANES_MAX);
    assert.deepEqual(
      seven.map((l) => l.threads),
      [2, 2, 2, 1],
    );
    assert.deepEqual(
      lanePlan(300, 16).map((l) => l.size),
      [300, 300, 300, 300],
    );
  });

  it("a call spread over 2 lanes gives the vectors and token counts of one lane's inputs one at a time", async () => {
    const one = new LlamaBackend({ models: [{ id: 'tiny', source: testModelPath() }], threads: 1, concurrency: 1 });
    const two = new LlamaBackend({ models: [{ id: 'tiny', source: testModelPath() }], threads: 2, concurrency: 1 });
    try {
      const inputs = [long, ...Array.from({ length: 11 }, (_, i) => `input number ${i}: ${'some words '.repeat(i + 1)}`)];
      const spread = await two.embed('tiny', inputs, { signal: signal() });
      const alone: EmbedResult[] = [];
      for (const input of inputs) alone.push(await one.embed('tiny', [input], { signal: signal() }));
      assert.ok(spread.tokens[0] > SHORT_LANE_TOKENS, `the long input has ${spread.tokens[0]} tokens`);
      assert.deepEqual(
        spread.tokens,
        alone.map((r) => r.tokens[0]),
      );
      for (const [i, r] of alone.entries()) {
        const cos = cosine(spread.vectors[i], r.vectors[0]);
        assert.ok(cos >= 0.9999, `input ${i}: cosine ${cos}`);
      }
    } finally {
      await Promise.all([one.dispose(), two.dispose()]);
    }
  });

  describe('scheduling', () => {
    let model: LlamaModel;
    after(() => model?.dispose());
    const load = async () => {
      if (model) return model;
      const llama = await (await importNodeLlamaCpp()).getLlama({ gpu: false, build: 'never' });
      model = await llama.loadModel({ modelPath: testModelPath() });
      return model;
    };
    const length = (lanes: EmbeddingLanes, text: string) => lanes.main.calculateInputLength(text);

    it('starts inputs on free lanes at once and queues the rest; all of them end', async () => {
      const lanes = await EmbeddingLanes.make(await load(), 2048, 3);
      try {
        assert.equal(lanes.count, 3);
        const texts = ['a', 'b c', 'd e f', 'g', 'h i'];
        const pending = texts.map((t) => lanes.embed(t, length(lanes, t), signal()));
        assert.equal(lanes.running, 3);
        assert.equal(lanes.queued, 2);
        const vectors = await Promise.all(pending);
        assert.equal(vectors.length, 5);
        assert.equal(lanes.running, 0);
        assert.equal(lanes.queued, 0);
      } finally {
        await lanes.dispose();
      }
    });

    it('a long input waits for the full lane while a short one behind it takes a short lane', async () => {
      const lanes = await EmbeddingLanes.make(await load(), 2048, 2);
      try {
        const first = lanes.embed(long, length(lanes, long), signal());
        const second = lanes.embed(long, length(lanes, long), signal());
        assert.equal(lanes.running, 1);
        assert.equal(lanes.queued, 1);
        const short = lanes.embed('short', length(lanes, 'short'), signal());
        assert.equal(lanes.running, 2);
        assert.equal(lanes.queued, 1);
        const [a, b] = await Promise.all([first, second, short]);
        assert.deepEqual(Array.from(a), Array.from(b));
        // An input longer than every lane is refused, not queued for ever.
        await assert.rejects(lanes.embed('x', 2048, signal()), RangeError);
        assert.equal(lanes.queued, 0);
      } finally {
        await lanes.dispose();
      }
    });

    it("an aborted call's queued inputs are dropped; the one running and other calls' inputs end", async () => {
      const lanes = await EmbeddingLanes.make(await load(), 2048, 1);
      try {
        const ac = new AbortController();
        const running = lanes.embed('one', length(lanes, 'one'), ac.signal);
        const queued = [lanes.embed('two', length(lanes, 'two'), ac.signal), lanes.embed('three', length(lanes, 'three'), ac.signal)];
        const other = lanes.embed('four', length(lanes, 'four'), signal());
        assert.equal(lanes.queued, 3);
        ac.abort();
        lanes.dropAborted();
        assert.equal(lanes.queued, 1);
        for (const q of queued) await assert.rejects(q, { name: 'AbortError' });
        assert.ok((await running).length > 0);
        assert.ok((await other).length > 0);
      } finally {
        await lanes.dispose();
      }
    });
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

  it('other dimensions than the listed size are refused before the backend embeds; each call is told to the observer', async () => {
    let embedded = 0;
    const told: unknown[] = [];
    const sized: ModelBackend = {
      ...noEmbeddings,
      listModels: () => [{ id: 'r/x', source: 'x', state: 'unloaded', maxContextLength: null, demo: false, embeddingDimensions: 2 }],
      embed: async (_m, inputs) => {
        embedded++;
        return { vectors: inputs.map(() => new Float32Array([0.6, 0.8])), tokens: inputs.map(() => 3), dimensions: 2 };
      },
    };
    const calls = new EmbeddingCalls(sized, 4, (model, outcome) => told.push([model, outcome]));
    await assert.rejects(calls.embed({ principal: 'a', model: 'r/x', inputs: ['x'], dimensions: 3, signal: signal() }), (e: unknown) => {
      assert.ok(e instanceof RuntimeError);
      assert.equal(e.code, 'unsupported_capability');
      assert.equal(e.param, 'dimensions');
      return true;
    });
    assert.equal(embedded, 0);
    const r = await calls.embed({ principal: 'a', model: 'r/x', inputs: ['x', 'y'], dimensions: 2, signal: signal() });
    assert.equal(r.dimensions, 2);
    assert.equal(embedded, 1);
    // An unknown model is not the server's: not counted (its name is the client's text).
    await assert.rejects(calls.embed({ principal: 'a', model: 'nope', inputs: ['x'], signal: signal() }));
    assert.deepEqual(told, [
      ['r/x', 'failed'],
      ['r/x', { inputs: 2, tokens: 6 }],
    ]);
  });

  it('prepare() lists the embedding size from the file header before any load', async () => {
    const b = new LlamaBackend({ models: [{ id: 'tiny', source: testModelPath() }], threads: 1, concurrency: 1 });
    try {
      assert.equal(b.listModels()[0].embeddingDimensions, undefined);
      await b.prepare();
      assert.equal(b.isLoaded('tiny'), false);
      const listed = b.listModels()[0].embeddingDimensions;
      assert.ok(listed !== undefined && listed > 0);
      const r = await b.embed('tiny', ['x'], { signal: signal() });
      assert.equal(r.dimensions, listed);
    } finally {
      await b.dispose();
    }
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
