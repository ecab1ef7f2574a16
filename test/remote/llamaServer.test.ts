// Durable tasks on a real engine: llama.cpp's own llama-server (same llama.cpp source node-llama-cpp ships, built
// once by scripts/remote-engine/prepare.mjs), behind `task-runtime serve --engine`. LMSP and MCP tasks run on it;
// cancel closes the HTTP stream and the engine frees its slot; SIGKILL of the serving engine mid-stream sends an
// on_restart "retry" task to the other engine of the pool; two engines in a pool share the load; a prompt longer than
// the context is context_length_exceeded; kind llama.cpp offers on_restart "resume" (assistant prefill). Request
// fields on the real engine: a json_schema format gives JSON valid against the schema (checked with ajv), the same
// seed gives the same text at temperature 1, a stop sequence ends the text before it, log-probabilities come with
// each piece — on the backend directly and through `serve --engine` (the LMSP door's text.format / task_runtime).
// Run with: node scripts/remote-engine/run.mjs (builds llama-server on first use, then runs this suite).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import Ajv from 'ajv';
import { RemoteBackend } from '../../src/backends/remote/remoteBackend';
import type { GenerateRequest, TokenLogprob } from '../../src/runtime/backend';
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
      '--engine',
      `one=${a.base}`,
      '--engine',
      `pool=${a.base},${b.base}`,
      '--engine',
      `rpool=${a.base},${b.base}`,
      '--engine-kind',
      'rpool=llama.cpp',
    ]);
  });
  after(async () => {
    await serve?.stop();
    await Promise.all([a?.kill(), b?.kill()]);
  });

  it('lists its model as NAME/alias with the context it reports, and one slot per --parallel', async () => {
    const models = (await serve.lmspCall('GET', '/models')).json.data as Array<{ id: string; max_context_length: number; state: string }>;
    assert.deepEqual(
      models.map((m) => [m.id, m.state]),
      [
        ['one/tiny', 'loaded'],
        ['pool/tiny', 'loaded'],
        ['rpool/tiny', 'loaded'],
      ],
    );
    assert.equal(models[0].max_context_length, 8192);
    assert.match(
      serve.stderr(),
      /engine one: http:\/\/127\.0\.0\.1:\d+\/v1 up, 1 model\(s\), concurrency 1, kind openai, resume not offered; looks like llama\.cpp server: --engine-kind one=llama\.cpp/,
    );
    assert.match(serve.stderr(), /engine rpool: http:\/\/127\.0\.0\.1:\d+\/v1 up, 1 model\(s\), concurrency 1, kind llama\.cpp, resume offered\n/);
  });

  it("a prompt longer than the context fails the task with context_length_exceeded and the engine's words", async () => {
    const created = await serve.lmspCall('POST', '/tasks', {
      type: 'response',
      input: { model: 'one/tiny', input: 'x'.repeat(9000), max_output_tokens: 4 },
    });
    assert.equal(created.status, 202, JSON.stringify(created.json));
    const done = await lmspWaitTerminal(serve, created.json.id);
    assert.equal(done.status, 'failed');
    assert.equal(done.error.code, 'context_length_exceeded', JSON.stringify(done.error));
    assert.match(done.error.detail, /exceeds the available context size \(8192 tokens\)/);
  });

  it('an LMSP task streams from it and ends incomplete at max_output_tokens with its usage', async () => {
    const created = await serve.lmspCall('POST', '/tasks', {
      type: 'response',
      input: { model: 'one/tiny', input: 'Hello', max_output_tokens: 40, temperature: 0 },
    });
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
      const r = await client.callTool(
        { name: 'generate', arguments: { model: 'one/tiny', prompt: 'Hi', max_output_tokens: 12, temperature: 0 } },
        CallToolResultSchema,
      );
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
    const created = await serve.lmspCall('POST', '/tasks', {
      ...longTask('pool/tiny', 'retry'),
      input: { model: 'pool/tiny', input: 'Go on.', max_output_tokens: 400, temperature: 0 },
    });
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
    const ref = await serve.lmspCall('POST', '/tasks', {
      type: 'response',
      input: { model: 'one/tiny', input: 'Go on.', max_output_tokens: 400, temperature: 0 },
    });
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

// Bounded by the schema (enums, a one-digit integer, a boolean, no other keys), so even the noise model's constrained
// output ends well inside max_output_tokens: the grammar leaves only the end of the text once the object closes.
const SCHEMA = {
  type: 'object',
  properties: { color: { enum: ['red', 'green', 'blue'] }, n: { type: 'integer', minimum: 0, maximum: 9 }, ok: { type: 'boolean' } },
  required: ['color', 'n', 'ok'],
  additionalProperties: false,
};

describe('request fields on a llama.cpp server', () => {
  let c: LlamaServer;
  let backend: RemoteBackend;
  let serve: Serve;
  before(async () => {
    c = await startLlamaServer();
    backend = new RemoteBackend([{ name: 'x', urls: [c.base], kind: 'llama.cpp' }]);
    await backend.refresh();
    serve = await startServe(['--engine', `x=${c.base}`, '--engine-kind', 'x=llama.cpp']);
  });
  after(async () => {
    await serve?.stop();
    await c?.kill();
  });

  async function generate(over: Partial<GenerateRequest>) {
    const pieces: Array<{ text: string; logprobs?: TokenLogprob[] }> = [];
    const request: GenerateRequest = { model: 'x/tiny', messages: [{ role: 'user', content: 'Answer in JSON.' }], maxOutputTokens: 40, ...over };
    backend.checkRequest(request);
    const result = await backend.generate(request, {
      signal: new AbortController().signal,
      onText: (text, _n, logprobs) => pieces.push({ text, logprobs }),
    });
    return { result, text: pieces.map((p) => p.text).join(''), pieces };
  }

  it('json_schema: the output is JSON valid against the schema', async () => {
    const validate = new Ajv().compile(SCHEMA);
    for (const seed of [1, 2, 3, 4]) {
      const { result, text } = await generate({
        format: { type: 'json_schema', name: 'pick', schema: SCHEMA, strict: true },
        temperature: 1,
        seed,
        maxOutputTokens: 200,
      });
      assert.equal(result.finishReason, 'stop', text);
      const value: unknown = JSON.parse(text);
      assert.ok(validate(value), `${text}: ${JSON.stringify(validate.errors)}`);
    }
    // json_object: any object. The noise model rarely closes an open string, so only the start is checked; without
    // the grammar its greedy answer starts ") world".
    const free = await generate({ temperature: 0, maxOutputTokens: 10 });
    const object = await generate({ format: { type: 'json_object' }, temperature: 0, maxOutputTokens: 10 });
    assert.ok(!free.text.startsWith('{'), free.text);
    assert.match(object.text, /^\s*\{\s*("|\})/, object.text);
  });

  it('the same seed at temperature 1 gives the same text; another seed another text', async () => {
    // Seeds whose noise the server's chat parser accepts (some sampled outputs, e.g. seed 1, it answers with "does not
    // match the expected peg-native format"; fixed for this model and build).
    const one = await generate({ temperature: 1, seed: 3 });
    const two = await generate({ temperature: 1, seed: 3 });
    const other = await generate({ temperature: 1, seed: 4 });
    assert.ok(one.text.length > 0);
    assert.equal(two.text, one.text);
    assert.notEqual(other.text, one.text);
  });

  it('a stop sequence ends the text before it (finish "stop"); top_k, min_p and the penalties are taken and change the text', async () => {
    const full = (await generate({ temperature: 0 })).text;
    const stop = full.slice(12, 16);
    assert.equal(stop.length, 4, full);
    const cut = await generate({ temperature: 0, stop: [stop] });
    assert.equal(cut.result.finishReason, 'stop');
    assert.equal(cut.text, full.slice(0, full.indexOf(stop)));
    // The greedy noise repeats itself ("… streamcX6 taskBu< this streamcX6 …"): the penalties change it.
    const tuned = await generate({ temperature: 0, topK: 5, minP: 0.05, repeatPenalty: 1.5, frequencyPenalty: 1, presencePenalty: 1 });
    assert.ok(tuned.text.length > 0);
    assert.notEqual(tuned.text, full);
  });

  it('log-probabilities: each piece carries its tokens with N alternatives', async () => {
    const { pieces } = await generate({ temperature: 0, topLogprobs: 3, maxOutputTokens: 10 });
    assert.ok(pieces.length > 0);
    for (const p of pieces) {
      assert.ok(p.logprobs && p.logprobs.length > 0, JSON.stringify(p));
      for (const l of p.logprobs) {
        assert.ok(Number.isFinite(l.logprob) && l.logprob <= 0);
        assert.equal(l.top_logprobs.length, 3);
      }
    }
    assert.equal(
      pieces.map((p) => p.logprobs!.map((l) => Buffer.from(l.bytes).toString('latin1')).join('')).join(''),
      Buffer.from(pieces.map((p) => p.text).join('')).toString('latin1'),
      "the tokens' bytes spell the text",
    );
  });

  it('through serve --engine: a json_schema task returns JSON valid against the schema; seed repeats at temperature 1', async () => {
    const validate = new Ajv().compile(SCHEMA);
    const task = (input: Record<string, unknown>) =>
      serve.lmspCall('POST', '/tasks', { type: 'response', input: { model: 'x/tiny', input: 'Answer in JSON.', max_output_tokens: 200, ...input } });
    const created = await task({
      temperature: 1,
      text: { format: { type: 'json_schema', name: 'pick', schema: SCHEMA, strict: true } },
      task_runtime: { seed: 7 },
    });
    assert.equal(created.status, 202, JSON.stringify(created.json));
    const done = await lmspWaitTerminal(serve, created.json.id);
    assert.equal(done.status, 'succeeded', JSON.stringify(done.error));
    const text = done.response.output[0].content[0].text as string;
    assert.ok(validate(JSON.parse(text)), `${text}: ${JSON.stringify(validate.errors)}`);
    const again = await lmspWaitTerminal(
      serve,
      (
        await task({
          temperature: 1,
          text: { format: { type: 'json_schema', name: 'pick', schema: SCHEMA, strict: true } },
          task_runtime: { seed: 7 },
        })
      ).json.id,
    );
    assert.equal(again.response.output[0].content[0].text, text);
  });
});
