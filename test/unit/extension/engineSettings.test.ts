// taskRuntime.engines: entries checked like `serve --engine` (http(s) only, no credentials in URLs, unique names),
// a bad entry skipped with a message naming it, and a change restarts the runtime.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { plainLocalize } from '../../../src/extension/model/format';
import { readSettings, restartNeeded, DEFAULT_SETTINGS } from '../../../src/extension/model/settings';

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
