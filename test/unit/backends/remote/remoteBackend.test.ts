// The remote-engine backend against a scripted OpenAI-compatible server of the test's own (fixtures/fakeEngine.ts):
// streaming, usage, finish reasons, the pool, and every fault the issue names (unreachable, died mid-stream, bad
// JSON, oversized events, slow-loris, redirects, HTTP errors) ending as a clear task state, never a hang or a leak
// of the API key.
import assert from 'node:assert/strict';
import * as http from 'node:http';
import { after, describe, it } from 'node:test';
import { CompositeBackend } from '../../../../src/backends/composite';
import { LlamaBackend } from '../../../../src/backends/llama/llamaBackend';
import { normalizeEngineUrl, parseKey } from '../../../../src/backends/remote/config';
import { RemoteBackend } from '../../../../src/backends/remote/remoteBackend';
import { BackendError, type TokenLogprob } from '../../../../src/runtime/backend';
import { isRuntimeError } from '../../../../src/runtime/errors';
import { TaskRuntime, type RuntimeOptions } from '../../../../src/runtime/runtime';
import type { TaskRecord } from '../../../../src/runtime/task';
import { closedPort, goodStream, sseChunk, sseHead, startFakeEngine, type FakeEngine } from '../../../fixtures/fakeEngine';
import { tempDir } from '../../runtime/helpers';
import { waitFor } from '../../../support/wait';

const root = tempDir('tr-remote-');
let dirs = 0;

const KEY = 'sk-test-5f1c0a9e7d3b42c8a1e6f0d2b4c6e8a0';
const engines: FakeEngine[] = [];
const runtimes: TaskRuntime[] = [];
after(async () => {
  for (const r of runtimes) await r.close();
  for (const e of engines) await e.close();
});

async function engine(...args: Parameters<typeof startFakeEngine>): Promise<FakeEngine> {
  const e = await startFakeEngine(...args);
  engines.push(e);
  return e;
}

async function open(backend: RemoteBackend | CompositeBackend, extra: Partial<RuntimeOptions> = {}): Promise<TaskRuntime> {
  const r = await TaskRuntime.open({ dataDir: `${root}/${++dirs}`, backend, backendRetry: { attempts: 3, baseMs: 10, maxMs: 50 }, ...extra });
  runtimes.push(r);
  return r;
}

function create(r: TaskRuntime, model: string, over: Partial<Parameters<TaskRuntime['createTask']>[0]> = {}): TaskRecord {
  return r.createTask({ origin: 'lmsp', principal: 'p', input: { model, input: 'Hi', max_output_tokens: 16 }, ...over }).task;
}

/** Everything stored about a task (record + events), for "the key is never there" checks. */
function everything(r: TaskRuntime, id: string): string {
  return JSON.stringify([r.getTask(id), r.readEvents(id)]);
}

describe('configuration', () => {
  it('accepts only http(s) URLs without credentials, query or fragment', () => {
    assert.equal(normalizeEngineUrl('http://127.0.0.1:8080/v1/'), 'http://127.0.0.1:8080/v1');
    assert.equal(normalizeEngineUrl('https://gpu.example/v1'), 'https://gpu.example/v1');
    assert.throws(() => normalizeEngineUrl('file:///etc/passwd'), /http or https/);
    assert.throws(() => normalizeEngineUrl('ftp://x/v1'), /http or https/);
    assert.throws(
      () => normalizeEngineUrl(`http://user:${KEY}@h/v1`),
      (e: Error) => /credentials/.test(e.message) && !e.message.includes(KEY),
    );
    assert.throws(() => normalizeEngineUrl('http://h/v1?key=1'), /query/);
    assert.throws(() => normalizeEngineUrl('not a url'), /not a URL/);
    assert.throws(() => new RemoteBackend([{ name: 'bad name', urls: ['http://h/v1'] }]), /engine name/);
    assert.equal(parseKey(`${KEY}\n`), KEY);
    assert.throws(() => parseKey('\n'), /empty/);
  });
});

describe('remote backend through the runtime', () => {
  it('a key the engine echoes into its answer is stored as [key], also split across chunks and in hex', async () => {
    const hex = Buffer.from(KEY, 'utf8').toString('hex');
    const e = await engine(goodStream(['Your key: ', KEY.slice(0, 12), KEY.slice(12), ', in hex ', hex.slice(0, 5), hex.slice(5, 40), '. Done.']), [
      'm1',
    ]);
    const b = new RemoteBackend([{ name: 'gpu', urls: [e.base], apiKey: KEY }]);
    await b.refresh();
    const r = await open(b);
    const t = create(r, 'gpu/m1');
    const done = await r.waitForTerminal(t.id);
    assert.equal(done.status, 'succeeded');
    const text = (done.response as { output: Array<{ content: Array<{ text: string }> }> }).output[0]!.content[0]!.text;
    assert.match(text, /^Your key: \[key\](\[key\])*, in hex .{0,5}\[key\]\. Done\.$/);
    const stored = everything(r, t.id);
    for (let i = 0; i + 8 <= KEY.length; i++) assert.ok(!stored.includes(KEY.slice(i, i + 8)), `a run of the key at ${i} is stored`);
    for (let i = 5; i + 8 <= 40; i++) assert.ok(!stored.includes(hex.slice(i, i + 8)), `a run of its hex at ${i} is stored`);
  });

  it('streams a chat completion: deltas, usage, stop; the request is the OpenAI baseline with the key', async () => {
    const e = await engine(goodStream(['Hello', ', ', 'world']), ['m1']);
    const b = new RemoteBackend([{ name: 'gpu', urls: [e.base], apiKey: KEY }]);
    await b.refresh();
    assert.deepEqual(
      b.listModels().map((m) => [m.id, m.state, m.maxContextLength, m.engine]),
      [['gpu/m1', 'loaded', 1024, 'gpu']],
    );
    const r = await open(b);
    const t = create(r, 'gpu/m1', {
      input: { model: 'gpu/m1', input: 'Hi', instructions: 'Be brief.', max_output_tokens: 16, temperature: 0.5, task_runtime: { seed: 3 } },
    });
    const done = await r.waitForTerminal(t.id);
    assert.equal(done.status, 'succeeded');
    assert.deepEqual(done.usage, { input_tokens: 7, output_tokens: 3, total_tokens: 10 });
    const resp = done.response as { status: string; output: Array<{ content: Array<{ text: string }> }> };
    assert.equal(resp.status, 'completed');
    assert.equal(resp.output[0].content[0].text, 'Hello, world');
    const deltas = r
      .readEvents(t.id)
      .filter((ev) => ev.type === 'response.output_text.delta')
      .map((ev) => ev.data.delta)
      .join('');
    assert.equal(deltas, 'Hello, world');
    const chat = e.requests.find((q) => q.path === '/v1/chat/completions')!;
    assert.equal(chat.headers.authorization, `Bearer ${KEY}`);
    assert.deepEqual(chat.body, {
      model: 'm1',
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Hi' },
      ],
      stream: true,
      stream_options: { include_usage: true },
      max_tokens: 16,
      temperature: 0.5,
      seed: 3,
    });
    assert.ok(!everything(r, t.id).includes(KEY));
  });

  it('finish_reason "length" ends the task incomplete (max_output_tokens)', async () => {
    const e = await engine(goodStream(['a', 'b'], 'length'));
    const b = new RemoteBackend([{ name: 'gpu', urls: [e.base] }]);
    await b.refresh();
    const r = await open(b);
    const done = await r.waitForTerminal(create(r, 'gpu/m1').id);
    assert.equal(done.status, 'succeeded');
    assert.equal((done.response as { status: string }).status, 'incomplete');
    assert.deepEqual((done.response as { incomplete_details: unknown }).incomplete_details, { reason: 'max_output_tokens' });
  });

  it('models are NAME/model-id; unknown ones and on_restart "resume" are refused at create', async () => {
    const e = await engine(goodStream(['x']), ['m1', 'm2']);
    const b = new RemoteBackend([{ name: 'gpu', urls: [e.base], models: ['m2'] }]);
    await b.refresh();
    assert.deepEqual(
      b.listModels().map((m) => m.id),
      ['gpu/m2'],
    );
    const r = await open(b);
    assert.throws(
      () => create(r, 'gpu/m1'),
      (err) => isRuntimeError(err, 'model_not_found'),
    );
    assert.throws(
      () => create(r, 'other/m2'),
      (err) => isRuntimeError(err, 'model_not_found'),
    );
    assert.throws(
      () => create(r, 'gpu/m2', { onRestart: 'resume' }),
      (err) => isRuntimeError(err, 'unsupported_capability'),
    );
    assert.equal(r.supportsResume, false);
    assert.equal((await r.waitForTerminal(create(r, 'gpu/m2', { onRestart: 'retry' }).id)).status, 'succeeded');
  });

  it('a composite lists local and remote models and routes each to its backend; resume stays per model', async () => {
    const e = await engine(goodStream(['r']), ['m1']);
    const remote = new RemoteBackend([{ name: 'gpu', urls: [e.base] }]);
    await remote.refresh();
    const local = new LlamaBackend({ models: [{ id: 'tiny', source: '/nonexistent/tiny.gguf' }] });
    const c = new CompositeBackend([local, remote]);
    assert.deepEqual(
      c.listModels().map((m) => m.id),
      ['tiny', 'gpu/m1'],
    );
    assert.equal(c.resolveModel(undefined), 'tiny');
    assert.equal(c.resolveModel('gpu/m1'), 'gpu/m1');
    assert.equal(c.supportsResume('tiny'), true);
    assert.equal(c.supportsResume('gpu/m1'), false);
    const r = await open(c);
    assert.throws(
      () => create(r, 'gpu/m1', { onRestart: 'resume' }),
      (err) => isRuntimeError(err, 'unsupported_capability'),
    );
    assert.equal((await r.waitForTerminal(create(r, 'gpu/m1').id)).status, 'succeeded');
  });

  it('cancel aborts the HTTP stream (the engine sees its connection close) and the task ends cancelled', async () => {
    let started!: () => void;
    const streaming = new Promise<void>((res) => (started = res));
    const e = await engine((_q, res) => {
      sseHead(res);
      res.write(sseChunk('tick'));
      started();
      const timer = setInterval(() => res.write(sseChunk('tick')), 20);
      res.on('close', () => clearInterval(timer));
    });
    const b = new RemoteBackend([{ name: 'gpu', urls: [e.base] }]);
    await b.refresh();
    const r = await open(b);
    const t = create(r, 'gpu/m1');
    await streaming;
    await waitFor(() => r.getTask(t.id)!.status === 'running', 'running');
    r.cancelTask(t.id, 'p');
    await e.requests.find((q) => q.path === '/v1/chat/completions')!.closed;
    assert.equal((await r.waitForTerminal(t.id)).status, 'cancelled');
  });

  it('an unreachable engine: the task waits queued with a status message, retries, then fails backend_unavailable', async () => {
    const port = await closedPort();
    const b = new RemoteBackend([{ name: 'gpu', urls: [`http://127.0.0.1:${port}/v1`], models: ['m1'] }]);
    await b.refresh();
    assert.equal(b.listModels()[0].state, 'error');
    const r = await open(b, { backendRetry: { attempts: 2, baseMs: 5, maxMs: 20 } });
    const t = create(r, 'gpu/m1');
    const messages: string[] = [];
    r.onTaskChange((x) => x.id === t.id && x.statusMessage && messages.push(`${x.status}: ${x.statusMessage}`));
    const done = await r.waitForTerminal(t.id);
    assert.equal(done.status, 'failed');
    assert.equal(done.error?.code, 'backend_unavailable');
    assert.match(done.error!.detail, /No endpoint of engine "gpu" is reachable .*ECONNREFUSED.*Gave up after 2 retries/);
    assert.ok(
      messages.some((m) => /^queued: waiting for the backend: .*retry 1 of 2/.test(m)),
      messages.join('\n'),
    );
    assert.ok(messages.some((m) => /retry 2 of 2/.test(m)));
  });

  it('an engine that comes back while the task waits: the task runs', async () => {
    const port = await closedPort();
    const b = new RemoteBackend([{ name: 'gpu', urls: [`http://127.0.0.1:${port}/v1`], models: ['m1'] }], { backoff: { baseMs: 1, maxMs: 5 } });
    const r = await open(b, { backendRetry: { attempts: 50, baseMs: 20, maxMs: 100 } });
    const t = create(r, 'gpu/m1');
    await waitFor(() => /waiting for the backend/.test(r.getTask(t.id)!.statusMessage ?? ''), 'the waiting message');
    // The engine starts on the port the task waits for.
    const server = http.createServer((req, res) => {
      if (req.url === '/v1/models') return res.end(JSON.stringify({ data: [{ id: 'm1' }] }));
      req.resume();
      req.on('end', () => void goodStream(['back'])({} as never, res));
    });
    await new Promise<void>((res) => server.listen(port, '127.0.0.1', res));
    try {
      const done = await r.waitForTerminal(t.id);
      assert.equal(done.status, 'succeeded');
      assert.equal(done.attempt, 1);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((res) => server.close(() => res()));
    }
  });

  it('engine dies mid-stream: on_restart "fail" fails with backend_interrupted, "retry" re-runs on the other endpoint', async () => {
    const dying = await engine((_q, res) => {
      sseHead(res);
      res.write(sseChunk('partial'));
      setTimeout(() => res.socket?.destroy(), 10);
    });
    const healthy = await engine(goodStream(['whole']));
    // Fail policy: one endpoint that dies.
    const b1 = new RemoteBackend([{ name: 'gpu', urls: [dying.base] }]);
    await b1.refresh();
    const r1 = await open(b1);
    const failed = await r1.waitForTerminal(create(r1, 'gpu/m1', { onRestart: 'fail' }).id);
    assert.equal(failed.status, 'failed');
    assert.equal(failed.error?.code, 'backend_interrupted');
    assert.match(failed.error!.detail, /stopped mid-response/);
    assert.equal((failed.response as { output: Array<{ content: Array<{ text: string }> }> }).output[0].content[0].text, 'partial');

    // Retry policy: a pool of the dying endpoint and a healthy one; the first run goes to the dying one.
    const b2 = new RemoteBackend([{ name: 'gpu', urls: [dying.base, healthy.base], concurrency: [1] }]);
    await b2.refresh();
    b2.engines[0].endpoints[1].served = 1; // the dying endpoint is picked first (fewer served)
    const r2 = await open(b2);
    const t = create(r2, 'gpu/m1', { onRestart: 'retry' });
    const done = await r2.waitForTerminal(t.id);
    assert.equal(done.status, 'succeeded');
    assert.equal(done.attempt, 2);
    const types = r2.readEvents(t.id).map((ev) => ev.type);
    assert.equal(types.filter((x) => x === 'response.created').length, 2);
    assert.equal((done.response as { output: Array<{ content: Array<{ text: string }> }> }).output[0].content[0].text, 'whole');
    assert.equal(b2.engines[0].endpoints[0].state, 'down');
  });

  it('engine resume: cut off mid-output, an on_restart "resume" task continues the same output item on the other endpoint', async () => {
    const dying = await engine((_q, res) => {
      sseHead(res);
      res.write(sseChunk('Once upon'));
      setTimeout(() => res.socket?.destroy(), 10);
    });
    const healthy = await engine(goodStream([' a time', '.']));
    const b = new RemoteBackend([{ name: 'gpu', urls: [dying.base, healthy.base], concurrency: [1], resume: true }]);
    await b.refresh();
    b.engines[0].endpoints[1].served = 1; // the dying endpoint is picked first
    const r = await open(b);
    assert.equal(r.supportsResume, true);
    const t = create(r, 'gpu/m1', { onRestart: 'resume', input: { model: 'gpu/m1', input: 'Tell a story', max_output_tokens: 10 } });
    const done = await r.waitForTerminal(t.id);
    assert.equal(done.status, 'succeeded', JSON.stringify(done.error));
    assert.equal(done.attempt, 1, 'the same attempt goes on');
    const events = r.readEvents(t.id);
    assert.equal(events.filter((ev) => ev.type === 'response.created').length, 1);
    assert.equal(events.filter((ev) => ev.type === 'response.output_item.added').length, 1);
    const deltas = events
      .filter((ev) => ev.type === 'response.output_text.delta')
      .map((ev) => ev.data.delta)
      .join('');
    assert.equal(deltas, 'Once upon a time.', 'delivered text is not sent twice');
    assert.equal((done.response as { output: Array<{ content: Array<{ text: string }> }> }).output[0].content[0].text, 'Once upon a time.');
    const resumed = healthy.requests.find((q) => q.path === '/v1/chat/completions')!.body as Record<string, unknown>;
    assert.deepEqual((resumed.messages as unknown[]).at(-1), { role: 'assistant', content: 'Once upon' });
    assert.equal(resumed.continue_final_message, true);
    assert.equal(resumed.add_generation_prompt, false);
    assert.equal(resumed.max_tokens, 9, 'the token budget counts what was delivered');
    // Without `resume: true` on the engine, "resume" is refused at create.
    const plain = new RemoteBackend([{ name: 'gpu', urls: [healthy.base] }]);
    await plain.refresh();
    const r2 = await open(plain);
    assert.throws(
      () => create(r2, 'gpu/m1', { onRestart: 'resume' }),
      (err) => isRuntimeError(err, 'unsupported_capability'),
    );
  });

  it('a connection refused on one endpoint is retried on the next at once, without a new attempt', async () => {
    const port = await closedPort();
    const healthy = await engine(goodStream(['ok']));
    const b = new RemoteBackend([{ name: 'gpu', urls: [`http://127.0.0.1:${port}/v1`, healthy.base] }]);
    await b.refresh();
    // Pretend the dead one was up at the last probe.
    const dead = b.engines[0].endpoints[0];
    dead.state = 'up';
    dead.models = [{ id: 'm1', maxContextLength: null }];
    const r = await open(b);
    const done = await r.waitForTerminal(create(r, 'gpu/m1').id);
    assert.equal(done.status, 'succeeded');
    assert.equal(done.attempt, 1);
    assert.equal(dead.state, 'down');
  });

  it('a connection the server closes as the request goes out (kept-alive, reused) is tried once more on the same endpoint', async () => {
    let closes = 1;
    const a = await engine((req, res) => {
      if (closes-- > 0) return void res.socket?.destroy();
      return goodStream(['ok'])(req, res);
    });
    const c = await engine();
    const b = new RemoteBackend([{ name: 'gpu', urls: [a.base, c.base] }]);
    await b.refresh();
    const r = await open(b);
    const t = create(r, 'gpu/m1');
    const done = await r.waitForTerminal(t.id);
    assert.equal(done.status, 'succeeded', JSON.stringify(done.error));
    const chats = (e: FakeEngine) => e.requests.filter((q) => q.path === '/v1/chat/completions').length;
    assert.deepEqual([chats(a), chats(c)], [2, 0]);
    assert.equal(b.engines[0].endpoints[0].state, 'up');
  });

  it('two endpoints share the load: concurrent tasks go to the least-busy one, up to the engine slots', async () => {
    const hold: Array<() => void> = [];
    const slow = (): Parameters<typeof startFakeEngine>[0] => (_q, res) => {
      sseHead(res);
      res.write(sseChunk('x'));
      hold.push(() => {
        res.write(sseChunk(null, 'stop'));
        res.end('data: [DONE]\n\n');
      });
    };
    const a = await engine(slow());
    const c = await engine(slow());
    a.props = { total_slots: 1 };
    c.props = { total_slots: 1 };
    const b = new RemoteBackend([{ name: 'gpu', urls: [a.base, c.base] }]);
    await b.refresh();
    assert.deepEqual(
      b.engines[0].endpoints.map((x) => x.concurrency),
      [1, 1],
    );
    assert.deepEqual(b.concurrency('gpu/m1'), { group: 'engine:gpu', limit: 2 });
    const r = await open(b);
    const ts = [create(r, 'gpu/m1'), create(r, 'gpu/m1'), create(r, 'gpu/m1')];
    await waitFor(() => hold.length === 2, 'two streams');
    assert.equal(r.getTask(ts[2].id)!.status, 'queued', 'the third waits for a slot');
    const chats = (e: FakeEngine) => e.requests.filter((q) => q.path === '/v1/chat/completions').length;
    assert.deepEqual([chats(a), chats(c)], [1, 1]);
    while (ts.some((t) => r.getTask(t.id)!.status !== 'succeeded')) {
      await waitFor(() => hold.length > 0 || ts.every((t) => r.getTask(t.id)!.status === 'succeeded'), 'a stream to finish');
      hold.shift()?.();
    }
    assert.equal(chats(a) + chats(c), 3);
  });
});

describe('cache-aware routing in a pool', () => {
  it("a conversation's prompt_cache_key goes back to the endpoint it last ran on; without a key, the least-busy one", async () => {
    const a = await engine();
    const c = await engine();
    const b = new RemoteBackend([{ name: 'gpu', urls: [a.base, c.base], concurrency: [4] }]);
    await b.refresh();
    const r = await open(b);
    const chats = (e: FakeEngine) => e.requests.filter((q) => q.path === '/v1/chat/completions').length;
    const run = async (key?: string) => {
      const t = r.createTask({
        origin: 'lmsp',
        principal: 'p',
        input: { model: 'gpu/m1', input: 'Hi', max_output_tokens: 16, ...(key ? { prompt_cache_key: key } : {}) },
      }).task;
      await r.waitForTerminal(t.id);
    };
    await run('thread-1');
    const first = chats(a) === 1 ? a : c;
    const other = first === a ? c : a;
    // Unkeyed tasks go to the endpoint that served fewer (the other one, every time); the keyed conversation stays.
    for (let turn = 0; turn < 4; turn++) {
      await run();
      await run('thread-1');
    }
    assert.equal(chats(first), 5, 'every keyed turn on the endpoint of its first');
    assert.equal(chats(other), 4, 'the unkeyed tasks by load');
    // A second conversation starts where the load sends it (the other one: fewer served) and stays there.
    await run('thread-2');
    await run('thread-2');
    await run('thread-2');
    assert.equal(chats(other), 7);
    assert.equal(chats(first), 5);
  });

  it('a conversation without a key (its history sent again) goes back to its endpoint; one that is down breaks it', async () => {
    const a = await engine();
    const c = await engine();
    const b = new RemoteBackend([{ name: 'gpu', urls: [a.base, c.base], concurrency: [4] }]);
    await b.refresh();
    const r = await open(b);
    const chats = (e: FakeEngine) => e.requests.filter((q) => q.path === '/v1/chat/completions').length;
    const run = async (input: Array<{ role: string; content: string }>) => {
      const t = r.createTask({ origin: 'lmsp', principal: 'p', input: { model: 'gpu/m1', input, max_output_tokens: 16 } }).task;
      const done = await r.waitForTerminal(t.id);
      assert.equal(done.status, 'succeeded', JSON.stringify(done.error));
    };
    const history = [{ role: 'user', content: 'Tell me about pools.' }];
    await run(history);
    const first = chats(a) === 1 ? a : c;
    const other = first === a ? c : a;
    // Other work in between would go to the other endpoint by load; each turn of the conversation comes back.
    for (let turn = 0; turn < 3; turn++) {
      await run([{ role: 'user', content: `unrelated ${turn}` }]);
      history.push({ role: 'assistant', content: 'x'.repeat(16) }, { role: 'user', content: `and ${turn}?` });
      await run([...history]);
    }
    assert.equal(chats(first), 4, 'every turn on the endpoint of the first');
    const [routedFirst] = b.engines[0].endpoints.filter((e) => e.url === first.base);
    assert.equal(routedFirst.routed.conversation, 3);
    // The endpoint goes away: the next turn runs on the other one and the conversation stays there.
    await first.close();
    history.push({ role: 'assistant', content: 'x'.repeat(16) }, { role: 'user', content: 'still there?' });
    const before = chats(other);
    await run([...history]);
    history.push({ role: 'assistant', content: 'x'.repeat(16) }, { role: 'user', content: 'and now?' });
    await run([...history]);
    assert.equal(chats(other), before + 2);
  });
});

describe('faults and bad input end as failed tasks with clear errors', () => {
  const cases: Array<{ name: string; handler: Parameters<typeof startFakeEngine>[0]; code: string; detail: RegExp }> = [
    {
      name: 'malformed JSON in an event',
      handler: (_q, res) => {
        sseHead(res);
        res.write(sseChunk('ok'));
        res.end('data: {"choices": [\n\n');
      },
      code: 'backend_error',
      detail: /sent an event that is not JSON/,
    },
    {
      name: 'a chunk of the wrong shape',
      handler: (_q, res) => {
        sseHead(res);
        res.end('data: {"choices": [{"delta": {"content": 42}}]}\n\n');
      },
      code: 'backend_error',
      detail: /content is not text/,
    },
    {
      name: 'an oversized event',
      handler: (_q, res) => {
        sseHead(res);
        res.end(`data: {"choices": [{"delta": {"content": "${'x'.repeat(5000)}"}}]}\n\n`);
      },
      code: 'backend_error',
      detail: /larger than 2048 bytes/,
    },
    {
      name: 'a slow-loris stream (bytes trickle, no event completes)',
      handler: (_q, res) => {
        sseHead(res);
        res.write('data: {"cho');
        // A byte every 50 ms keeps a byte-based idle timer alive forever; the 300 ms event timer must end it.
        let n = 0;
        const timer = setInterval(() => {
          if (++n > 200) throw new Error('the slow-loris stream was not closed within 10 s');
          res.write('i');
        }, 50);
        res.on('close', () => clearInterval(timer));
      },
      code: 'backend_error',
      detail: /sent no complete event for 300 ms/,
    },
    {
      name: 'a body that is not an event stream',
      handler: (_q, res) => {
        res.writeHead(200, { 'content-type': 'text/html' });
        res.end('<html>proxy login</html>');
      },
      code: 'backend_error',
      detail: /did not answer with an event stream \(content-type "text\/html"\)/,
    },
    {
      name: 'an error event mid-stream that echoes the key',
      handler: (_q, res) => {
        sseHead(res);
        res.end(`data: {"error": {"message": "bad key ${KEY}"}}\n\n`);
      },
      code: 'backend_error',
      detail: /reported an error mid-stream: bad key \[key\]/,
    },
    {
      name: 'HTTP 401',
      handler: (_q, res) => {
        res.writeHead(401, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { message: `invalid api key ${KEY}` } }));
      },
      code: 'backend_error',
      detail: /refused the request's credentials \(HTTP 401: invalid api key \[key\]\)/,
    },
    {
      name: 'HTTP 400 (prompt too long)',
      handler: (_q, res) => {
        res.writeHead(400, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { message: 'the request exceeds the available context size' } }));
      },
      code: 'context_length_exceeded',
      detail: /the prompt does not fit the model's context \(HTTP 400: the request exceeds the available context size\)/,
    },
    {
      name: 'HTTP 400 (another bad request)',
      handler: (_q, res) => {
        res.writeHead(400, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { message: 'temperature must be at most 2' } }));
      },
      code: 'invalid_request',
      detail: /refused the request \(HTTP 400: temperature must be at most 2\)/,
    },
    {
      name: 'HTTP 404',
      handler: (_q, res) => {
        res.writeHead(404).end();
      },
      code: 'model_not_found',
      detail: /HTTP 404/,
    },
    {
      name: 'HTTP 500',
      handler: (_q, res) => {
        res.writeHead(500).end('boom');
      },
      code: 'backend_error',
      detail: /failed \(HTTP 500: boom\)/,
    },
  ];
  for (const c of cases) {
    it(c.name, async () => {
      const e = await engine(c.handler);
      const b = new RemoteBackend([{ name: 'gpu', urls: [e.base], apiKey: KEY, timeouts: { idleMs: 300 }, maxEventBytes: 2048 }]);
      await b.refresh();
      const r = await open(b);
      const t = create(r, 'gpu/m1');
      const done = await r.waitForTerminal(t.id);
      assert.equal(done.status, 'failed');
      assert.equal(done.error?.code, c.code, done.error?.detail);
      assert.match(done.error!.detail, c.detail);
      // The engine by name: its host:port is for the operator's log, never a client's error (issue #23 item 1).
      assert.match(done.error!.detail, /engine "gpu"/);
      assert.doesNotMatch(done.error!.detail, /127\.0\.0\.1|localhost/);
      assert.ok(!everything(r, t.id).includes(KEY), 'the key is nowhere in the task or its events');
    });
  }

  it('a redirect to another host fails the task and the other host never sees the key', async () => {
    const other = await engine(goodStream(['stolen']));
    const e = await engine((_q, res) => {
      res.writeHead(307, { location: `${other.base}/chat/completions` });
      res.end();
    });
    const b = new RemoteBackend([{ name: 'gpu', urls: [e.base], apiKey: KEY }]);
    await b.refresh();
    const r = await open(b);
    const done = await r.waitForTerminal(create(r, 'gpu/m1').id);
    assert.equal(done.status, 'failed');
    assert.equal(done.error?.code, 'backend_error');
    assert.match(done.error!.detail, /redirect \(HTTP 307 to 127\.0\.0\.1:\d+\); redirects are not followed/);
    assert.equal(other.requests.length, 0);
  });

  it('429/503 count as unavailable and honour Retry-After within the retry budget', async () => {
    let n = 0;
    const e = await engine((_q, res) => {
      if (n++ === 0) {
        res.writeHead(503, { 'retry-after': '0' });
        res.end('{"error":{"message":"Loading model"}}');
        return;
      }
      return goodStream(['fine'])(_q, res);
    });
    const b = new RemoteBackend([{ name: 'gpu', urls: [e.base] }], { backoff: { baseMs: 1, maxMs: 1 } });
    await b.refresh();
    const r = await open(b);
    const t = create(r, 'gpu/m1');
    const done = await r.waitForTerminal(t.id);
    assert.equal(done.status, 'succeeded');
    assert.ok(r.readEvents(t.id).some((ev) => ev.type === 'task_runtime:task.status' && /Loading model/.test(JSON.stringify(ev.data))));
  });
});

describe('log-probabilities from the engine', () => {
  /** A content chunk (or one without content when `content` is null) carrying `logprobs` as given. */
  const lpChunk = (content: string | null, logprobs: unknown, finish: string | null = null) =>
    `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', choices: [{ index: 0, delta: content === null ? {} : { content }, logprobs, finish_reason: finish }] })}\n\n`;
  const entry = (token: string, extra: Record<string, unknown> = {}) => ({
    token,
    logprob: -1,
    bytes: [...Buffer.from(token)],
    top_logprobs: [],
    ...extra,
  });

  async function run(handler: Parameters<typeof startFakeEngine>[0], topLogprobs?: number) {
    const e = await engine(handler);
    const b = new RemoteBackend([{ name: 'gpu', urls: [e.base] }]);
    await b.refresh();
    const pieces: Array<{ text: string; tokens: number; logprobs?: TokenLogprob[] }> = [];
    const result = b.generate(
      { model: 'gpu/m1', messages: [{ role: 'user', content: 'Hi' }], maxOutputTokens: 16, topLogprobs },
      { signal: new AbortController().signal, onText: (text, tokens, logprobs) => pieces.push({ text, tokens, logprobs }) },
    );
    return { result, pieces };
  }

  it('entries held back by the engine go with the next piece; a piece of several tokens counts them; those left at the end are dropped; bytes: null is the UTF-8', async () => {
    const { result, pieces } = await run((_q, res) => {
      sseHead(res);
      res.write(lpChunk(null, { content: [entry('He')] }));
      res.write(lpChunk('Hello', { content: [entry('llo', { bytes: null, top_logprobs: [{ token: 'y', logprob: -2, bytes: null }] })] }));
      res.write(lpChunk('!', null));
      res.write(lpChunk(null, { content: [entry('END')] }, 'stop'));
      res.end('data: [DONE]\n\n');
    }, 1);
    assert.equal((await result).finishReason, 'stop');
    assert.deepEqual(pieces, [
      { text: 'Hello', tokens: 2, logprobs: [entry('He'), entry('llo', { top_logprobs: [{ token: 'y', logprob: -2, bytes: [121] }] })] },
      { text: '!', tokens: 1, logprobs: [] },
    ]);
  });

  it('more alternatives than asked are cut to top_logprobs', async () => {
    const alts = [1, 2, 3].map((i) => ({ token: `t${i}`, logprob: -i, bytes: [116, 48 + i] }));
    const { result, pieces } = await run((_q, res) => {
      sseHead(res);
      res.write(lpChunk('a', { content: [entry('a', { top_logprobs: alts })] }, 'stop'));
      res.end('data: [DONE]\n\n');
    }, 2);
    await result;
    assert.deepEqual(pieces[0].logprobs?.[0].top_logprobs, alts.slice(0, 2));
  });

  const malformed: Array<[string, unknown, RegExp]> = [
    ['logprobs that are not an object', 'nope', /logprobs that are not an object/],
    ['content that is not a list', { content: { token: 'a' } }, /"content" is not a list/],
    ['an entry without a token', { content: [{ logprob: -1 }] }, /without a token/],
    ['a logprob that is not a number', { content: [{ token: 'a', logprob: 'NaN' }] }, /logprob is not a number/],
    ['bytes that are not bytes', { content: [{ token: 'a', logprob: -1, bytes: [300] }] }, /bytes are not a list of bytes/],
    ['alternatives that are not a list', { content: [{ token: 'a', logprob: -1, top_logprobs: 3 }] }, /"top_logprobs" that is not a list/],
  ];
  for (const [name, logprobs, detail] of malformed) {
    it(`${name}: the generation fails when they were asked for, and they are ignored when not`, async () => {
      const handler: Parameters<typeof startFakeEngine>[0] = (_q, res) => {
        sseHead(res);
        res.write(lpChunk('a', logprobs, 'stop'));
        res.end('data: [DONE]\n\n');
      };
      const asked = await run(handler, 0);
      await assert.rejects(
        asked.result,
        (err) => err instanceof BackendError && err.kind === 'failed' && err.code === 'backend_error' && detail.test(err.message),
      );
      const ignored = await run(handler);
      assert.equal((await ignored.result).finishReason, 'stop');
      assert.deepEqual(ignored.pieces, [{ text: 'a', tokens: 1, logprobs: undefined }]);
    });
  }
});
