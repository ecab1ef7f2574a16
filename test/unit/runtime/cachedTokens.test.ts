// usage.input_tokens_details.cached_tokens (issue #20): the second of two tasks sharing a long prompt prefix, on the
// real tiny model, reports the prefix the backend kept from the first; the first reports none or only a few.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { openRuntime } from './helpers';

test('a task sharing a long prefix with the one before reports the reused tokens as cached', async () => {
  const rt = await openRuntime();
  try {
    const instructions = 'You are a careful assistant. ' + 'Follow the house rules and answer briefly. '.repeat(6);
    const run = async (input: string) => {
      const { task } = rt.createTask({ origin: 'lmsp', principal: 'p', input: { model: 'tiny', instructions, input, max_output_tokens: 4 } });
      const done = await rt.waitForTerminal(task.id);
      assert.equal(done.status, 'succeeded');
      return done.usage!;
    };
    const first = await run('first question');
    const second = await run('second question');
    assert.ok((first.input_tokens_details?.cached_tokens ?? 0) < 50, JSON.stringify(first));
    const cached = second.input_tokens_details?.cached_tokens ?? 0;
    assert.ok(cached > 100 && cached < second.input_tokens, JSON.stringify(second));
  } finally {
    await rt.close();
  }
});
