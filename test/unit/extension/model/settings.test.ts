// Reading the settings: invalid values fall back to the default with a message naming the setting; taskRuntime.engines
// entries are checked like `serve --engine` (http(s) only, no credentials in URLs, unique names), a bad entry skipped
// with a message naming it; which changes restart the runtime. (package.json against these: ../manifest.test.ts.)
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { describe, it, test } from 'node:test';
import { writeTestModel } from '../../../../src/backends/llama/demoModel';
import { plainLocalize } from '../../../../src/extension/model/format';
import { readSettings, restartNeeded, DEFAULT_SETTINGS } from '../../../../src/extension/model/settings';

describe('settings', () => {
  it('validates values and falls back to defaults with messages', () => {
    const values: Record<string, unknown> = {
      'server.port': 70000,
      threads: 2,
      defaultRestartPolicy: 'sometimes',
      model: 'weights.bin',
      'ttl.defaultMinutes': 100,
      'ttl.maxMinutes': 50,
    };
    const { settings, problems } = readSettings((k) => values[k], plainLocalize);
    assert.equal(settings.port, 0);
    assert.equal(settings.threads, 2);
    assert.equal(settings.defaultRestartPolicy, 'fail');
    assert.equal(settings.model, '');
    assert.equal(settings.defaultTtlMinutes, 50);
    assert.equal(problems.length, 4);
    assert.match(problems[0]!, /taskRuntime\./);
    const ok = readSettings((k) => ({ model: 'hf:owner/repo:Q4_K_M', 'notifications.onCompletion': 'failures' })[k], plainLocalize);
    assert.deepEqual(ok.problems, []);
    assert.equal(ok.settings.model, 'hf:owner/repo:Q4_K_M');
    assert.equal(ok.settings.notifyOnCompletion, 'failures');
    assert.equal(restartNeeded(DEFAULT_SETTINGS, { ...DEFAULT_SETTINGS, notifyOnCompletion: 'never' }), false);
    assert.equal(restartNeeded(DEFAULT_SETTINGS, { ...DEFAULT_SETTINGS, port: 1234 }), true);
  });

  it('takes a sampling temperature from 0 to 2, else the model default with a message', () => {
    assert.equal(readSettings((k) => ({ temperature: 0 })[k], plainLocalize).settings.temperature, 0);
    assert.equal(readSettings(() => undefined, plainLocalize).settings.temperature, null);
    const bad = readSettings((k) => ({ temperature: 7 })[k], plainLocalize);
    assert.equal(bad.settings.temperature, null);
    assert.match(bad.problems[0]!, /taskRuntime\.temperature/);
    assert.equal(restartNeeded(DEFAULT_SETTINGS, { ...DEFAULT_SETTINGS, temperature: 0.2 }), false, 'applies without a restart');
  });
});

test('taskRuntime.engines is read, checked and normalized; bad entries are skipped and reported', () => {
  const engines = [
    { name: 'gpu', urls: ['http://10.0.0.5:8080/v1/', 'http://10.0.0.6:8080/v1'], concurrency: [2] },
    { name: 'ollama', urls: ['http://127.0.0.1:11434/v1'], models: ['llama3.2'] },
    { name: 'bad', urls: ['file:///etc/passwd'] },
    { name: 'leaky', urls: ['http://user:pw-9f8e7d@h/v1'] },
    { name: 'gpu', urls: ['http://x/v1'] },
    { name: 'no urls', urls: [] },
  ];
  const { settings, problems } = readSettings((k) => (k === 'engines' ? engines : undefined), plainLocalize);
  assert.deepEqual(settings.engines, [
    { name: 'gpu', urls: ['http://10.0.0.5:8080/v1', 'http://10.0.0.6:8080/v1'], concurrency: [2] },
    { name: 'ollama', urls: ['http://127.0.0.1:11434/v1'], models: ['llama3.2'] },
  ]);
  assert.equal(problems.length, 4);
  assert.match(problems[0], /engine "bad" is skipped: engine URLs must be http or https/);
  assert.match(problems[1], /engine "leaky" is skipped: .*must not contain credentials/);
  assert.ok(!problems.join('\n').includes('pw-9f8e7d'));
  assert.match(problems[2], /engine "gpu" is skipped: the name is used twice/);
  assert.match(problems[3], /engine "no urls" is skipped/);
  assert.match(readSettings((k) => (k === 'engines' ? 'x' : undefined), plainLocalize).problems[0], /must be a list of engines/);
});

test('an engine kind is kept; "resume" where the kind cannot continue a final message is refused', () => {
  const engines = [
    { name: 'v', urls: ['http://v/v1'], kind: 'vllm', resume: false },
    { name: 'l', urls: ['http://l/v1'], kind: 'llama.cpp' },
    { name: 'o', urls: ['http://o/v1'], kind: 'ollama', resume: true },
    { name: 'k', urls: ['http://k/v1'], kind: 'tgi' },
  ];
  const { settings, problems } = readSettings((k) => (k === 'engines' ? engines : undefined), plainLocalize);
  assert.deepEqual(settings.engines, [
    { name: 'v', urls: ['http://v/v1'], kind: 'vllm', resume: false },
    { name: 'l', urls: ['http://l/v1'], kind: 'llama.cpp' },
  ]);
  assert.match(problems[0], /engine "o" is skipped: .*resume" cannot be offered: Ollama/);
  assert.match(problems[1], /engine "k" is skipped: engine kind "tgi" must be one of/);
});

test('a change of the engines restarts the runtime; the same engines do not', () => {
  const a = { ...DEFAULT_SETTINGS, engines: [{ name: 'gpu', urls: ['http://h/v1'] }] };
  assert.equal(restartNeeded(a, { ...a, engines: [{ name: 'gpu', urls: ['http://h/v1'] }] }), false);
  assert.equal(restartNeeded(a, { ...a, engines: [{ name: 'gpu', urls: ['http://h2/v1'] }] }), true);
  assert.equal(restartNeeded(a, DEFAULT_SETTINGS), true);
});

test('taskRuntime.webhook.url: an http(s) URL, else none with a message that does not repeat it; both webhook settings restart the runtime', () => {
  const read = (values: Record<string, unknown>) => readSettings((k) => values[k], plainLocalize);
  assert.equal(read({}).settings.webhookUrl, '');
  assert.equal(read({}).settings.webhookAllowPrivate, false);
  const ok = read({ 'webhook.url': ' https://hooks.example/a ', 'webhook.allowPrivateAddresses': true });
  assert.deepEqual([ok.settings.webhookUrl, ok.settings.webhookAllowPrivate, ok.problems], ['https://hooks.example/a', true, []]);
  for (const bad of ['ftp://hooks.example/?k=sekrit', 'https://u:sekrit@hooks.example/', 42]) {
    const r = read({ 'webhook.url': bad });
    assert.equal(r.settings.webhookUrl, '');
    assert.equal(r.problems.length, 1, String(bad));
    assert.match(r.problems[0], /taskRuntime\.webhook\.url/);
    assert.doesNotMatch(r.problems[0], /sekrit/);
  }
  assert.equal(restartNeeded(DEFAULT_SETTINGS, { ...DEFAULT_SETTINGS, webhookUrl: 'https://hooks.example/' }), true);
  assert.equal(restartNeeded(DEFAULT_SETTINGS, { ...DEFAULT_SETTINGS, webhookAllowPrivate: true }), true);
});

test('taskRuntime.promptLookup is auto, on or off; taskRuntime.draftModel must be a GGUF file; both restart the runtime', () => {
  const read = (values: Record<string, unknown>) => readSettings((k) => values[k], plainLocalize);
  assert.equal(read({}).settings.promptLookup, 'auto');
  assert.equal(read({ promptLookup: 'off' }).settings.promptLookup, 'off');
  const bad = read({ promptLookup: 'always' });
  assert.equal(bad.settings.promptLookup, 'auto');
  assert.match(bad.problems[0]!, /taskRuntime\.promptLookup must be one of auto, on, off; using auto/);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'draft-setting-'));
  try {
    const gguf = path.join(dir, 'd.gguf');
    writeTestModel(gguf, { seed: 2 });
    assert.equal(read({ draftModel: gguf }).settings.draftModel, gguf);
    assert.equal(read({ draftModel: '' }).settings.draftModel, '');
    const missing = read({ draftModel: path.join(dir, 'gone.gguf') });
    assert.equal(missing.settings.draftModel, '');
    assert.match(missing.problems[0]!, /taskRuntime\.draftModel: draft model file not found: gone\.gguf; no draft model is used/);
    assert.match(read({ draftModel: 7 }).problems[0]!, /taskRuntime\.draftModel must be the path of a \.gguf file/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  assert.equal(restartNeeded(DEFAULT_SETTINGS, { ...DEFAULT_SETTINGS, promptLookup: 'on' }), true);
  assert.equal(restartNeeded(DEFAULT_SETTINGS, { ...DEFAULT_SETTINGS, draftModel: '/m/d.gguf' }), true);
});
