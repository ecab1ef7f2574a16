// The MCP `embed` tool (issue 41 item 1) in both eras, against an in-process listener with the real runtime and the
// tiny generated model: 2025-11-25 through the SDK's real Client, 2026-07-28 through the raw modern client. The vectors
// come in structuredContent (equal to what POST /lmsp/v1/embeddings gives for the same texts, normalized, in order);
// the text content only says how many of what size. Refusals are JSON-RPC -32602 naming the argument (unknown model,
// an empty text, a text longer than the model embeds, an unknown argument); asking for a task is -32601; no task is
// made.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { CreateTaskResultSchema, ErrorCode } from '@modelcontextprotocol/sdk/types.js';
import { connect, MODEL_ID, rpcError, startInProcess, TOKENS, type InProcessServer } from './harness';
import { ModernClient } from './modernClient';

interface Embedded {
  model: string;
  dimensions: number;
  data: Array<{ index: number; embedding: number[] }>;
  usage: { prompt_tokens: number; total_tokens: number };
}

describe('MCP embed tool', () => {
  let server: InProcessServer;
  let alice: Client;
  let modern: ModernClient;

  before(async () => {
    server = await startInProcess();
    alice = await connect(server.mcpUrl, TOKENS.alice);
    modern = new ModernClient(server.mcpUrl, TOKENS.alice, false);
  });
  after(async () => {
    await alice?.close();
    await server?.close();
  });

  /** The same texts through the OpenAI-style route of the same runtime. */
  async function viaRoute(input: string[]): Promise<{ data: Array<{ embedding: number[] }>; usage: { prompt_tokens: number } }> {
    const r = await fetch(`${server.url}/lmsp/v1/embeddings`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKENS.alice}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL_ID, input, encoding_format: 'float' }),
    });
    assert.equal(r.status, 200);
    return (await r.json()) as { data: Array<{ embedding: number[] }>; usage: { prompt_tokens: number } };
  }

  test('2025-11-25: a list of texts → vectors in structuredContent, in order, equal to the embeddings route', async () => {
    const input = ['first text', 'a second, longer text'];
    const r = await alice.callTool({ name: 'embed', arguments: { model: MODEL_ID, input } });
    assert.equal(r.isError, undefined);
    const s = r.structuredContent as unknown as Embedded;
    assert.equal(s.model, MODEL_ID);
    assert.ok(s.dimensions > 0);
    assert.deepEqual(
      s.data.map((d) => d.index),
      [0, 1],
    );
    for (const d of s.data) {
      assert.equal(d.embedding.length, s.dimensions);
      assert.ok(Math.abs(Math.hypot(...d.embedding) - 1) < 1e-5);
    }
    const route = await viaRoute(input);
    assert.deepEqual(
      s.data.map((d) => d.embedding),
      route.data.map((d) => d.embedding),
    );
    assert.equal(s.usage.prompt_tokens, route.usage.prompt_tokens);
    assert.equal(s.usage.total_tokens, s.usage.prompt_tokens);
    const text = (r.content as Array<{ type: string; text: string }>)[0].text;
    assert.match(text, new RegExp(`^2 vectors of ${s.dimensions} dimensions from ${MODEL_ID}`));
    assert.ok(text.length < 200, 'the vectors are not repeated as text');
  });

  test('2025-11-25: one text (default model) → one vector; no task is made', async () => {
    const r = await alice.callTool({ name: 'embed', arguments: { input: 'first text' } });
    const s = r.structuredContent as unknown as Embedded;
    assert.equal(s.data.length, 1);
    assert.deepEqual(s.data[0].embedding, (await viaRoute(['first text'])).data[0].embedding);
    assert.match((r.content as Array<{ text: string }>)[0].text, /^1 vector of /);
    assert.equal(server.runtime.listTasks({ principal: 'alice', limit: 10 }).tasks.length, 0);
  });

  const refused: Array<[string, Record<string, unknown>, RegExp, { param?: string; code?: string }]> = [
    ['an unknown model', { model: 'no-such-model', input: 'x' }, /not available/, { code: 'model_not_found', param: 'model' }],
    ['an empty text', { input: ['a', ''] }, /input\.1/, {}],
    ['no input', {}, /input/, {}],
    ['an unknown argument', { input: 'a', dimensions: 3 }, /dimensions/, {}],
    [
      'a text longer than the model embeds',
      { input: ['ok', 'word '.repeat(5000)] },
      /embeds at most/,
      { code: 'context_length_exceeded', param: 'input.1' },
    ],
  ];
  for (const [what, args, message, data] of refused) {
    test(`2025-11-25: ${what} → -32602`, async () => {
      const e = await rpcError(alice.callTool({ name: 'embed', arguments: args }));
      assert.equal(e.code, ErrorCode.InvalidParams);
      assert.match(e.message, message);
      if (data.code) assert.deepEqual(e.data, data);
    });
  }

  test('2025-11-25: embed as a task → -32601 (taskSupport forbidden)', async () => {
    const e = await rpcError(
      alice.request({ method: 'tools/call', params: { name: 'embed', arguments: { input: 'x' }, task: {} } }, CreateTaskResultSchema),
    );
    assert.equal(e.code, ErrorCode.MethodNotFound);
  });

  test('2026-07-28: the same vectors, resultType complete; refusals -32602 naming the argument', async () => {
    const r = await modern.result('tools/call', { name: 'embed', arguments: { input: ['first text'] } });
    assert.equal(r.resultType, 'complete');
    assert.deepEqual(r.structuredContent.data[0].embedding, (await viaRoute(['first text'])).data[0].embedding);
    assert.match(r.content[0].text, /^1 vector of \d+ dimensions/);
    const bad = await modern.request('tools/call', { name: 'embed', arguments: { input: ['ok', 'word '.repeat(5000)] } });
    assert.equal(bad.body.error.code, ErrorCode.InvalidParams, JSON.stringify(bad.body));
    assert.deepEqual(bad.body.error.data, { code: 'context_length_exceeded', param: 'input.1' });
    const unknown = await modern.request('tools/call', { name: 'embed', arguments: { model: 'no-such-model', input: 'x' } });
    assert.equal(unknown.body.error.code, ErrorCode.InvalidParams);
    assert.equal(unknown.body.error.data.code, 'model_not_found');
  });
});
