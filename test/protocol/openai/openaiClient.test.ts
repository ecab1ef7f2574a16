// An unmodified Responses client (the `openai` npm package) against /lmsp/v1.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import OpenAI from 'openai';
import { openAiServer } from '../lmsp/harness';

describe('openai npm client against LMSP', () => {
  const ctx = openAiServer();

  it('responses.create (plain) and responses.retrieve', async () => {
    const r = await ctx.client.responses.create({ model: ctx.server.model, input: 'Say hello', max_output_tokens: 8 });
    assert.match(r.id, /^resp_/);
    assert.equal(r.object, 'response');
    assert.ok(['completed', 'incomplete'].includes(r.status!));
    assert.equal(typeof r.output_text, 'string');
    assert.ok(r.output_text.length > 0);
    assert.ok(r.usage!.output_tokens > 0 && r.usage!.output_tokens <= 8);
    const back = await ctx.client.responses.retrieve(r.id);
    assert.equal(back.id, r.id);
    assert.equal(back.output_text, r.output_text);
  });

  it('responses.create with stream: true yields deltas and the final response', async () => {
    const stream = await ctx.client.responses.create({
      model: ctx.server.model,
      input: [{ role: 'user', content: 'Stream please' }],
      instructions: 'Be brief.',
      max_output_tokens: 12,
      stream: true,
    });
    let text = '';
    const types: string[] = [];
    let final: OpenAI.Responses.Response | undefined;
    for await (const event of stream) {
      types.push(event.type);
      if (event.type === 'response.output_text.delta') text += event.delta;
      if (event.type === 'response.completed' || event.type === 'response.incomplete') final = event.response;
    }
    assert.equal(types[0], 'response.created');
    assert.ok(final, `no terminal event in ${types.join(',')}`);
    assert.equal((final!.output[0] as any).content[0].text, text);
    const back = await ctx.client.responses.retrieve(final!.id);
    assert.equal((back.output[0] as any).content[0].text, text);
  });

  it('responses.stream helper accumulates the same text', async () => {
    const runner = ctx.client.responses.stream({ model: ctx.server.model, input: 'again', max_output_tokens: 6 });
    let deltas = '';
    runner.on('response.output_text.delta', (e) => (deltas += e.delta));
    const final = await runner.finalResponse();
    assert.equal(final.id.startsWith('resp_'), true);
    assert.equal((final.output[0] as any).content[0].text, deltas);
  });

  it('errors arrive as typed API errors', async () => {
    await assert.rejects(
      () => ctx.client.responses.retrieve('resp_doesnotexist000'),
      (e: unknown) => e instanceof OpenAI.NotFoundError && (e as any).status === 404,
    );
    const bad = new OpenAI({ apiKey: 'not-the-token-at-all', baseURL: ctx.server.lmsp, maxRetries: 0 });
    await assert.rejects(() => bad.responses.create({ model: ctx.server.model, input: 'x' }), OpenAI.AuthenticationError);
  });
});
