// Thread calibration: the candidates and the choice (scripted speeds), the cache file, and ThreadCalibrator on the
// demo model with real node-llama-cpp (measured, cached in memory and on disk, keyed by model content).
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Llama, LlamaModel } from 'node-llama-cpp' with { 'resolution-mode': 'import' };
import { writeTestModel } from '../../../../src/backends/llama/demoModel';
import { importNodeLlamaCpp } from '../../../../src/backends/llama/nodeLlamaCpp';
import { modelFingerprint } from '../../../../src/backends/llama/snapshots';
import {
  chooseThreads,
  measureDecode,
  promptThreadsFor,
  THREAD_CALIBRATION_FILE,
  ThreadCalibrationCache,
  ThreadCalibrator,
  threadCandidates,
  timingPrompt,
  type CalibrationRun,
} from '../../../../src/backends/llama/threadCalibration';

describe('thread candidates and choice', () => {
  it('times powers of two, cores − 1 and cores', () => {
    assert.deepEqual(threadCandidates(1), [1]);
    assert.deepEqual(threadCandidates(2), [1, 2]);
    assert.deepEqual(threadCandidates(4), [1, 2, 3, 4]);
    assert.deepEqual(threadCandidates(16), [1, 2, 4, 8, 15, 16]);
    assert.deepEqual(threadCandidates(0), [1]);
  });

  it('picks the fastest, measures the close ones twice and keeps their best', async () => {
    const calls: number[] = [];
    // 4 threads is unlucky the first time (a burst of load), fastest the second.
    const speeds: Record<number, number[]> = { 1: [100], 2: [180], 4: [300, 420], 8: [150], 15: [390, 380], 16: [200] };
    const choice = await chooseThreads(threadCandidates(16), async (n) => {
      calls.push(n);
      return speeds[n]!.shift()!;
    });
    assert.equal(choice.threads, 4);
    assert.equal(choice.measured['4'], 420);
    assert.equal(choice.measured['15'], 390);
    // Round two only for candidates within 0.75× of the first round's best (390): 15, 4.
    assert.deepEqual(calls, [1, 2, 4, 8, 15, 16, 15, 4]);
  });

  it('prefers more threads within 3 % (prompt processing scales further than decoding)', async () => {
    const choice = await chooseThreads([1, 2, 4], async (n) => ({ 1: 500, 2: 495, 4: 300 })[n]!);
    assert.equal(choice.threads, 2);
  });

  it("gives prompt batches every math core, or the setting's bound, unless every layer is on the GPU", () => {
    assert.equal(promptThreadsFor({ threads: 1, from: 'calibration' }, 16, true), 16);
    assert.equal(promptThreadsFor({ threads: 1, from: 'cache' }, 2, true), 2);
    assert.equal(promptThreadsFor({ threads: 4, from: 'default' }, 2, true), 4);
    assert.equal(promptThreadsFor({ threads: 1, from: 'setting' }, 16, true), 1);
    assert.equal(promptThreadsFor({ threads: 1, from: 'calibration', cap: 6 }, 16, true), 6);
    assert.equal(promptThreadsFor({ threads: 2, from: 'cache', cap: 6 }, 16, false), 2);
    assert.equal(promptThreadsFor({ threads: 8, from: 'calibration' }, 16, false), 8);
  });

  it('treats a damaged cache file as empty', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tr-cache-'));
    const cache = new ThreadCalibrationCache(path.join(dir, 'c.json'));
    fs.writeFileSync(cache.file, '{"version":1,"entries":{"k":{"threads":"lots"}}');
    assert.equal(cache.get('k'), undefined);
    cache.set('k', { threads: 3, measured: { '3': 10 } });
    assert.equal(cache.get('k')?.threads, 3);
    fs.writeFileSync(cache.file, '{"version":1,"entries":{"k":{"threads":0}}}');
    assert.equal(cache.get('k'), undefined);
    fs.rmSync(dir, { recursive: true, force: true });
  });
});

describe('ThreadCalibrator on the demo model', () => {
  let dir: string;
  let modelPath: string;
  let llama: Llama;
  let model: LlamaModel;
  let run: CalibrationRun;
  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tr-calib-'));
    modelPath = path.join(dir, 'model.gguf');
    writeTestModel(modelPath, { seed: 6 });
    const nlc = await importNodeLlamaCpp();
    llama = await nlc.getLlama({ gpu: false, build: 'never' });
    model = await llama.loadModel({ modelPath });
    run = { modelPath, fingerprint: modelFingerprint(modelPath), compute: 'cpu', devices: [], gpuLayers: 0, mathCores: 2 };
  });
  after(async () => {
    await llama?.dispose();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('times decode steps on a prompt that starts with BOS', async () => {
    const prompt = timingPrompt(model);
    assert.equal(prompt[0], model.tokens.bos);
    assert.ok(prompt.length > 3);
    const tps = await measureDecode(model, prompt, 1);
    assert.ok(Number.isFinite(tps) && tps > 0, String(tps));
  });

  it('a setting of 1 is used as given, measuring nothing', async () => {
    const logs: string[] = [];
    const calibrator = new ThreadCalibrator({ setting: 1, cacheDir: path.join(dir, 'unused'), log: (m) => logs.push(m) });
    assert.deepEqual(await calibrator.pick(model, { ...run, mathCores: 16 }), { threads: 1, from: 'setting' });
    assert.equal(fs.existsSync(path.join(dir, 'unused')), false);
    assert.deepEqual(logs, []);
  });

  it('a larger number bounds the candidates, beyond the cores too, and is its own cache key', async () => {
    const cacheDir = path.join(dir, 'bounded');
    const calibrator = new ThreadCalibrator({ setting: 3, cacheDir });
    const first = await calibrator.pick(model, run);
    assert.equal(first.from, 'calibration');
    assert.equal(first.cap, 3);
    assert.deepEqual(Object.keys(first.measured ?? {}), ['1', '2', '3'], 'a bound past the 2 math cores is timed as set');
    assert.ok([1, 2, 3].includes(first.threads));
    assert.deepEqual(await new ThreadCalibrator({ setting: 3, cacheDir }).pick(model, run), { ...first, from: 'cache' });
    const other = await new ThreadCalibrator({ setting: 2, cacheDir }).pick(model, run);
    assert.equal(other.from, 'calibration', 'another bound is another key');
    assert.deepEqual(Object.keys(other.measured ?? {}), ['1', '2']);
    const auto = await new ThreadCalibrator({ setting: 'auto', cacheDir }).pick(model, run);
    assert.equal(auto.from, 'calibration', 'auto is not the bound of 2, although it times the same counts here');
    assert.equal(auto.cap, undefined);
  });

  it('measures once, then answers from memory, and from the cache file in a new calibrator', async () => {
    const cacheDir = path.join(dir, 'data');
    const logs: string[] = [];
    const calibrator = new ThreadCalibrator({ setting: 'auto', cacheDir, log: (m) => logs.push(m) });
    const first = await calibrator.pick(model, run);
    assert.equal(first.from, 'calibration');
    assert.deepEqual(Object.keys(first.measured ?? {}), ['1', '2']);
    assert.ok([1, 2].includes(first.threads));
    assert.equal(logs.filter((l) => /^threads for model\.gguf: \d+ /.test(l)).length, 1, logs.join('\n'));
    const file = path.join(cacheDir, THREAD_CALIBRATION_FILE);
    assert.ok(fs.existsSync(file));

    // The cache file is not read again by the calibrator that measured: removing it changes nothing.
    fs.rmSync(file);
    assert.deepEqual(await calibrator.pick(model, run), { threads: first.threads, from: 'cache', measured: first.measured });
    assert.equal(fs.existsSync(file), false);

    const again = await calibrator.pick(model, { ...run, mathCores: 1 });
    assert.equal(again.from, 'calibration', 'another machine shape is another key');
    assert.deepEqual(Object.keys(again.measured ?? {}), ['1']);

    const fresh = new ThreadCalibrator({ setting: 'auto', cacheDir });
    assert.deepEqual(await fresh.pick(model, { ...run, mathCores: 1 }), { threads: 1, from: 'cache', measured: again.measured });
    assert.equal((await fresh.pick(model, { ...run, fingerprint: 'other-weights' })).from, 'calibration');
  });

  it('without a data directory, keeps its choices in memory only', async () => {
    const calibrator = new ThreadCalibrator({ setting: 'auto' });
    const key = { ...run, gpuLayers: 1 };
    assert.equal((await calibrator.pick(model, key)).from, 'calibration');
    assert.equal((await calibrator.pick(model, key)).from, 'cache');
    assert.equal((await new ThreadCalibrator({ setting: 'auto' }).pick(model, key)).from, 'calibration');
  });

  it('a cancelled load stops the calibration', async () => {
    const ac = new AbortController();
    ac.abort(new Error('stop'));
    await assert.rejects(new ThreadCalibrator({ setting: 'auto' }).pick(model, { ...run, gpuLayers: 2 }, ac.signal), /stop/);
  });

  it('a calibration that fails falls back to min(4, cores) threads and says why', async () => {
    const logs: string[] = [];
    // The model is freed as the calibration starts (pick has tokenized its prompt): its contexts cannot run.
    const gone = await llama.loadModel({ modelPath });
    const picking = new ThreadCalibrator({ setting: 'auto', log: (m) => logs.push(m) }).pick(gone, { ...run, mathCores: 8 });
    await gone.dispose();
    const picked = await picking;
    assert.deepEqual(picked, { threads: 4, from: 'default' });
    assert.ok(
      logs.some((l) => /^thread calibration failed \(.+\); using 4 thread\(s\)$/.test(l)),
      logs.join('\n'),
    );

    // Under a bound, the bound.
    const gone2 = await llama.loadModel({ modelPath });
    const bounded = new ThreadCalibrator({ setting: 6 }).pick(gone2, { ...run, mathCores: 8 });
    await gone2.dispose();
    assert.deepEqual(await bounded, { threads: 6, from: 'setting' });
  });
});
