// Hardware choice: the GPU binary and layer placement on a machine without a GPU (the real binaries), the backend's
// hardware report with thread calibration and its cache, settings and CLI validation. The calibration itself:
// threadCalibration.test.ts.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { parseAutoOrInt, placeModel, selectLlama } from '../../../../src/backends/llama/hardware';
import { importNodeLlamaCpp } from '../../../../src/backends/llama/nodeLlamaCpp';
import { LlamaBackend } from '../../../../src/backends/llama/llamaBackend';
import { writeTestModel } from '../../../../src/backends/llama/demoModel';
import { parseArgs, UsageError } from '../../../../src/cli/args';
import { readSettings } from '../../../../src/extension/model/settings';
import type { ModelHardware } from '../../../../src/runtime/backend';

const t = (s: string, ...a: unknown[]) => s.replace(/\{(\d+)\}/g, (_, i: string) => String(a[Number(i)]));

describe('LlamaBackend hardware (real binaries, this machine has no GPU)', () => {
  let dir: string;
  let modelPath: string;
  before(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tr-hw-'));
    modelPath = path.join(dir, 'model.gguf');
    writeTestModel(modelPath, { seed: 3 });
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  async function loadAndGenerate(
    options: Partial<ConstructorParameters<typeof LlamaBackend>[0]>,
  ): Promise<{ hw: ModelHardware; logs: string[]; tokens: number }> {
    const logs: string[] = [];
    const backend = new LlamaBackend({ models: [{ source: modelPath }], log: (m) => logs.push(m), ...options });
    try {
      const id = backend.resolveModel(undefined)!;
      await backend.load(id);
      const result = await backend.generate(
        { model: id, messages: [{ role: 'user', content: 'hi' }], maxOutputTokens: 4, temperature: 0 },
        { signal: new AbortController().signal, onText: () => undefined },
      );
      const hw = backend.listModels()[0]!.hardware;
      assert.ok(hw, 'a loaded model reports its hardware');
      return { hw, logs, tokens: result.outputTokens };
    } finally {
      await backend.dispose();
    }
  }

  it('auto runs on the CPU, says why, and calibrates threads once per model file', async () => {
    const cacheDir = path.join(dir, 'data');
    const first = await loadAndGenerate({ cacheDir });
    assert.equal(first.hw.compute, 'cpu');
    assert.equal(first.hw.gpuLayers, 0);
    assert.match(first.hw.fallbackReason ?? '', /CPU/);
    assert.equal(first.hw.threadsFrom, 'calibration');
    assert.ok(first.hw.threads >= 1 && first.hw.threads <= os.cpus().length);
    const measured = first.hw.threadTokensPerSecond ?? {};
    assert.ok('1' in measured && String(first.hw.threads) in measured, JSON.stringify(measured));
    assert.equal(Math.max(...Object.values(measured)) * 0.97 <= measured[String(first.hw.threads)]!, true);
    assert.ok(first.hw.warmupMs !== undefined && first.hw.warmupMs >= 0);
    assert.ok(first.tokens >= 1);
    assert.ok(
      first.logs.some((l) => /loaded in .*CPU, \d+ thread\(s\) \(calibration\)/.test(l)),
      first.logs.join('\n'),
    );

    const second = await loadAndGenerate({ cacheDir });
    assert.equal(second.hw.threadsFrom, 'cache');
    assert.equal(second.hw.threads, first.hw.threads);

    // Other weights in the same file: measured again.
    writeTestModel(modelPath, { seed: 4 });
    const third = await loadAndGenerate({ cacheDir });
    assert.equal(third.hw.threadsFrom, 'calibration');
  });

  it('a number above 1 bounds the calibration: steps on the fastest count up to it, prompts on it', async () => {
    const { hw, logs, tokens } = await loadAndGenerate({ threads: 2 });
    assert.equal(hw.threadsFrom, 'calibration');
    assert.equal(hw.threadsCap, 2);
    assert.deepEqual(Object.keys(hw.threadTokensPerSecond ?? {}), ['1', '2']);
    assert.ok([1, 2].includes(hw.threads));
    assert.equal(hw.promptThreads, 2);
    assert.ok(
      logs.some((l) => /CPU, [12] thread\(s\) \(calibration, at most 2\)/.test(l)),
      logs.join('\n'),
    );
    assert.ok(tokens >= 1);
  });

  it('a forced GPU API that is not here falls back to the CPU; the task still runs', async () => {
    const { hw, tokens } = await loadAndGenerate({ gpu: 'vulkan', threads: 1 });
    assert.equal(hw.compute, 'cpu');
    assert.match(hw.fallbackReason ?? '', /vulkan/);
    assert.equal(hw.threadsFrom, 'setting');
    assert.equal(hw.threads, 1);
    assert.ok(tokens >= 1);
  });

  it('gpu off reports no fallback (the CPU was asked for)', async () => {
    const { hw } = await loadAndGenerate({ gpu: 'off', threads: 1, gpuLayers: 4 });
    assert.equal(hw.compute, 'cpu');
    assert.equal(hw.fallbackReason, undefined);
    assert.equal(hw.gpuLayers, 0);
  });
});

describe('selectLlama and placeModel (real binaries, this machine has no GPU)', () => {
  let dir: string;
  let modelPath: string;
  before(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tr-place-'));
    modelPath = path.join(dir, 'model.gguf');
    writeTestModel(modelPath, { seed: 5 });
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('off: the CPU build, with no fallback reason (the CPU was asked for)', async () => {
    const selection = await selectLlama(await importNodeLlamaCpp(), 'off');
    try {
      assert.equal(selection.compute, 'cpu');
      assert.deepEqual(selection.devices, []);
      assert.equal(selection.fallbackReason, undefined);
      assert.ok(selection.mathCores >= 1);
      assert.equal(selection.llama.gpu, false);
    } finally {
      await selection.llama.dispose();
    }
  });

  it('a GPU API that is not here: the CPU build, and the reason names the API', async () => {
    const selection = await selectLlama(await importNodeLlamaCpp(), 'vulkan');
    try {
      assert.equal(selection.compute, 'cpu');
      assert.equal(selection.llama.gpu, false);
      assert.match(selection.fallbackReason ?? '', /vulkan.*running on the CPU/);
    } finally {
      await selection.llama.dispose();
    }
  });

  it('on the CPU build every layer stays on the CPU, prepare runs once on it, and the reason is passed on', async () => {
    const selection = await selectLlama(await importNodeLlamaCpp(), 'auto');
    try {
      const progress: number[] = [];
      const prepared: Array<{ layers: number; onGpu: boolean }> = [];
      const placed = await placeModel(selection, {
        modelPath,
        gpuLayers: 'auto',
        prepare: async (m, onGpu) => {
          prepared.push({ layers: m.gpuLayers, onGpu });
          return 'made';
        },
        onProgress: (p) => progress.push(p),
      });
      try {
        assert.equal(placed.model.gpuLayers, 0);
        assert.equal(placed.prepared, 'made');
        assert.deepEqual(prepared, [{ layers: 0, onGpu: false }], 'the tasks context is made once, on the CPU');
        assert.equal(placed.fallbackReason, selection.fallbackReason);
        assert.match(placed.fallbackReason ?? '', /CPU/);
        for (let i = 0; i < progress.length; i++) {
          assert.ok(progress[i]! >= 0 && progress[i]! <= 1);
          if (i > 0) assert.ok(progress[i]! >= progress[i - 1]!);
        }
      } finally {
        await placed.model.dispose();
      }
    } finally {
      await selection.llama.dispose();
    }
  });
});

describe('hardware settings and flags', () => {
  it('parses auto or an integer in range', () => {
    assert.equal(parseAutoOrInt('auto', 1, 8), 'auto');
    assert.equal(parseAutoOrInt('4', 1, 8), 4);
    assert.equal(parseAutoOrInt(4, 1, 8), 4);
    assert.equal(parseAutoOrInt('0', 1, 8), undefined);
    assert.equal(parseAutoOrInt('9', 1, 8), undefined);
    assert.equal(parseAutoOrInt('4.5', 1, 8), undefined);
    assert.equal(parseAutoOrInt('-1', 0, 8), undefined);
    assert.equal(parseAutoOrInt('max', 0, 8), undefined);
  });

  it('validates taskRuntime.gpu and taskRuntime.gpuLayers', () => {
    const read = (values: Record<string, unknown>) => readSettings((k) => values[k], t);
    const ok = read({ gpu: 'cuda', gpuLayers: 12, threads: 0 });
    assert.deepEqual([ok.settings.gpu, ok.settings.gpuLayers, ok.settings.threads, ok.problems], ['cuda', 12, 0, []]);
    assert.equal(read({ gpuLayers: '20' }).settings.gpuLayers, 20);
    assert.equal(read({}).settings.gpu, 'auto');
    assert.equal(read({}).settings.gpuLayers, 'auto');
    const bad = read({ gpu: 'nvidia', gpuLayers: -1 });
    assert.equal(bad.settings.gpu, 'auto');
    assert.equal(bad.settings.gpuLayers, 'auto');
    assert.equal(bad.problems.length, 2);
    assert.match(bad.problems.join('\n'), /taskRuntime\.gpu must be one of auto, off, cuda, vulkan, metal/);
    assert.match(bad.problems.join('\n'), /taskRuntime\.gpuLayers must be "auto" or a whole number/);
  });

  it('parses --gpu, --gpu-layers and --threads auto|N', () => {
    const a = parseArgs(['serve', '--gpu', 'vulkan', '--gpu-layers', '8', '--threads', 'auto']);
    assert.equal(a.command, 'serve');
    if (a.command !== 'serve') return;
    assert.deepEqual([a.gpu, a.gpuLayers, a.threads], ['vulkan', 8, 'auto']);
    const b = parseArgs(['serve', '--threads=4', '--gpu-layers=auto', '--gpu=off']);
    if (b.command !== 'serve') assert.fail('serve');
    assert.deepEqual([b.gpu, b.gpuLayers, b.threads], ['off', 'auto', 4]);
    assert.throws(
      () => parseArgs(['serve', '--gpu', 'nvidia']),
      (e: unknown) => e instanceof UsageError && /--gpu must be one of/.test(e.message),
    );
    assert.throws(() => parseArgs(['serve', '--threads', '0']), UsageError);
    assert.throws(() => parseArgs(['serve', '--gpu-layers', 'many']), UsageError);
  });
});
