// errorText: the one scrubber for error text that clients see (task errors, problem details), used by the runtime
// and by the llama backend (which once kept file names while the runtime did not).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { errorText, FAILURES, problem, PROBLEM_TYPE_BASE, type FailureCode } from '../../../src/runtime/problems';

test('absolute paths of every shape become <path>; the rest of the text stays', () => {
  const cases: Array<[string, string]> = [
    ['failed to open /home/alice/models/x.gguf', 'failed to open <path>'],
    ["ENOENT: no such file or directory, open '/home/alice'", "ENOENT: no such file or directory, open '<path>'"],
    ['see "C:\\Users\\alice\\model.gguf" and C:/Users/alice/b.gguf', 'see "<path>" and <path>'],
    ['share \\\\server\\models\\x.gguf gone', 'share <path> gone'],
    ['~/models/x.gguf (file:///home/alice/y.gguf)', '<path> (<path>)'],
    ['path=/etc/secret,other=/tmp/x', 'path=<path>,other=<path>'],
    ['/starts/with/a/path: bad; /x;y', '<path>: bad; <path>;y'],
  ];
  for (const [input, expected] of cases) assert.equal(errorText(new Error(input)), expected, input);
});

test('what only looks like a path is kept', () => {
  for (const text of [
    'content-type application/json is required',
    'wrote 1/2 of the file',
    'fetch https://huggingface.co/owner/repo failed',
    'a / b',
    'model "tiny" not loaded',
  ]) {
    assert.equal(errorText(new Error(text)), text);
  }
});

test('non-errors are stringified, long text is cut, and scrubbing twice changes nothing', () => {
  assert.equal(errorText('plain /x/y'), 'plain <path>');
  assert.equal(errorText(42), '42');
  assert.equal(errorText(new Error('x'.repeat(1000))).length, 300);
  assert.equal(errorText(new Error('x'.repeat(1000)), 10), 'x'.repeat(10));
  const once = errorText(new Error('cannot load model "m": open /a/b/c.gguf'));
  assert.equal(errorText(once), once);
});

test('a backend failure with a request code keeps its status and title (they once fell back to "Task failed" 500)', () => {
  for (const code of ['invalid_json_schema', 'unsupported_capability', 'context_length_exceeded', 'invalid_request'] as const) {
    const p = problem(code, 'why');
    assert.equal(p.status, 400, code);
    assert.notEqual(p.title, 'Task failed', code);
    assert.equal(p.type, PROBLEM_TYPE_BASE + code);
  }
  // Every code the table names reads back as itself, with an HTTP error status.
  for (const code of Object.keys(FAILURES) as FailureCode[]) {
    const p = problem(code, 'x');
    assert.equal(p.code, code);
    assert.ok(p.status >= 400 && p.status < 600, code);
  }
});
