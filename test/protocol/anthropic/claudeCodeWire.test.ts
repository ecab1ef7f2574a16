// What Claude Code 2.1.328 really sends (ANTHROPIC-WIRE §2, a captured request's shape), over raw HTTP so that every
// header and byte is as it sends them: the HEAD /api/hello probe, then a streamed POST /v1/messages?beta=true with
// Bearer auth and `accept: application/json`, the attribution block, a trailing system message, deferred tools with
// `$schema`, adaptive thinking, context_management and a 32000 max_tokens. Also the /v1 layout for OpenAI clients
// (the LMSP door's routes under /v1) and x-api-key on every door.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import OpenAI from 'openai';
import { call, removeDir, startServer, type Server } from '../lmsp/harness';

/** One request outside /lmsp/v1 (the harness's `call` is relative to it): token A as Bearer unless `token` says otherwise. */
async function raw(
  server: Server,
  method: string,
  p: string,
  opts: { token?: string | null; body?: unknown; headers?: Record<string, string> } = {},
) {
  const headers: Record<string, string> = { ...opts.headers };
  const token = opts.token === undefined ? server.tokenA : opts.token;
  if (token !== null) headers.authorization = `Bearer ${token}`;
  if (opts.body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(server.url + p, { method, headers, body: opts.body === undefined ? undefined : JSON.stringify(opts.body) });
  const text = await res.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: Object.fromEntries(res.headers), text, json };
}

/** SSE frames of a body: each frame's `event:` name and parsed `data:`. */
function frames(text: string): Array<{ event: string | undefined; data: any }> {
  return text
    .split('\n\n')
    .filter((f) => f.trim() !== '')
    .map((f) => {
      const lines = f.split('\n');
      const event = lines.find((l) => l.startsWith('event: '))?.slice(7);
      const data = lines
        .filter((l) => l.startsWith('data: '))
        .map((l) => l.slice(6))
        .join('\n');
      return { event, data: JSON.parse(data) };
    });
}

function claudeCodeBody(model: string): Record<string, unknown> {
  const schema = (props: Record<string, unknown>) => ({
    $schema: 'https://json-schema.org/draft/2020-12/schema',
    type: 'object',
    properties: props,
    additionalProperties: false,
  });
  return {
    model,
    max_tokens: 32000,
    stream: true,
    system: [
      { type: 'text', text: 'x-anthropic-billing-header: cc_version=2.1.328.593; cc_entrypoint=sdk-cli;' },
      { type: 'text', text: "You are a Claude agent, built on Anthropic's Claude Agent SDK.", cache_control: { type: 'ephemeral' } },
      { type: 'text', text: 'You help with software tasks.', cache_control: { type: 'ephemeral' } },
    ],
    messages: [
      {
        role: 'user',
        content: [
          { type: 'text', text: '<system-reminder>context</system-reminder>' },
          { type: 'text', text: 'List the files.' },
        ],
      },
      { role: 'system', content: [{ type: 'text', text: 'Environment: cwd /tmp, today 2026-08-20.', cache_control: { type: 'ephemeral' } }] },
    ],
    tools: [
      {
        name: 'Bash',
        description: 'Runs a command',
        input_schema: schema({ command: { type: 'string', maxLength: 200 }, timeout: { type: 'number', exclusiveMinimum: 0 } }),
      },
      { name: 'Read', description: 'Reads a file', input_schema: schema({ file_path: { type: 'string' } }) },
      { name: 'DeferredToolPlaceholder', defer_loading: true, input_schema: {} },
    ],
    thinking: { type: 'adaptive', display: 'omitted' },
    context_management: { edits: [{ type: 'clear_thinking_20251015', keep: 'all' }] },
    output_config: { effort: 'medium' },
    metadata: { user_id: JSON.stringify({ device_id: 'f'.repeat(64), account_uuid: '', session_id: '5b0a2d1e-0000-4000-8000-000000000000' }) },
  };
}

describe('Claude Code on the Anthropic door (raw HTTP)', () => {
  let server: Server;
  before(async () => {
    server = await startServer();
  });
  after(async () => {
    assert.equal(await server.stop(), 0);
    removeDir(server.dataDir);
  });

  it('HEAD /api/hello answers 200 without a body or a token', async () => {
    for (const p of ['/api/hello', '/']) {
      const r = await raw(server, 'HEAD', p, { token: null });
      assert.equal(r.status, 200, p);
      assert.equal(r.text, '');
    }
  });

  it("Claude Code's streamed request is a 200 SSE stream of named events ending with message_stop, recorded on its task", async () => {
    const headers = {
      accept: 'application/json',
      'anthropic-version': '2023-06-01',
      'anthropic-beta': 'claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27',
      'anthropic-dangerous-direct-browser-access': 'true',
      'x-app': 'cli',
      'x-claude-code-session-id': '5b0a2d1e-0000-4000-8000-000000000000',
    };
    const r = await raw(server, 'POST', '/v1/messages?beta=true', { body: claudeCodeBody(server.model), headers });
    assert.equal(r.status, 200, r.text);
    assert.match(String(r.headers['content-type']), /^text\/event-stream/);
    assert.match(String(r.headers['request-id']), /^req_/);
    const events = frames(r.text);
    assert.ok(
      events.every((e) => e.event === e.data.type),
      'every frame has its event: line',
    );
    const types = events.map((e) => e.event).filter((t) => t !== 'ping');
    assert.equal(types[0], 'message_start');
    assert.deepEqual(types.slice(-2), ['message_delta', 'message_stop']);
    // Blocks start 0, 1, 2… and each closes before the next opens.
    let open: number | undefined;
    let next = 0;
    for (const e of events) {
      if (e.event === 'content_block_start') {
        assert.equal(open, undefined);
        assert.equal(e.data.index, next);
        open = next++;
      } else if (e.event === 'content_block_delta') assert.equal(e.data.index, open);
      else if (e.event === 'content_block_stop') {
        assert.equal(e.data.index, open);
        open = undefined;
      }
    }
    const task = (await call(server, 'GET', '/tasks?limit=1')).json.data[0];
    assert.equal(task.task_runtime.route, 'anthropic_messages');
    const items = (await call(server, 'GET', `/responses/${task.response_id}/input_items?order=asc`)).json.data;
    assert.equal(items.length, 1, 'the trailing system message is folded into the user turn');
    assert.deepEqual(
      items[0].content.map((c: any) => c.text),
      ['<system-reminder>context</system-reminder>', 'List the files.', 'Environment: cwd /tmp, today 2026-08-20.'],
    );
    const stored = (await call(server, 'GET', `/responses/${task.response_id}`)).json;
    assert.ok(!stored.instructions.includes('x-anthropic-billing-header'));
    assert.deepEqual(
      stored.tools.map((t: any) => t.name),
      ['Bash', 'Read'],
      'a defer_loading tool is not shown to the model',
    );
    // exclusiveMinimum cannot be enforced by the call grammar: dropped, the rest of the schema kept.
    assert.deepEqual(stored.tools[0].parameters.properties.timeout, { type: 'number' });
    assert.deepEqual(stored.tools[0].parameters.properties.command, { type: 'string', maxLength: 200 });
  });

  it('errors on /v1/messages are Anthropic envelopes, the listener’s own 401 and 404 included', async () => {
    const unauthorized = await raw(server, 'POST', '/v1/messages', { token: 'nope', body: { model: server.model } });
    assert.equal(unauthorized.status, 401);
    assert.equal(unauthorized.json.type, 'error');
    assert.equal(unauthorized.json.error.type, 'authentication_error');
    assert.match(unauthorized.json.request_id, /^req_/);
    const missing = await raw(server, 'POST', '/v1/messages/batches', { body: {} });
    assert.equal(missing.status, 404);
    assert.equal(missing.json.error.type, 'not_found_error');
    const tooMany = await raw(server, 'POST', '/v1/messages', {
      body: { model: server.model, max_tokens: 1, stop_sequences: ['a', 'b', 'c', 'd', 'e'], messages: [{ role: 'user', content: 'x' }] },
    });
    assert.equal(tooMany.status, 400);
    assert.match(tooMany.json.error.message, /stop_sequences/);
    const prefill = await raw(server, 'POST', '/v1/messages', {
      body: {
        model: server.model,
        max_tokens: 1,
        messages: [
          { role: 'user', content: 'x' },
          { role: 'assistant', content: '{' },
        ],
      },
    });
    assert.equal(prefill.status, 400);
    assert.match(prefill.json.error.message, /^messages\.1: .*prefill/);
  });

  it('/v1 is an OpenAI base URL too: chat completions and models through the LMSP door; x-api-key works on every door', async () => {
    const openai = new OpenAI({ apiKey: server.tokenA, baseURL: `${server.url}/v1`, maxRetries: 0 });
    const models = await openai.models.list();
    assert.ok(models.data.some((m) => m.id === server.model));
    const c = await openai.chat.completions.create({ model: server.model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 });
    assert.equal(c.object, 'chat.completion');
    const lmsp = await call(server, 'GET', '/models', { token: null, headers: { 'x-api-key': server.tokenA } });
    assert.equal(lmsp.status, 200);
    const anthropicList = await raw(server, 'GET', '/v1/models', { token: null, headers: { 'x-api-key': server.tokenA } });
    assert.equal(anthropicList.status, 200);
    assert.equal(anthropicList.json.data[0].type, 'model');
    assert.equal(anthropicList.json.has_more, false);
  });
});
