// The context pool on the demo model with real node-llama-cpp: sequences handed out empty on contexts of the
// model's size and thread count, taken back and reused, at most two idle contexts kept, everything freed on dispose.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Llama, LlamaModel } from 'node-llama-cpp' with { 'resolution-mode': 'import' };
import { OneSequenceContextPool, probeContext } from '../../../src/backends/llama/contextPool';
import { importNodeLlamaCpp } from '../../../src/backends/llama/nodeLlamaCpp';
import { testModelPath } from '../../fixtures/testModel';

describe('OneSequenceContextPool on the demo model', () => {
  let llama: Llama;
  let model: LlamaModel;
  before(async () => {
    const nlc = await importNodeLlamaCpp();
    llama = await nlc.getLlama({ gpu: false, build: 'never' });
    model = await llama.loadModel({ modelPath: testModelPath() });
  });
  after(async () => {
    await llama?.dispose();
  });

  /** Evaluates a few tokens on the sequence, so that it holds state. */
  async function use(sequence: Awaited<ReturnType<OneSequenceContextPool['acquire']>>): Promise<void> {
    let n = 0;
    for await (const token of sequence.evaluate(model.tokenize('hello world'), { temperature: 0, yieldEogToken: true })) {
      void token;
      if (++n >= 2) break;
    }
    assert.ok(sequence.contextTokens.length > 0);
  }

  it('hands out empty sequences of one-sequence contexts with the given size and threads', async () => {
    const pool = new OneSequenceContextPool(model, 256, 2);
    try {
      const a = await pool.acquire();
      const b = await pool.acquire();
      assert.notEqual(a.context, b.context, 'each generation has its own context');
      for (const s of [a, b]) {
        assert.equal(s.contextTokens.length, 0);
        assert.equal(s.context.contextSize, 256);
        assert.equal(s.context.idealThreads, 2);
        assert.equal(s.context.totalSequences, 1);
      }
      await pool.release(a);
      await pool.release(b);
    } finally {
      await pool.dispose();
    }
  });

  it('reuses a released context with a fresh sequence', async () => {
    const pool = new OneSequenceContextPool(model, 256, 1);
    try {
      const first = await pool.acquire();
      await use(first);
      const context = first.context;
      await pool.release(first);
      assert.equal(first.disposed, true);
      assert.equal(context.disposed, false);
      const second = await pool.acquire();
      assert.equal(second.context, context);
      assert.notEqual(second, first);
      assert.equal(second.contextTokens.length, 0, 'nothing of the last generation is left');
      await pool.release(second);
    } finally {
      await pool.dispose();
    }
  });

  it('keeps at most two idle contexts, freeing the rest', async () => {
    const pool = new OneSequenceContextPool(model, 256, 1);
    try {
      const held = [await pool.acquire(), await pool.acquire(), await pool.acquire()];
      const contexts = held.map((s) => s.context);
      for (const s of held) await pool.release(s);
      assert.deepEqual(
        contexts.map((c) => c.disposed),
        [false, false, true],
      );
      // The kept ones are handed out again, the last released first.
      assert.equal((await pool.acquire()).context, contexts[1]);
      assert.equal((await pool.acquire()).context, contexts[0]);
      assert.notEqual((await pool.acquire()).context, contexts[2]);
    } finally {
      await pool.dispose();
    }
  });

  it('dispose frees idle and busy contexts; a sequence released afterwards is freed too', async () => {
    const pool = new OneSequenceContextPool(model, 256, 1);
    const done = await pool.acquire();
    const busy = await pool.acquire();
    const idleContext = done.context;
    await pool.release(done);
    await pool.dispose();
    assert.equal(idleContext.disposed, true);
    assert.equal(busy.context.disposed, true);
    await pool.release(busy);
    assert.equal(busy.disposed, true);
  });

  it('a released sequence whose context was freed elsewhere is not kept', async () => {
    const pool = new OneSequenceContextPool(model, 256, 1);
    try {
      const s = await pool.acquire();
      const context = s.context;
      await context.dispose();
      await pool.release(s);
      assert.notEqual((await pool.acquire()).context, context);
    } finally {
      await pool.dispose();
    }
  });

  it('probeContext makes a context of the tasks size with a placeholder thread', async () => {
    const probe = await probeContext(model, 512);
    try {
      assert.equal(probe.contextSize, 512);
      assert.equal(probe.idealThreads, 1);
      assert.equal(probe.totalSequences, 1);
    } finally {
      await probe.dispose();
    }
  });
});
