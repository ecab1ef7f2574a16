// `task-runtime serve` flags that choose how models run: --context-size (auto or a token count in range), speculative
// decoding (--prompt-lookup, --draft-model).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseArgs, UsageError } from '../../../src/cli/args';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { MAX_CONTEXT_SIZE, MIN_CONTEXT_SIZE } from '../../../src/backends/llama/contextChoice';
import { writeTestModel } from '../../../src/backends/llama/demoModel';

const serveArgs = (argv: string[]) => {
  const a = parseArgs(['serve', ...argv]);
  assert.equal(a.command, 'serve');
  return a as Extract<typeof a, { command: 'serve' }>;
};

test('--context-size takes auto or a whole number of tokens in range; absent leaves the default to the server', () => {
  assert.equal(serveArgs([]).contextSize, undefined);
  assert.equal(serveArgs(['--context-size', 'auto']).contextSize, 'auto');
  assert.equal(serveArgs(['--context-size', '8192']).contextSize, 8192);
  assert.equal(serveArgs(['--context-size', String(MIN_CONTEXT_SIZE)]).contextSize, MIN_CONTEXT_SIZE);
  assert.equal(serveArgs(['--context-size', String(MAX_CONTEXT_SIZE)]).contextSize, MAX_CONTEXT_SIZE);
  for (const bad of ['0', String(MIN_CONTEXT_SIZE - 1), String(MAX_CONTEXT_SIZE + 1), '4k', '-1', '']) {
    assert.throws(
      () => serveArgs(['--context-size', bad]),
      (e: Error) => e instanceof UsageError && /--context-size/.test(e.message),
      bad,
    );
  }
});

test('--background-restart takes a restart policy; absent leaves the default to the LMSP door', () => {
  assert.equal(serveArgs([]).backgroundRestart, undefined);
  for (const p of ['fail', 'retry', 'resume'] as const) assert.equal(serveArgs(['--background-restart', p]).backgroundRestart, p);
  for (const bad of ['never', 'RETRY', '']) {
    assert.throws(
      () => serveArgs(['--background-restart', bad]),
      (e: Error) => e instanceof UsageError && /--background-restart/.test(e.message),
      bad,
    );
  }
});

test('--help or -h anywhere prints the usage: alone, after serve, after make-test-model', () => {
  for (const argv of [[], ['--help'], ['-h'], ['help'], ['serve', '--help'], ['serve', '--port', '0', '-h'], ['make-test-model', '--help']]) {
    assert.deepEqual(parseArgs(argv), { command: 'help' }, argv.join(' '));
  }
  assert.throws(() => parseArgs(['serve', '--helpme']), UsageError);
});

test('--priority-aging-ms takes whole milliseconds from 0 (no aging) to an hour; absent leaves the default', () => {
  assert.equal(serveArgs([]).priorityAgingMs, undefined);
  assert.equal(serveArgs(['--priority-aging-ms', '0']).priorityAgingMs, 0);
  assert.equal(serveArgs(['--priority-aging-ms', '2500']).priorityAgingMs, 2500);
  for (const bad of ['-1', '3600001', '1.5', '10s']) {
    assert.throws(
      () => serveArgs(['--priority-aging-ms', bad]),
      (e: Error) => e instanceof UsageError && /--priority-aging-ms/.test(e.message),
      bad,
    );
  }
});

test('--webhook PRINCIPAL=URL needs its --webhook-secret-file; --webhook-allow-private takes no value; the URL is never echoed', () => {
  assert.deepEqual(serveArgs([]).webhooks, []);
  assert.equal(serveArgs([]).webhookAllowPrivate, false);
  const a = serveArgs(['--webhook', 'alice=https://hooks.example/a', '--webhook-secret-file', 'alice=/tmp/s', '--webhook-allow-private']);
  assert.deepEqual(a.webhooks, [{ principal: 'alice', url: 'https://hooks.example/a', secretFile: '/tmp/s' }]);
  assert.equal(a.webhookAllowPrivate, true);
  const refused: Array<[string[], RegExp]> = [
    [['--webhook', 'alice=https://hooks.example/a'], /--webhook-secret-file alice=FILE/],
    [['--webhook', 'alice=ftp://hooks.example/?token=sekrit', '--webhook-secret-file', 'alice=/tmp/s'], /must be http or https/],
    [['--webhook', 'alice=https://u:sekrit@hooks.example/', '--webhook-secret-file', 'alice=/tmp/s'], /credentials/],
    [['--webhook', 'https://hooks.example/'], /PRINCIPAL=VALUE/],
    [['--webhook', 'alice=https://a.example/', '--webhook', 'alice=https://b.example/'], /given twice/],
    [['--webhook-secret-file', 'bob=/tmp/s'], /no --webhook bob=URL/],
    [['--webhook-allow-private=yes'], /takes no value/],
  ];
  for (const [argv, message] of refused) {
    assert.throws(
      () => serveArgs(argv),
      (e: Error) => e instanceof UsageError && message.test(e.message) && !e.message.includes('sekrit'),
      argv.join(' '),
    );
  }
});

test('make-test-model takes one path, and --family names one of the real families (before or after the path)', () => {
  assert.deepEqual(parseArgs(['make-test-model', 'out.gguf']), { command: 'make-test-model', out: 'out.gguf' });
  assert.deepEqual(parseArgs(['make-test-model', '--family', 'qwen3', 'q.gguf']), { command: 'make-test-model', out: 'q.gguf', family: 'qwen3' });
  assert.deepEqual(parseArgs(['make-test-model', 'g.gguf', '--family=gpt-oss']), { command: 'make-test-model', out: 'g.gguf', family: 'gpt-oss' });
  assert.throws(() => parseArgs(['make-test-model', '--family', 'mistral', 'm.gguf']), /--family must be one of qwen3, llama3.1, gemma3, gpt-oss/);
  assert.throws(() => parseArgs(['make-test-model', '--family']), UsageError);
  assert.throws(() => parseArgs(['make-test-model', '--family', 'qwen3']), /exactly one argument/);
});

test('--prompt-lookup takes auto, on or off; --draft-model must name an existing GGUF file, kept as an absolute path', () => {
  assert.equal(serveArgs([]).promptLookup, undefined);
  assert.equal(serveArgs([]).draftModel, undefined);
  for (const c of ['auto', 'on', 'off'] as const) assert.equal(serveArgs(['--prompt-lookup', c]).promptLookup, c);
  for (const bad of ['yes', 'ON']) {
    assert.throws(
      () => serveArgs(['--prompt-lookup', bad]),
      (e: Error) => e instanceof UsageError && /--prompt-lookup must be one of auto, on, off/.test(e.message),
      bad,
    );
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'draft-args-'));
  try {
    const gguf = path.join(dir, 'draft.gguf');
    writeTestModel(gguf, { seed: 2 });
    assert.equal(serveArgs(['--draft-model', path.relative(process.cwd(), gguf)]).draftModel, gguf);
    const text = path.join(dir, 'notes.gguf');
    fs.writeFileSync(text, 'not a model');
    const cases: Array<[string, RegExp]> = [
      [path.join(dir, 'missing.gguf'), /--draft-model: draft model file not found: missing\.gguf\./],
      [dir, /--draft-model: draft model draft-args-\w+ is not a file\./],
      [text, /--draft-model: draft model notes\.gguf is not a GGUF file\./],
    ];
    for (const [file, message] of cases) {
      assert.throws(
        () => serveArgs(['--draft-model', file]),
        (e: Error) => e instanceof UsageError && message.test(e.message) && !e.message.includes(dir),
        file,
      );
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
