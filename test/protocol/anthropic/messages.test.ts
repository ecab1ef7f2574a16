// The Anthropic Messages door end to end: the unmodified `@anthropic-ai/sdk` client (its strict stream accumulator,
// typed errors, `?beta=true` paths) against the real `serve` process on the generated demo model. The weights are
// noise, so what is checked is what the door guarantees: the shapes, the usage arithmetic, the stop reasons the
// budget and the call grammar force, the policies (attribution block dropped, mid-conversation system folded,
// thinking signatures opened only when ours) and that every message is a task, cancelled when its client leaves.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import { REASONING_KEY_FILE, ReasoningSeal } from '../../../src/protocols/shared/reasoningSeal';
import { call, removeDir, startServer, waitForStatus, type Server } from '../lmsp/harness';

const WEATHER_TOOL = {
  name: 'get_weather',
  description: 'Weather of a city',
  input_schema: { type: 'object' as const, properties: { city: { type: 'string', maxLength: 8 } }, required: ['city'], additionalProperties: false },
};

/** A body member the SDK passes through: the runtime's vendor sampling (a seed makes the text repeatable). */
const seeded = (seed: number) => ({ task_runtime: { seed } }) as Record<string, unknown>;

describe('Anthropic Messages door (@anthropic-ai/sdk)', () => {
  let server: Server;
  let client: Anthropic;

  before(async () => {
    server = await startServer();
    client = new Anthropic({ baseURL: server.url, authToken: server.tokenA, apiKey: null, maxRetries: 0 });
  });
  after(async () => {
    assert.equal(await server.stop(), 0);
    removeDir(server.dataDir);
  });

  /** The newest task of principal A (the one a request just made). */
  async function newestTask(): Promise<any> {
    const r = await call(server, 'GET', '/tasks?limit=1');
    assert.equal(r.status, 200, r.text);
    return r.json.data[0];
  }

  it('messages.create: a Message with text, msg_ id, usage whose sum is the prompt, max_tokens when the budget ends it', async () => {
    // Seeded: on random weights an unseeded generation may end on its own before the budget (end_turn).
    const params = { model: server.model, max_tokens: 5, messages: [{ role: 'user' as const, content: 'Tell me a long story.' }] };
    const m = await client.messages.create({ ...params, ...seeded(3) } as Anthropic.MessageCreateParamsNonStreaming);
    assert.match(m.id, /^msg_/);
    assert.equal(m.type, 'message');
    assert.equal(m.role, 'assistant');
    assert.equal(m.model, server.model);
    assert.equal(m.stop_reason, 'max_tokens');
    assert.equal(m.stop_sequence, null);
    assert.equal(m.usage.output_tokens, 5);
    assert.equal(m.content.length, 1);
    assert.equal(m.content[0].type, 'text');
    assert.match(m._request_id ?? '', /^req_/);
    const prompt = m.usage.input_tokens + (m.usage.cache_read_input_tokens ?? 0);
    assert.ok(prompt > 0);
    assert.equal(m.usage.cache_creation_input_tokens, 0);
    const count = await client.messages.countTokens({ model: server.model, messages: params.messages });
    assert.equal(count.input_tokens, prompt, 'count_tokens counts the prompt the runtime evaluates (demo model: no template, a BOS token)');
    const task = await newestTask();
    assert.equal(task.id.replace(/^task_/, 'msg_'), m.id);
    assert.equal(task.task_runtime.route, 'anthropic_messages');
  });

  it('messages.stream(): the SDK accumulator takes the stream and its finalMessage is the non-streamed Message', async () => {
    const params = {
      model: server.model,
      max_tokens: 12,
      temperature: 1,
      messages: [{ role: 'user' as const, content: 'Hello there' }],
      ...seeded(42),
    };
    const stream = client.messages.stream(params as Anthropic.MessageStreamParams);
    const types: string[] = [];
    stream.on('streamEvent', (e) => types.push(e.type));
    const streamed = await stream.finalMessage();
    const plain = await client.messages.create(params as Anthropic.MessageCreateParamsNonStreaming);
    assert.equal(types[0], 'message_start');
    assert.equal(types.filter((t) => t === 'message_start').length, 1);
    assert.deepEqual(types.slice(-2), ['message_delta', 'message_stop']);
    assert.deepEqual(streamed.content, plain.content);
    assert.equal(streamed.stop_reason, plain.stop_reason);
    assert.equal(streamed.usage.output_tokens, plain.usage.output_tokens);
    const sum = (u: Anthropic.Usage) => u.input_tokens + (u.cache_read_input_tokens ?? 0);
    assert.equal(sum(streamed.usage), sum(plain.usage));
    assert.match(streamed.id, /^msg_/);
  });

  it('a forced tool call is a tool_use block (toolu_ id, object input, stop_reason tool_use); its tool_result is taken on the next turn', async () => {
    const first = await client.messages.create({
      model: server.model,
      max_tokens: 400,
      // Seeded: an unseeded forced call may draw an argument longer than its budget (tools.test.ts's flake).
      ...({ temperature: 1, ...seeded(7) } as object),
      tools: [WEATHER_TOOL],
      tool_choice: { type: 'tool', name: 'get_weather', disable_parallel_tool_use: true },
      messages: [{ role: 'user', content: 'Weather in Rome?' }],
    });
    assert.equal(first.stop_reason, 'tool_use');
    const uses = first.content.filter((b): b is Anthropic.ToolUseBlock => b.type === 'tool_use');
    assert.equal(uses.length, 1);
    assert.match(uses[0].id, /^toolu_[0-9A-Za-z]+$/);
    assert.equal(uses[0].name, 'get_weather');
    assert.equal(typeof (uses[0].input as { city: unknown }).city, 'string');
    const second = await client.messages.create({
      model: server.model,
      max_tokens: 4,
      tools: [WEATHER_TOOL],
      tool_choice: { type: 'none' },
      messages: [
        { role: 'user', content: 'Weather in Rome?' },
        { role: 'assistant', content: first.content },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: uses[0].id, content: 'not reachable', is_error: true }] },
      ],
    });
    assert.notEqual(second.stop_reason, 'tool_use');
  });

  it('beta.messages.create (?beta=true) and models.list / retrieve in Anthropic shape', async () => {
    const m = await client.beta.messages.create({
      model: server.model,
      max_tokens: 2,
      messages: [{ role: 'user', content: 'hi' }],
      betas: ['context-management-2025-06-27'],
    });
    assert.equal(m.type, 'message');
    const task = await newestTask();
    const full = await call(server, 'GET', `/tasks/${task.id}`);
    assert.equal(full.json.task_runtime.route, 'anthropic_messages');
    const models = await client.models.list();
    const ids = models.data.map((x) => x.id);
    assert.ok(ids.includes(server.model), JSON.stringify(ids));
    assert.equal(models.data[0].type, 'model');
    const one = await client.models.retrieve(server.model);
    assert.equal(one.id, server.model);
  });

  it('errors are typed: 401 AuthenticationError, 400 BadRequestError naming the field, 404 NotFoundError for an unknown model', async () => {
    const bad = new Anthropic({ baseURL: server.url, apiKey: 'wrong', maxRetries: 0 });
    await assert.rejects(bad.messages.create({ model: server.model, max_tokens: 1, messages: [{ role: 'user', content: 'x' }] }), (e: unknown) => {
      assert.ok(e instanceof Anthropic.AuthenticationError, String(e));
      assert.equal((e.error as any).error.type, 'authentication_error');
      assert.match(String(e.requestID), /^req_/);
      return true;
    });
    const image = { type: 'image' as const, source: { type: 'base64' as const, media_type: 'image/png' as const, data: 'AAAA' } };
    await assert.rejects(
      client.messages.create({ model: server.model, max_tokens: 1, messages: [{ role: 'user', content: [image] }] }),
      (e: unknown) => {
        assert.ok(e instanceof Anthropic.BadRequestError, String(e));
        assert.equal((e.error as any).error.type, 'invalid_request_error');
        assert.match(e.message, /messages\.0\.content\.0\.type/);
        return true;
      },
    );
    await assert.rejects(
      client.messages.create({
        model: server.model,
        messages: [{ role: 'user', content: 'x' }],
      } as unknown as Anthropic.MessageCreateParamsNonStreaming),
      (e: unknown) => {
        assert.ok(e instanceof Anthropic.BadRequestError, String(e));
        assert.match(e.message, /max_tokens/);
        return true;
      },
    );
    await assert.rejects(
      client.messages.create({ model: 'no-such-model', max_tokens: 1, messages: [{ role: 'user', content: 'x' }] }),
      (e: unknown) => {
        assert.ok(e instanceof Anthropic.NotFoundError, String(e));
        assert.equal((e.error as any).error.type, 'not_found_error');
        return true;
      },
    );
  });

  it('the attribution block is not in the prompt; a system message in the middle is folded into the user turn', async () => {
    const messages = [{ role: 'user' as const, content: 'hello' }];
    const system = [{ type: 'text' as const, text: 'You are terse.' }];
    const billing = { type: 'text' as const, text: 'x-anthropic-billing-header: cc_version=2.1.328.593; cc_entrypoint=sdk-cli;' };
    const without = await client.messages.countTokens({ model: server.model, system, messages });
    const withBlock = await client.messages.countTokens({ model: server.model, system: [billing, ...system], messages });
    assert.equal(withBlock.input_tokens, without.input_tokens);
    const a = await client.messages.create({ model: server.model, max_tokens: 1, system: [billing, ...system], messages });
    const b = await client.messages.create({ model: server.model, max_tokens: 1, system, messages });
    assert.equal(a.usage.input_tokens + (a.usage.cache_read_input_tokens ?? 0), b.usage.input_tokens + (b.usage.cache_read_input_tokens ?? 0));
    const folded = await client.messages.create({
      model: server.model,
      max_tokens: 1,
      messages: [{ role: 'user', content: 'hello' }, { role: 'system', content: 'Today is Monday.' } as unknown as Anthropic.MessageParam],
    });
    assert.equal(folded.type, 'message');
    const items = await inputItems((await newestTask()).response_id);
    assert.equal(items.length, 1, JSON.stringify(items));
    assert.equal(items[0].role, 'user');
    assert.deepEqual(
      items[0].content.map((c: any) => c.text),
      ['hello', 'Today is Monday.'],
    );
  });

  async function inputItems(responseId: string): Promise<any[]> {
    const r = await call(server, 'GET', `/responses/${responseId}/input_items?order=asc`);
    assert.equal(r.status, 200, r.text);
    return r.json.data;
  }

  it('a thinking block signed by this server gives its reasoning back; a forged signature is dropped, not refused', async () => {
    const seal = new ReasoningSeal(fs.readFileSync(path.join(server.dataDir, REASONING_KEY_FILE)));
    const turn = (signature: string): Anthropic.MessageParam[] => [
      { role: 'user', content: 'Think first.' },
      {
        role: 'assistant',
        content: [
          { type: 'thinking', thinking: '', signature },
          { type: 'text', text: 'Done.' },
        ],
      },
      { role: 'user', content: 'Again.' },
    ];
    await client.messages.create({ model: server.model, max_tokens: 1, messages: turn(seal.seal({ model: server.model, text: 'the hidden plan' })) });
    const kept = await inputItems((await newestTask()).response_id);
    const reasoning = kept.filter((i) => i.type === 'reasoning');
    assert.equal(reasoning.length, 1, JSON.stringify(kept));
    assert.equal(reasoning[0].content[0].text, 'the hidden plan');
    await client.messages.create({ model: server.model, max_tokens: 1, messages: turn('trs1.forged-signature') });
    const dropped = await inputItems((await newestTask()).response_id);
    assert.equal(dropped.filter((i) => i.type === 'reasoning').length, 0);
  });

  it('a client that aborts its stream cancels the task', async () => {
    const params = { model: server.model, max_tokens: 100_000, temperature: 0, messages: [{ role: 'user', content: 'write a long report' }] };
    const stream = client.messages.stream(params as Anthropic.MessageStreamParams);
    const settled = stream.finalMessage().catch((e: unknown) => e);
    await new Promise<void>((resolve) => stream.once('text', () => resolve()));
    const task = await newestTask();
    stream.abort();
    assert.ok((await settled) instanceof Anthropic.APIUserAbortError);
    const done = await waitForStatus(server, task.id, ['cancelled', 'succeeded', 'failed']);
    assert.equal(done.status, 'cancelled');
  });
});
