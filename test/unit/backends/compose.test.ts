// composeBackend: the one rule set both roots use. A real LlamaBackend on the generated demo model, a fake
// OpenAI-compatible engine for the remote side, the conformance fixture backend as an extra member.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, describe, it } from 'node:test';
import { composeBackend, type ComposeOptions } from '../../../src/backends/compose';
import { CompositeBackend } from '../../../src/backends/composite';
import { DEMO_MODEL_FILE, writeTestModel } from '../../../src/backends/llama/demoModel';
import { LlamaBackend } from '../../../src/backends/llama/llamaBackend';
import { RemoteBackend } from '../../../src/backends/remote/remoteBackend';
import type { ModelBackend } from '../../../src/runtime/backend';
import { ConformanceFixtureBackend, FIXTURE_MODEL } from '../../fixtures/conformance/backend';
import { closedPort, startFakeEngine } from '../../fixtures/fakeEngine';

const dirs: string[] = [];
const backends: ModelBackend[] = [];
after(async () => {
  await Promise.all(backends.map((b) => b.dispose()));
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

function dataDir(): string {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'compose-test-'));
  dirs.push(d);
  return d;
}

async function compose(over: Partial<ComposeOptions>): Promise<Awaited<ReturnType<typeof composeBackend>>> {
  const composed = await composeBackend({
    models: [],
    engines: [],
    dataDir: over.dataDir ?? dataDir(),
    llama: { threads: 1, gpu: 'off', gpuLayers: 'auto' },
    log: () => {},
    ...over,
  });
  backends.push(composed.backend);
  return composed;
}

describe('composeBackend', () => {
  it('no model and no engine: the generated demo model, served by a real llama backend that generates', async () => {
    const dir = dataDir();
    const { backend, demoModel, engines } = await compose({ dataDir: dir });
    assert.equal(demoModel, path.join(dir, 'models', DEMO_MODEL_FILE));
    assert.ok(fs.existsSync(demoModel));
    assert.ok(backend instanceof LlamaBackend, 'one member is served as itself');
    assert.deepEqual(engines, []);
    const [model] = backend.listModels();
    assert.equal(model.demo, true);
    assert.equal(model.source, demoModel);
    const id = backend.resolveModel(undefined)!;
    assert.equal(id, model.id);
    let tokens = 0;
    const result = await backend.generate(
      { model: id, messages: [{ role: 'user', content: 'Hi.' }], maxOutputTokens: 4, temperature: 0 },
      { signal: new AbortController().signal, onText: (_t, n) => (tokens += n) },
    );
    assert.equal(result.outputTokens, 4);
    assert.equal(tokens, 4);
  });

  it('engines and no model: no demo model; the engines are probed before it returns', async () => {
    const engine = await startFakeEngine(undefined, ['m1', 'm2']);
    try {
      const dir = dataDir();
      const { backend, demoModel, engines } = await compose({ dataDir: dir, engines: [{ name: 'one', urls: [engine.base] }] });
      assert.equal(demoModel, undefined);
      assert.ok(!fs.existsSync(path.join(dir, 'models', DEMO_MODEL_FILE)), 'the demo model is not even generated');
      assert.ok(backend instanceof RemoteBackend);
      assert.deepEqual(
        backend.listModels().map((m) => m.id),
        ['one/m1', 'one/m2'],
        'model lists known at once',
      );
      assert.equal(engines.length, 1);
      assert.equal(engines[0].endpoints[0].state, 'up');
    } finally {
      await engine.close();
    }
  });

  it('an engine that is down: still composed, reported down, no demo model', async () => {
    const { backend, demoModel, engines } = await compose({ engines: [{ name: 'gone', urls: [`http://127.0.0.1:${await closedPort()}/v1`] }] });
    assert.equal(demoModel, undefined);
    assert.ok(backend instanceof RemoteBackend);
    assert.equal(engines[0].endpoints[0].state, 'down');
  });

  it("a model, an engine and an extra member: one composite, each model keeps its own backend's capabilities", async () => {
    const engine = await startFakeEngine(undefined, ['m1']);
    const dir = dataDir();
    try {
      const file = path.join(dir, 'local.gguf');
      writeTestModel(file);
      const { backend, demoModel } = await compose({
        dataDir: dir,
        models: [path.relative(process.cwd(), file)],
        engines: [{ name: 'one', urls: [engine.base] }],
        members: [new ConformanceFixtureBackend()],
      });
      assert.equal(demoModel, undefined);
      assert.ok(backend instanceof CompositeBackend);
      const models = backend.listModels();
      assert.deepEqual(models.map((m) => m.id).slice(1), ['one/m1', FIXTURE_MODEL], 'local first, then remote, then members');
      assert.equal(models[0].source, file, 'a relative path is made absolute');
      assert.equal(backend.resolveModel(undefined), models[0].id, 'the default model is the local one');
      assert.equal(backend.resolveModel(FIXTURE_MODEL), FIXTURE_MODEL);
      // Per model, not hidden by a wrapper: local resumes, an openai-kind engine does not, the engine's slots count.
      assert.equal(backend.supportsResume(models[0].id), true);
      assert.equal(backend.supportsResume('one/m1'), false);
      assert.equal(backend.supportsResume(FIXTURE_MODEL), false);
      assert.equal(backend.concurrency('one/m1')?.group, 'engine:one');
      assert.equal(backend.concurrency(FIXTURE_MODEL), undefined);
    } finally {
      await engine.close();
    }
  });

  it('extra members do not count as a model: with nothing else the demo model is served beside them', async () => {
    const { backend, demoModel } = await compose({ members: [new ConformanceFixtureBackend()] });
    assert.ok(demoModel);
    assert.ok(backend instanceof CompositeBackend);
    assert.deepEqual(
      backend.listModels().map((m) => m.demo),
      [true, true],
    );
    assert.notEqual(backend.resolveModel(undefined), FIXTURE_MODEL, 'the demo model stays the default');
  });

  it('a model URI is kept as given (node-llama-cpp resolves it at load)', async () => {
    const { backend } = await compose({ models: ['hf:owner/repo:Q4_K_M'] });
    assert.equal(backend.listModels()[0].source, 'hf:owner/repo:Q4_K_M');
  });
});
