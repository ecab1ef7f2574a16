// Durable tasks on a real engine: llama.cpp's own llama-server (same llama.cpp source node-llama-cpp ships, built
// once by scripts/remote-engine/prepare.mjs), behind `task-runtime serve --engine`. LMSP and MCP tasks run on it;
// cancel closes the HTTP stream and the engine frees its slot; SIGKILL of the serving engine mid-stream sends an
// on_restart "retry" task to the other engine of the pool; two engines in a pool share the load; a prompt longer than
// the context is context_length_exceeded; kind llama.cpp offers on_restart "resume" (assistant prefill).
// Run with: node scripts/remote-engine/run.mjs (builds llama-server on first use, then runs this suite).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { startLlamaServer, type LlamaServer } from '../fixtures/llamaServer';
import { lmspWaitTerminal, startServe, type Serve } from '../fixtures/serveProcess';
import { sseFrames } from '../fixtures/sse';
import { connect } from '../protocol/mcp/harness';

async function until<T>(what: string, fn: () => Promise<T | undefined> | T | undefined, timeoutMs = 120_000): Promise<T> {
  const start = Date.now();
  for (;;) {
    const v = await fn();
    if (v !== undefined && v !== false) return v as T;
    if (Date.now() - start > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const longTask = (model: string, onRestart = 'fail') => ({
  type: 'response',
  input: { model, input: 'Write for a long time.', max_output_tokens: 6000, temperature: 0 },
  on_restart: onRestart,
});

describe('a llama.cpp server as a remote engine', () => {
  let a: LlamaServer;
  let b: LlamaServer;
  let serve: Serve;
  before(async () => {
    [a, b] = await Promise.all([startLlamaServer(), startLlamaServer()]);
    serve = await startServe([
      '--engine', `one=${a.base}`,
      '--engine', `pool=${a.base},${b.base}`,
      '--engine', `rpool=${a.base},${b.base}`,
      '--engine-kind', 'rpool=llama.cpp',
    ]);
  });
  after(async () => {
    await serve?.stop();
    await Promise.all([a?.kill(), b?.kill()]);
  });

  it('lists its model as NAME/alias with the context it reports, and one slot per --parallel', async () => {
    const models = (await serve.lmspCall('GET', '/models')).json.data as Array<{ id: string; max_context_length: number; state: string }>;
    assert.deepEqual(models.map((m) => [m.id, m.state]), [['one/tiny', 'loaded'], ['pool/tiny', 'loaded'], ['rpool/tiny', 'loaded']]);
    assert.equal(models[0].max_context_length, 8192);
    assert.match(serve.stderr(), /engine one: http:\/\/127\.0\.0\.1:\d+\/v1 up, 1 model\(s\), concurrency 1, kind openai, resume not offered; looks like llama\.cpp server: --engine-kind one=llama\.cpp/);
    assert.match(serve.stderr(), /engine rpool: http:\/\/127\.0\.0\.1:\d+\/v1 up, 1 model\(s\), concurrency 1, kind llama\.cpp, resume offered\n/);
  });

  it('a prompt longer than the context fails the task with context_length_exceeded and the engine\'s words', async () => {
    const created = await serve.lmspCall('POST', '/tasks', { type: 'response', input: { model: 'one/tiny', input: 'x'.repeat(9000), max_output_tokens: 4 } });
    assert.equal(created.status, 202, JSON.stringify(created.json));
    const done = await lmspWaitTerminal(serve, created.json.id);
    assert.equal(done.status, 'failed');
    assert.equal(done.error.code, 'context_length_exceeded', JSON.stringify(done.error));
    assert.match(done.error.detail, /exceeds the available context size \(8192 tokens\)/);
  });

  it('an LMSP task streams from it and ends incomplete at max_output_tokens with its usage', async () => {
    const created = await serve.lmspCall('POST', '/tasks', { type: 'response', input: { model: 'one/tiny', input: 'Hello', max_output_tokens: 40, temperature: 0 } });
    assert.equal(created.status, 202, JSON.stringify(created.json));
    const done = await lmspWaitTerminal(serve, created.json.id);
    assert.equal(done.status, 'succeeded', JSON.stringify(done.error));
    assert.equal(done.response.status, 'incomplete');
    assert.equal(done.response.usage.output_tokens, 40);
    assert.ok(done.response.usage.input_tokens > 0);
    assert.ok(done.response.output[0].content[0].text.length > 0);
  });

  it('an MCP generate call runs on it', async () => {
    const client = await connect(serve.mcpUrl, serve.token);
    try {
      const r = await client.callTool({ name: 'generate', arguments: { model: 'one/tiny', prompt: 'Hi', max_output_tokens: 12, temperature: 0 } }, CallToolResultSchema);
      assert.equal(r.isError, false, JSON.stringify(r.content));
      assert.equal((r.structuredContent as { outputTokens: number }).outputTokens, 12);
    } finally {
      await client.close();
    }
  });

  it('cancel aborts the stream and the engine frees its slot', async () => {
    const created = await serve.lmspCall('POST', '/tasks', longTask('one/tiny'));
    const id = created.json.id as string;
    await until('output', async () => (await serve.lmspCall('GET', `/tasks/${id}`)).json.task_runtime.output_tokens > 5);
    assert.equal((await a.slots())[0].is_processing, true);
    const cancelled = await serve.lmspCall('POST', `/tasks/${id}/cancel`);
    assert.ok([200, 202].includes(cancelled.status), JSON.stringify(cancelled.json));
    const done = await lmspWaitTerminal(serve, id);
    assert.equal(done.status, 'cancelled');
    await until('the slot to free', async () => ((await a.slots())[0].is_processing ? undefined : true));
    const tokens = done.task_runtime.output_tokens as number;
    assert.ok(tokens < 6000, `stopped early (${tokens} tokens)`);
  });

  it('two engines in a pool share the load', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 2; i++) ids.push((await serve.lmspCall('POST', '/tasks', longTask('pool/tiny'))).json.id);
    await until('both engines busy', async () => ((await a.slots())[0].is_processing && (await b.slots())[0].is_processing ? true : undefined));
    for (const id of ids) await serve.lmspCall('POST', `/tasks/${id}/cancel`);
    for (const id of ids) assert.equal((await lmspWaitTerminal(serve, id)).status, 'cancelled');
  });

  it('SIGKILL of the serving engine mid-stream: an on_restart "retry" task runs again on the other one', async () => {
    const created = await serve.lmspCall('POST', '/tasks', { ...longTask('pool/tiny', 'retry'), input: { model: 'pool/tiny', input: 'Go on.', max_output_tokens: 400, temperature: 0 } });
    const id = created.json.id as string;
    await until('output', async () => (await serve.lmspCall('GET', `/tasks/${id}`)).json.task_runtime.output_tokens > 0);
    const serving = (await a.slots())[0].is_processing ? a : b;
    const other = serving === a ? b : a;
    await serving.kill('SIGKILL');
    const done = await lmspWaitTerminal(serve, id);
    assert.equal(done.status, 'succeeded', JSON.stringify(done.error));
    assert.equal(done.task_runtime.attempt, 2);
    assert.equal(done.response.usage.output_tokens, 400);
    assert.match(serve.stderr(), new RegExp(`127\\.0\\.0\\.1:${serving.port}\\)\\: taken out of the pool`));
    assert.equal((await other.slots())[0].is_processing, false);
    // Bring the killed engine back on its port for the next test; the pool probes it back in.
    const back = await startLlamaServer({ port: serving.port });
    if (serving === a) a = back;
    else b = back;
  });

  it('SIGKILL mid-stream with on_restart "resume" on an engine that continues: the same output item goes on elsewhere', async () => {
    // The uninterrupted greedy answer: a run started afresh would begin with it again; a continuation does not.
    // (It need not reproduce the rest exactly: the engine re-tokenizes the delivered text and its chat template
    // renders the open assistant message its own way; measured here, the two diverge after the resume point.)
    const ref = await serve.lmspCall('POST', '/tasks', { type: 'response', input: { model: 'one/tiny', input: 'Go on.', max_output_tokens: 400, temperature: 0 } });
    const reference = (await lmspWaitTerminal(serve, ref.json.id)).response.output[0].content[0].text as string;
    const created = await serve.lmspCall('POST', '/tasks', {
      type: 'response',
      input: { model: 'rpool/tiny', input: 'Go on.', max_output_tokens: 400, temperature: 0 },
      on_restart: 'resume',
    });
    assert.equal(created.status, 202, JSON.stringify(created.json));
    const id = created.json.id as string;
    const res = await fetch(`${serve.lmsp}/tasks/${id}/events`, { headers: { authorization: `Bearer ${serve.token}` } });
    let text = '';
    let created_ = 0;
    let killed: LlamaServer | undefined;
    let terminal = '';
    let delivered: string | undefined;
    for await (const frame of sseFrames(res.body)) {
      const type = frame.event;
      const ev = JSON.parse(frame.data);
      if (type === 'response.created') created_++;
      if (type === 'response.output_text.delta') text += ev.delta;
      if (type === 'task_runtime:task.status' && ev.task.status === 'queued' && delivered === undefined) delivered = text;
      if (type === 'response.completed' || type === 'response.incomplete' || type === 'response.failed') {
        terminal = type;
        break;
      }
      if (!killed && text.length >= 20) {
        killed = (await a.slots())[0].is_processing ? a : b;
        await killed.kill('SIGKILL');
      }
    }
    assert.ok(killed, 'an engine was killed mid-stream');
    assert.equal(terminal, 'response.incomplete');
    const done = await lmspWaitTerminal(serve, id);
    assert.equal(done.task_runtime.attempt, 1, 'resumed, not retried');
    assert.equal(created_, 1);
    assert.equal(done.response.output[0].content[0].text, text, 'the whole text once, in one output item');
    assert.equal(done.response.usage.output_tokens, 400);
    assert.ok(delivered !== undefined && delivered.length >= 20, 'the task went back to the queue after text was delivered');
    const continuation = text.slice(delivered.length);
    assert.ok(continuation.length > 0);
    assert.ok(reference.startsWith(delivered), 'what was delivered before the kill is the greedy answer so far');
    assert.ok(!continuation.startsWith(reference.slice(0, 10)), 'the engine continued the text rather than starting again');
  });
});
