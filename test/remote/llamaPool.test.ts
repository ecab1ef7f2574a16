// Cache-aware routing on real engines: two llama.cpp servers (one slot each) in one pool behind `serve --engine`.
// A conversation continued with previous_response_id goes back, turn after turn, to the server that served its first
// turn, with other work in between that the load sends to the other one; that server then evaluates only the new
// part of the prompt (its own log's "prompt eval … / N tokens"). The same for a prompt_cache_key, and for a client
// that sends the whole history again.
// Run with: node scripts/remote-engine/run.mjs (builds llama-server on first use).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startLlamaServer, type LlamaServer } from '../fixtures/llamaServer';
import { startServe, type Serve } from '../fixtures/serveProcess';

/** ~1 500 tokens of history (the test model's tokenizer takes about a token per character). */
const HISTORY = Array.from({ length: 30 }, (_, i) => `Note ${i}: the durable runtime keeps tasks in its store.`).join(' ');

/** Tasks each server ran, and how many prompt tokens each evaluated (its log's print_timing lines). */
function served(s: LlamaServer): number[] {
  return [...s.log().matchAll(/prompt eval time = +[\d.]+ ms \/ +(\d+) tokens/g)].map((m) => Number(m[1]));
}

describe('cache-aware routing in a pool of two llama.cpp servers', () => {
  let a: LlamaServer;
  let b: LlamaServer;
  let serve: Serve;
  before(async () => {
    [a, b] = await Promise.all([startLlamaServer(), startLlamaServer()]);
    serve = await startServe(['--engine', `pool=${a.base},${b.base}`, '--engine-kind', 'pool=llama.cpp']);
  });
  after(async () => {
    await serve?.stop();
    await Promise.all([a?.kill(), b?.kill()]);
  });

  /** Runs one response; returns it and which server ran it, with the prompt tokens that server evaluated. */
  async function respond(body: Record<string, unknown>) {
    const before = [served(a).length, served(b).length];
    const r = await serve.lmspCall('POST', '/responses', { model: 'pool/tiny', max_output_tokens: 8, temperature: 0, ...body });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    const on = served(a).length > before[0] ? a : b;
    assert.equal(served(on === a ? b : a).length, before[on === a ? 1 : 0], 'one server ran it');
    return { response: r.json as { id: string; usage: { input_tokens: number } }, on, evaluated: served(on).at(-1)! };
  }

  it("a previous_response_id conversation's turns land on its first server; only the new tokens are evaluated there", async () => {
    const first = await respond({ instructions: 'Answer briefly.', input: `${HISTORY}\nWhat is kept?` });
    assert.ok(first.evaluated > 1000, `the first turn evaluates its whole prompt (${first.evaluated})`);
    let previous = first.response.id;
    for (let turn = 0; turn < 3; turn++) {
      // Unrelated work in between: least-busy sends it to the other server (it served fewer).
      const other = await respond({ input: `Unrelated question ${turn}.` });
      assert.notEqual(other.on, first.on, 'unrelated work by load');
      // Instructions are not carried by previous_response_id (OpenAI's rule): a client sends them on every turn.
      const next = await respond({ instructions: 'Answer briefly.', previous_response_id: previous, input: `And then ${turn}?` });
      assert.equal(next.on, first.on, `turn ${turn + 2} on the server of the first`);
      assert.ok(next.response.usage.input_tokens > 1000);
      assert.ok(next.evaluated < 100, `turn ${turn + 2} evaluated ${next.evaluated} of ${next.response.usage.input_tokens} prompt tokens`);
      previous = next.response.id;
    }
  });

  it('a prompt_cache_key and a history sent again go back too', async () => {
    const keyed = await respond({ input: 'Short start.', prompt_cache_key: 'thread-7' });
    const filler = await respond({ input: 'Filler.' });
    assert.notEqual(filler.on, keyed.on);
    assert.equal((await respond({ input: 'Another, same key.', prompt_cache_key: 'thread-7' })).on, keyed.on);

    const history = [{ role: 'user', content: `${HISTORY}\nSummarize.` }];
    const start = await respond({ input: history });
    await respond({ input: 'Filler again.' });
    history.push({ role: 'assistant', content: 'It keeps tasks.' }, { role: 'user', content: 'More?' });
    const again = await respond({ input: history });
    assert.equal(again.on, start.on);
    assert.ok(again.evaluated < 100, `evaluated ${again.evaluated}`);
  });
});
