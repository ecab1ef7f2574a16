// The node-llama-cpp internals this build relies on (nativeSeams.ts) are all there in the installed version: an
// upgrade that renames one fails here, instead of silently turning off the batching fix, the thread split, the
// sampling-race guard or resume inside a grammar. And a missing one is reported by name, never ignored.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Llama, LlamaModel } from 'node-llama-cpp' with { 'resolution-mode': 'import' };
import { BatchedContextPool } from '../../../../src/backends/llama/contextPool';
import { describeMissingSeams, missingSeams, NATIVE_SEAMS, type NativeSeam } from '../../../../src/backends/llama/nativeSeams';
import { importNodeLlamaCpp } from '../../../../src/backends/llama/nodeLlamaCpp';
import { testModelPath } from '../../../fixtures/testModel';

describe('node-llama-cpp internals (nativeSeams.ts)', () => {
  let llama: Llama;
  let model: LlamaModel;
  before(async () => {
    const nlc = await importNodeLlamaCpp();
    llama = await nlc.getLlama({ gpu: false, build: 'never' });
    model = await llama.loadModel({ modelPath: testModelPath() });
  });
  after(async () => {
    await model?.dispose();
    await llama?.dispose();
  });

  it('every seam is present in the installed node-llama-cpp (context, sequence, grammar state)', async () => {
    const nlc = await importNodeLlamaCpp();
    const context = await model.createContext({ contextSize: 256, sequences: 2, threads: 1 });
    try {
      const sequence = context.getSequence();
      const grammar = await llama.createGrammar({ grammar: 'root ::= "a"' });
      const state = new nlc.LlamaGrammarEvaluationState({ model, grammar });
      assert.deepEqual(missingSeams(context, sequence, state), []);
      // The thread consumer exists only while decoding: the one the splitter makes has the field batchStrategy sets.
      const splitter = (
        context as unknown as {
          _llama: { _threadsSplitter: { createConsumer(a: number, b: number): { _wantedThreads?: unknown; dispose(): void } } };
        }
      )._llama._threadsSplitter;
      const consumer = splitter.createConsumer(1, 1);
      try {
        assert.equal(typeof consumer._wantedThreads, 'number');
      } finally {
        consumer.dispose();
      }
    } finally {
      await context.dispose();
    }
  });

  it('a pool made on it reports none missing', async () => {
    const pool = await BatchedContextPool.create(model, { contextSize: 256, threads: 1, promptThreads: 2, sequences: 2 });
    try {
      assert.deepEqual(pool.missingSeams, []);
    } finally {
      await pool.dispose();
    }
  });

  it('an object without the internals is reported seam by seam, with what each one serves', () => {
    const fake = {} as never;
    const missing = missingSeams(fake, fake, fake);
    const all = Object.keys(NATIVE_SEAMS) as NativeSeam[];
    // The grammar sampler is only looked for once the state itself is there.
    assert.deepEqual(
      missing,
      all.filter((s) => s !== 'grammarState._llama._bindings.AddonSampler'),
    );
    const line = describeMissingSeams(missing);
    for (const s of missing) assert.ok(line.includes(s) && line.includes(NATIVE_SEAMS[s]), s);
    assert.equal(describeMissingSeams([]), '');
  });
});
