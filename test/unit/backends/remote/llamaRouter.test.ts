// A llama.cpp server in router mode (one server, several models, each with a status in GET /v1/models) as one engine
// with several models, against a scripted router that answers as the bundled release does (tools/server/
// server-models.cpp; the real one is in test/remote/llamaRouter.test.ts): model states in the list, slots from a
// running model's /props without starting one, a sleeping model waited for, an unloaded one started with
// GET /props?model=…&autoload=true (answered once it runs) while the task shows `loading`, a failed start failing the task, and a model stopped under a
// router without autoload going back to the queue and started.
import assert from 'node:assert/strict';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, describe, it } from 'node:test';
import { RemoteBackend } from '../../../../src/backends/remote/remoteBackend';
import { TaskRuntime } from '../../../../src/runtime/runtime';
import { goodStream } from '../../../fixtures/fakeEngine';
import { tempDir } from '../../runtime/helpers';

type Status = 'loaded' | 'sleeping' | 'loading' | 'unloaded';

interface FakeRouter {
  base: string;
  status: Map<string, { value: Status; failed?: boolean }>;
  autoload: boolean;
  /** Models whose start fails. */
  broken: Set<string>;
  requests: string[];
  close(): Promise<void>;
}

async function startRouter(models: Record<string, Status>): Promise<FakeRouter> {
  const r: FakeRouter = {
    base: '',
    status: new Map(Object.entries(models).map(([id, value]) => [id, { value }])),
    autoload: true,
    broken: new Set(),
    requests: [],
    close: async () => {},
  };
  const json = (res: http.ServerResponse, status: number, body: unknown) =>
    res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  const server = http.createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => {
      r.requests.push(`${req.method} ${req.url}`);
      const url = new URL(req.url ?? '/', 'http://x');
      const body = parts.length ? (JSON.parse(Buffer.concat(parts).toString('utf8')) as { model: string }) : undefined;
      if (req.method === 'GET' && url.pathname === '/v1/models') {
        const data = [...r.status].map(([id, s]) => ({
          id,
          object: 'model',
          owned_by: 'llamacpp',
          status: { value: s.value, ...(s.failed ? { failed: true, exit_code: 1 } : {}) },
          ...(s.value === 'loaded' ? { meta: { n_ctx_train: 2048 } } : {}),
        }));
        return json(res, 200, { object: 'list', data });
      }
      if (req.method === 'GET' && url.pathname === '/props') {
        const model = url.searchParams.get('model');
        if (!model) return json(res, 200, { role: 'router', max_instances: 4, models_autoload: r.autoload });
        const s = r.status.get(model);
        if (!s) return json(res, 400, { error: { code: 400, message: `model '${model}' not found` } });
        const autoload = url.searchParams.has('autoload') ? url.searchParams.get('autoload') === 'true' : r.autoload;
        if (s.value === 'unloaded' && autoload) {
          // Starts it and answers once it runs (or failed).
          r.status.set(model, { value: 'loading' });
          setTimeout(() => {
            if (r.broken.has(model)) {
              r.status.set(model, { value: 'unloaded', failed: true });
              json(res, 500, { error: { code: 500, message: `model name=${model} failed to load`, type: 'server_error' } });
            } else {
              r.status.set(model, { value: 'loaded' });
              json(res, 200, { total_slots: 2 });
            }
          }, 150);
          return;
        }
        if (s.value !== 'loaded') return json(res, 400, { error: { code: 400, message: 'model is not loaded' } });
        return json(res, 200, { total_slots: 2 });
      }
      if (req.method === 'POST' && url.pathname === '/v1/chat/completions') {
        const id = body!.model;
        const s = r.status.get(id);
        if (!s) return json(res, 400, { error: { code: 400, message: `model '${id}' not found`, type: 'invalid_request_error' } });
        if (s.value === 'unloaded' && !r.autoload) {
          return json(res, 400, { error: { code: 400, message: 'model is not loaded', type: 'invalid_request_error' } });
        }
        // A sleeping (or autoloaded) model answers once it is up again: the request waits meanwhile.
        const wait = s.value === 'loaded' ? 0 : 300;
        r.status.set(id, { value: 'loaded' });
        setTimeout(() => void goodStream(['hello'])({ method: 'POST', path: '', headers: {}, body, closed: Promise.resolve() }, res), wait);
        return;
      }
      res.writeHead(404).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  r.base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  r.close = () => new Promise<void>((resolve) => server.close(() => resolve()));
  return r;
}

const root = tempDir('tr-router-');
let dirs = 0;
const closers: Array<() => Promise<void>> = [];
after(async () => {
  for (const c of closers.reverse()) await c();
});

async function setup(models: Record<string, Status>) {
  const router = await startRouter(models);
  const backend = new RemoteBackend([{ name: 'lc', urls: [router.base], kind: 'llama.cpp' }]);
  await backend.refresh();
  const runtime = await TaskRuntime.open({ dataDir: `${root}/${++dirs}`, backend, backendRetry: { attempts: 3, baseMs: 10, maxMs: 50 } });
  closers.push(
    () => router.close(),
    () => runtime.close(),
  );
  const run = async (model: string) => {
    const t = runtime.createTask({ origin: 'lmsp', principal: 'p', input: { model: `lc/${model}`, input: 'Hi', max_output_tokens: 8 } }).task;
    const done = await runtime.waitForTerminal(t.id);
    return { done };
  };
  return { router, backend, runtime, run };
}

describe('a llama.cpp router: one engine, several models', () => {
  it('lists every model with its state; slots from a running model, never starting one', async () => {
    const { router, backend } = await setup({ a: 'loaded', b: 'sleeping', c: 'loading', d: 'unloaded' });
    assert.deepEqual(
      backend.listModels().map((m) => [m.id, m.state]),
      [
        ['lc/a', 'loaded'],
        ['lc/b', 'loaded'],
        ['lc/c', 'loading'],
        ['lc/d', 'unloaded'],
      ],
    );
    const ep = backend.engines[0].endpoints[0];
    assert.equal(ep.router, true);
    assert.equal(ep.concurrency, 2);
    assert.ok(router.requests.includes('GET /props?model=a&autoload=false'), router.requests.join('\n'));
    assert.equal(backend.isLoaded('lc/b'), true, 'a sleeping model takes requests (it wakes)');
    assert.equal(backend.isLoaded('lc/d'), false);
  });

  it('a sleeping model is waited for, not failed; an unloaded one is started while the task shows loading', async () => {
    const { router, run, backend } = await setup({ a: 'loaded', b: 'sleeping', d: 'unloaded' });
    const slept = await run('b');
    assert.equal(slept.done.status, 'succeeded', JSON.stringify(slept.done.error));
    assert.ok(!router.requests.some((q) => q.includes('autoload=true')), 'a sleeping model is not started again: the request wakes it');
    const started = await run('d');
    assert.equal(started.done.status, 'succeeded', JSON.stringify(started.done.error));
    assert.ok(router.requests.includes('GET /props?model=d&autoload=true'), router.requests.join('\n'));
    assert.equal(backend.listModels().find((m) => m.id === 'lc/d')?.state, 'loaded');
  });

  it("a model whose start fails fails the task with model_load_failed and the router's words", async () => {
    const { router, run } = await setup({ a: 'loaded', x: 'unloaded' });
    router.broken.add('x');
    const { done } = await run('x');
    assert.equal(done.status, 'failed');
    assert.equal(done.error?.code, 'model_load_failed', JSON.stringify(done.error));
    assert.match(done.error?.detail ?? '', /failed to load/);
  });

  it('without autoload, a model stopped since it was listed goes back to the queue and is started', async () => {
    const { router, run } = await setup({ a: 'loaded' });
    router.autoload = false;
    router.status.set('a', { value: 'unloaded' });
    const { done } = await run('a');
    assert.equal(done.status, 'succeeded', JSON.stringify(done.error));
    assert.equal(router.requests.filter((q) => q === 'POST /v1/chat/completions').length, 2);
    assert.ok(router.requests.includes('GET /props?model=a&autoload=true'), router.requests.join('\n'));
  });
});
