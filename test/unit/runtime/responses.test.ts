// The runtime's readers of a request and a response (responses.ts), shared by every door and the editor.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { answerText, inputText, readLogprobs } from '../../../src/runtime/responses';
import type { ResponseRequest } from '../../../src/runtime/task';

const conversation = {
  model: 'm',
  input: [
    { type: 'message', role: 'system', content: 'be brief' },
    { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'weather in Oslo?' }] },
    { type: 'reasoning', content: [{ type: 'reasoning_text', text: 'SECRET plan' }] },
    { type: 'function_call', call_id: 'c1', name: 'weather', arguments: '{"city":"Oslo"}' },
    { type: 'function_call_output', call_id: 'c1', output: 'rain' },
    { type: 'message', role: 'assistant', content: 'It rains.' },
    { type: 'message', role: 'user', content: 'thanks' },
  ],
} as unknown as ResponseRequest;

test('inputText: messages by default, user turns when asked, calls and results with `calls`; never reasoning', () => {
  assert.equal(inputText(conversation), 'be brief\nweather in Oslo?\nIt rains.\nthanks');
  assert.equal(inputText(conversation, { roles: ['user'], separator: '\n\n' }), 'weather in Oslo?\n\nthanks');
  const all = inputText(conversation, { calls: true });
  assert.ok(all.includes('{"city":"Oslo"}') && all.includes('rain'), all);
  for (const t of [inputText(conversation), all]) assert.ok(!t.includes('SECRET'), t);
  assert.equal(inputText({ input: 'just a prompt' }), 'just a prompt');
});

test('answerText: the message items only, never reasoning or call arguments', () => {
  const response = {
    output: [
      { type: 'reasoning', content: [{ type: 'reasoning_text', text: 'SECRET' }] },
      { type: 'function_call', arguments: '{"a":1}' },
      {
        type: 'message',
        content: [
          { type: 'output_text', text: 'Hi' },
          { type: 'refusal', refusal: 'no' },
        ],
      },
      { type: 'message', content: [{ type: 'output_text', text: ' there' }] },
    ],
  };
  assert.equal(answerText(response), 'Hi there');
  assert.equal(answerText(null), '');
});

test('readLogprobs: stored entries get their bytes back; malformed ones are skipped', () => {
  const read = readLogprobs([
    { token: 'é', logprob: -0.5, top_logprobs: [{ token: 'e', logprob: -1 }, { token: 3 }] },
    { token: 'x' },
    'junk',
    { token: 'y', logprob: -2, bytes: [121] },
  ]);
  assert.deepEqual(read, [
    { token: 'é', logprob: -0.5, bytes: [0xc3, 0xa9], top_logprobs: [{ token: 'e', logprob: -1, bytes: [101] }] },
    { token: 'y', logprob: -2, bytes: [121], top_logprobs: [] },
  ]);
  assert.deepEqual(readLogprobs(undefined), []);
});
