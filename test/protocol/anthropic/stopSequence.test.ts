// A stop sequence told back through the Messages door: the unmodified `@anthropic-ai/sdk` against the real `serve`
// process on the demo model. Anthropic clients (Claude Code, the SDK) read `stop_reason: "stop_sequence"` and the
// `stop_sequence` string; the runtime keeps which of the request's strings ended the output on the stored response
// (`task_runtime.stop_sequence`), so it reads the same in the Message, in the stream's message_delta, on
// /responses and after a restart; chat completions keeps `finish_reason: "stop"`. The stop string is cut from the
// text a seeded generation really produces, so the same seed reaches it again.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import { call, removeDir, startServer, type Server } from '../lmsp/harness';

/** A body member the SDK passes through: the runtime's vendor sampling (a seed makes the text repeatable). */
const seeded = { task_runtime: { seed: 42 } } as Record<string, unknown>;
const textOf = (m: Anthropic.Message) => m.content.map((b) => (b.type === 'text' ? b.text : '')).join('');

describe('Anthropic Messages door: stop_sequence', () => {
  let server: Server;
  let client: Anthropic;
  let full = '';
  let stop = '';
  const params = (stopSequences?: string[]) =>
    ({
      model: server.model,
      max_tokens: 40,
      temperature: 1,
      messages: [{ role: 'user' as const, content: 'Tell me a story.' }],
      ...(stopSequences ? { stop_sequences: stopSequences } : {}),
      ...seeded,
    }) as Anthropic.MessageCreateParamsNonStreaming;

  before(async () => {
    server = await startServer();
    client = new Anthropic({ baseURL: server.url, authToken: server.tokenA, apiKey: null, maxRetries: 0 });
    full = textOf(await client.messages.create(params()));
    assert.ok(full.length >= 16, `the seeded output is too short to cut a stop string from: ${JSON.stringify(full)}`);
    stop = full.slice(10, 14);
  });
  after(async () => {
    assert.equal(await server.stop(), 0);
    removeDir(server.dataDir);
  });

  it('messages.create: stop_reason "stop_sequence" with the string that matched, the text before it', async () => {
    const m = await client.messages.create(params(['\u0001never', stop]));
    assert.equal(m.stop_reason, 'stop_sequence');
    assert.equal(m.stop_sequence, stop);
    assert.equal(textOf(m), full.slice(0, full.indexOf(stop)));
  });

  it('messages.stream(): message_delta carries them and finalMessage has them', async () => {
    const stream = client.messages.stream(params([stop]) as unknown as Anthropic.MessageStreamParams);
    const deltas: Anthropic.RawMessageDeltaEvent[] = [];
    stream.on('streamEvent', (e) => {
      if (e.type === 'message_delta') deltas.push(e);
    });
    const m = await stream.finalMessage();
    assert.equal(deltas.length, 1);
    assert.deepEqual(deltas[0].delta, { stop_reason: 'stop_sequence', stop_sequence: stop });
    assert.equal(m.stop_reason, 'stop_sequence');
    assert.equal(m.stop_sequence, stop);
    assert.equal(textOf(m), full.slice(0, full.indexOf(stop)));
  });

  it('stop sequences the output never contains: no stop_sequence, in the Message and in the stream', async () => {
    const absent = ['\u0001never', `${stop}\u0002`];
    const m = await client.messages.create(params(absent));
    assert.notEqual(m.stop_reason, 'stop_sequence');
    assert.equal(m.stop_sequence, null);
    assert.equal(textOf(m), full);
    const streamed = await client.messages.stream(params(absent) as unknown as Anthropic.MessageStreamParams).finalMessage();
    assert.notEqual(streamed.stop_reason, 'stop_sequence');
    assert.equal(streamed.stop_sequence, null);
  });

  it('/responses shows task_runtime.stop_sequence (absent without a match), also after a restart; chat completions says "stop"', async () => {
    const m = await client.messages.create(params([stop]));
    const taskId = m.id.replace(/^msg_/, 'task_');
    const task = (await call(server, 'GET', `/tasks/${taskId}`)).json;
    assert.deepEqual(task.response.task_runtime, { stop_sequence: stop });
    const responseId = task.response.id as string;
    const plain = (await call(server, 'GET', `/tasks/${(await client.messages.create(params())).id.replace(/^msg_/, 'task_')}`)).json;
    assert.equal(plain.response.task_runtime, undefined, 'no stop string matched: no vendor member');

    const chat = await call(server, 'POST', '/chat/completions', {
      body: {
        model: server.model,
        max_tokens: 40,
        temperature: 1,
        seed: 42,
        stop: [stop],
        messages: [{ role: 'user', content: 'Tell me a story.' }],
      },
    });
    assert.equal(chat.status, 200, chat.text);
    assert.equal(chat.json.choices[0].message.content, full.slice(0, full.indexOf(stop)), 'the stop string ended it');
    assert.equal(chat.json.choices[0].finish_reason, 'stop');

    const dataDir = server.dataDir;
    assert.equal(await server.stop(), 0);
    server = await startServer({ dataDir });
    const again = await call(server, 'GET', `/responses/${responseId}`);
    assert.equal(again.status, 200, again.text);
    assert.deepEqual(again.json.task_runtime, { stop_sequence: stop });
    client = new Anthropic({ baseURL: server.url, authToken: server.tokenA, apiKey: null, maxRetries: 0 });
  });
});
