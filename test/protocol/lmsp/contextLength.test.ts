// A prompt plus the caller's max_output_tokens that cannot fit the context is 400 context_length_exceeded at create
// on every door, in each door's own form, naming the field (issue #19 item 4): LMSP /responses and /tasks (problem,
// param max_output_tokens / input.max_output_tokens), chat completions (OpenAI error object, param max_tokens or
// max_completion_tokens), MCP (-32602, data.code and data.param). Before the model is loaded, a budget as large as
// the context's bound is refused the same way and a closer one fails the task when it starts; once loaded, the
// boundary is exact. A default budget (the MCP tools') is not refused for its size: it is capped to the room.
// One in-process server (LMSP and MCP doors on the real runtime), the slow demo model, --context-size 512; and a
// real `serve` with --context-size auto, whose trained context comes from the model file's header at startup.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { connect, rpcError, startInProcess, TOKENS, type InProcessServer } from '../mcp/harness';
import { call, removeDir, startServer, type CallResult } from './harness';
import { until } from '../../support/wait';

const CONTEXT = 512;

describe('prompt + max_output_tokens beyond the context: 400 context_length_exceeded on every door', () => {
  let s: InProcessServer;
  let lmsp: { port: number; tokenA: string };
  let mcp: Awaited<ReturnType<typeof connect>>;
  before(async () => {
    s = await startInProcess({ contextSize: CONTEXT });
    lmsp = { port: Number(new URL(s.url).port), tokenA: TOKENS.alice };
    mcp = await connect(s.mcpUrl, TOKENS.alice);
  });
  after(async () => {
    await mcp?.close();
    await s?.close();
  });

  const problem = (r: CallResult, param: string) => {
    assert.equal(r.status, 400, r.text);
    assert.match(String(r.headers['content-type']), /^application\/problem\+json/);
    assert.deepEqual([r.json.code, r.json.param], ['context_length_exceeded', param], r.text);
  };
  const chatError = (r: CallResult, param: string) => {
    assert.equal(r.status, 400, r.text);
    assert.deepEqual(
      r.json.error && [r.json.error.type, r.json.error.code, r.json.error.param],
      ['invalid_request_error', 'context_length_exceeded', param],
      r.text,
    );
  };
  const responses = (over: Record<string, unknown>) => call(lmsp, 'POST', '/responses', { body: { model: 'test-256', input: 'x', ...over } });
  const tasks = (over: Record<string, unknown>) =>
    call(lmsp, 'POST', '/tasks', { body: { type: 'response', input: { model: 'test-256', input: 'x', ...over } } });
  const chat = (over: Record<string, unknown>) =>
    call(lmsp, 'POST', '/chat/completions', { body: { model: 'test-256', messages: [{ role: 'user', content: 'x' }], ...over } });
  const mcpRefusal = async (max: number) => {
    const e = await rpcError(mcp.callTool({ name: 'generate', arguments: { prompt: 'x', max_output_tokens: max } }));
    assert.equal(e.code, -32602, e.message);
    assert.deepEqual(e.data, { code: 'context_length_exceeded', param: 'max_output_tokens' });
  };

  it('before the model is loaded: a budget of the whole context is refused at create, a closer one fails at start', async () => {
    problem(await responses({ max_output_tokens: CONTEXT }), 'max_output_tokens');
    problem(await tasks({ max_output_tokens: CONTEXT }), 'input.max_output_tokens');
    chatError(await chat({ max_tokens: CONTEXT }), 'max_tokens');
    chatError(await chat({ max_completion_tokens: 5000 }), 'max_completion_tokens');
    await mcpRefusal(CONTEXT);
    const models = await call(lmsp, 'GET', '/models');
    assert.equal(models.json.data[0].task_runtime.context_length, null, `not loaded yet: ${models.text}`);
    assert.equal(models.json.data[0].max_context_length, 2048, 'the trained context, from the file header');
    assert.equal((await call(lmsp, 'GET', '/tasks')).json.data.length, 0, 'nothing was stored');
    // The prompt's tokens are not known before the load: accepted, then the task fails before generating.
    const created = await tasks({ max_output_tokens: CONTEXT - 1 });
    assert.equal(created.status, 202, created.text);
    const failed = await until(async () => {
      const r = await call(lmsp, 'GET', `/tasks/${created.json.id}`);
      return r.json.status === 'failed' && r.json;
    }, 'the task to fail at start');
    assert.equal(failed.error.code, 'context_length_exceeded', JSON.stringify(failed.error));
    assert.match(failed.error.detail, /context is 512 tokens; the input is \d+ tokens and the output budget 511/);
  });

  it('loaded: exact to the token on every door; a default budget (MCP) and task_runtime.cap_max_output_tokens are capped', async () => {
    // generate's default budget is 512, the whole context: not refused, the output ends where the context does.
    const r = await mcp.callTool({ name: 'generate', arguments: { prompt: 'x', temperature: 0 } });
    const sc = r.structuredContent as { usage: { input_tokens: number; output_tokens: number } };
    assert.equal(r.isError, false, JSON.stringify(r));
    const room = CONTEXT - sc.usage.input_tokens;
    assert.equal(sc.usage.output_tokens, room, 'capped to the room');

    problem(await responses({ max_output_tokens: room + 1 }), 'max_output_tokens');
    problem(await tasks({ max_output_tokens: room + 1 }), 'input.max_output_tokens');
    chatError(await chat({ max_tokens: room + 1 }), 'max_tokens');
    await mcpRefusal(room + 1);
    const refusal = await responses({ max_output_tokens: room + 1 });
    assert.match(refusal.json.detail, new RegExp(`context is ${CONTEXT} tokens; the input is ${sc.usage.input_tokens} tokens`));

    const fits = await tasks({ max_output_tokens: room, temperature: 0 });
    assert.equal(fits.status, 202, fits.text);
    const upTo = await tasks({ max_output_tokens: 100_000, temperature: 0, task_runtime: { cap_max_output_tokens: true } });
    assert.equal(upTo.status, 202, upTo.text);
    for (const id of [fits.json.id, upTo.json.id]) {
      const done = await until(async () => {
        const t = await call(lmsp, 'GET', `/tasks/${id}`);
        return t.json.status === 'succeeded' && t.json;
      }, `task ${id} to succeed`);
      const response = done.response;
      assert.deepEqual([response.status, response.usage.output_tokens], ['incomplete', room], JSON.stringify(response.usage));
    }
  });
});

describe('serve --context-size auto, before any load', () => {
  it("bounds the context by the model file's trained context: a budget of all of it is 400 at create", async () => {
    const server = await startServer();
    try {
      const models = await call(server, 'GET', '/models');
      assert.deepEqual([models.json.data[0].max_context_length, models.json.data[0].task_runtime.context_length], [2048, null], models.text);
      const r = await call(server, 'POST', '/responses', { body: { model: server.model, input: 'x', max_output_tokens: 2048 } });
      assert.equal(r.status, 400, r.text);
      assert.deepEqual([r.json.code, r.json.param], ['context_length_exceeded', 'max_output_tokens']);
    } finally {
      assert.equal(await server.stop(), 0);
      removeDir(server.dataDir);
    }
  });
});
