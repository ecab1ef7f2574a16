// Model entries: ids (given or derived from the source), resolution, listing, and the load state each entry keeps
// (one shared load, error then retry, unload). The loads here are plain functions: loading through node-llama-cpp
// is llamaBackend.test.ts's.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { defaultModelId, ModelEntries, type LoadedModelInfo } from '../../../../src/backends/llama/modelEntries';
import type { ModelHardware } from '../../../../src/runtime/backend';

const hardware: ModelHardware = { compute: 'cpu', devices: [], gpuLayers: 0, totalLayers: 2, threads: 1, threadsFrom: 'setting' };
const loadedInfo = (trainContextSize: number): LoadedModelInfo => ({ hardware, trainContextSize, contextSize: trainContextSize, concurrency: 1 });

/** A load that ends when told to. */
function pendingLoad() {
  let resolve!: (v: LoadedModelInfo) => void;
  let reject!: (e: Error) => void;
  const promise = new Promise<LoadedModelInfo>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

describe('defaultModelId', () => {
  it('is a file name without .gguf', () => {
    assert.equal(defaultModelId('/models/qwen2.5-0.5b.Q4_K_M.gguf'), 'qwen2.5-0.5b.Q4_K_M');
    assert.equal(defaultModelId('relative/Tiny.GGUF'), 'Tiny');
    assert.equal(defaultModelId('model.bin'), 'model.bin');
  });

  it('is what follows the scheme of a URI, with other characters as dashes', () => {
    assert.equal(defaultModelId('hf:owner/repo:Q4_K_M'), 'owner-repo-Q4_K_M');
    assert.equal(defaultModelId('https://example.com/m/x.gguf'), '-example.com-m-x.gguf');
  });
});

describe('ModelEntries', () => {
  it('takes given ids, derives the others, and refuses a duplicate', () => {
    const entries = new ModelEntries([
      { source: '/m/a.gguf', demo: true },
      { id: 'b', source: '/m/x.gguf' },
    ]);
    assert.deepEqual(
      entries.all.map((e) => [e.id, e.source, e.demo, e.state]),
      [
        ['a', '/m/a.gguf', true, 'unloaded'],
        ['b', '/m/x.gguf', false, 'unloaded'],
      ],
    );
    assert.throws(() => new ModelEntries([{ source: '/m/a.gguf' }, { source: '/other/a.gguf' }]), /duplicate model id "a"/);
    assert.throws(() => new ModelEntries([{ id: 'x', source: '/m/a.gguf' }, { source: '/m/x.gguf' }]), /duplicate model id "x"/);
  });

  it('resolves a request to its model, the first one when none is named', () => {
    const entries = new ModelEntries([{ source: '/m/a.gguf' }, { source: '/m/b.gguf' }]);
    assert.equal(entries.resolve(undefined), 'a');
    assert.equal(entries.resolve(''), 'a');
    assert.equal(entries.resolve('b'), 'b');
    assert.equal(entries.resolve('c'), undefined);
    assert.equal(entries.get('b')?.source, '/m/b.gguf');
    assert.equal(new ModelEntries([]).resolve(undefined), undefined);
  });

  it('shares one load between callers, then lists the model as loaded with its hardware', async () => {
    const entries = new ModelEntries<LoadedModelInfo>([{ source: '/m/a.gguf' }]);
    const load = pendingLoad();
    let starts = 0;
    const start = () => {
      starts++;
      return load.promise;
    };
    const p1 = entries.load('a', start);
    const p2 = entries.load('a', start);
    assert.equal(p1, p2);
    assert.equal(starts, 1);
    assert.deepEqual(entries.list(), [{ id: 'a', source: '/m/a.gguf', state: 'loading', maxContextLength: null, contextLength: null, demo: false }]);
    load.resolve(loadedInfo(2048));
    await p1;
    assert.deepEqual(entries.list(), [
      { id: 'a', source: '/m/a.gguf', state: 'loaded', maxContextLength: 2048, contextLength: 2048, demo: false, concurrency: 1, hardware },
    ]);
    await entries.load('a', start);
    assert.equal(starts, 1, 'a loaded model is not loaded again');
  });

  it('a failed load leaves the model in error, and the next load tries again', async () => {
    const entries = new ModelEntries<LoadedModelInfo>([{ source: '/m/a.gguf' }]);
    await assert.rejects(
      entries.load('a', () => Promise.reject(new Error('no memory'))),
      /no memory/,
    );
    assert.equal(entries.get('a')?.state, 'error');
    assert.equal(entries.list()[0]!.hardware, undefined);
    await entries.load('a', () => Promise.resolve(loadedInfo(512)));
    assert.equal(entries.get('a')?.state, 'loaded');
  });

  it('rejects an unknown model', async () => {
    const entries = new ModelEntries<LoadedModelInfo>([{ source: '/m/a.gguf' }]);
    await assert.rejects(
      entries.load('nope', () => assert.fail('not started')),
      /unknown model "nope"/,
    );
  });

  it('unloadAll waits for loads under way and hands back what was loaded', async () => {
    const entries = new ModelEntries<LoadedModelInfo>([{ source: '/m/a.gguf' }, { source: '/m/b.gguf' }, { source: '/m/c.gguf' }]);
    await entries.load('a', () => Promise.resolve(loadedInfo(1)));
    const b = pendingLoad();
    const loadingB = entries.load('b', () => b.promise);
    const unloading = entries.unloadAll();
    const bLoaded = loadedInfo(2);
    b.resolve(bLoaded);
    await loadingB;
    const freed = await unloading;
    assert.deepEqual(
      freed.map((l) => l.trainContextSize),
      [1, 2],
    );
    assert.equal(freed[1], bLoaded);
    assert.deepEqual(
      entries.list().map((m) => [m.id, m.state, m.hardware]),
      [
        ['a', 'unloaded', undefined],
        ['b', 'unloaded', undefined],
        ['c', 'unloaded', undefined],
      ],
    );
  });
});

describe('ModelEntries.unload', () => {
  it('hands back a loaded model and lists it unloaded; anything else is left alone', async () => {
    const entries = new ModelEntries<LoadedModelInfo>([{ id: 'a', source: '/m/a.gguf' }]);
    assert.equal(entries.unload('a'), undefined, 'not loaded');
    const info = loadedInfo(2048);
    await entries.load('a', async () => info);
    assert.equal(entries.unload('a'), info);
    assert.equal(entries.get('a')!.state, 'unloaded');
    assert.equal(entries.list()[0]!.concurrency, undefined);
    assert.equal(entries.unload('a'), undefined, 'already unloaded');
    assert.equal(entries.unload('nope'), undefined);
  });
});
