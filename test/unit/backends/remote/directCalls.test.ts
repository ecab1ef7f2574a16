// RemoteBackend's direct calls (embed, rerank) against scripted engines on node:http: the request each engine gets
// (path, model, float encoding, every document), answers taken by `index` whatever their order, vectors normalized,
// usage as the request's total; an engine down or busy (503) is skipped for the next endpoint of the pool; llama.cpp
// server's 501 for a route it was not started with is unsupported_capability; an answer that does not match the
// inputs is backend_error; a kind without a rerank route (Ollama) is refused param model without a request.
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, describe, it } from 'node:test';
import { RemoteBackend } from '../../../../src/backends/remote/remoteBackend';
import { BackendError, RequestRefusedError } from '../../../../src/runtime/backend';

interface Seen {
  path: string;
  body: Record<string, unknown>;
}

type Handler = (path: string, body: Record<string, unknown>) => { status: number; json: unknown };

/** A scripted engine: /v1/models lists `tiny`; POSTs go to `handle`, and are recorded. */
async function engine(handle: Handler): Promise<{ base: string; seen: Seen[]; server: Server }> {
  const seen: Seen[] = [];
  const server = createServer((req: IncomingMessage, res) => {
    let raw = '';
    req.on('data', (c: Buffer) => (raw += c.toString('utf8')));
    req.on('end', () => {
      const path = (req.url ?? '').replace(/^\/v1/, '');
      let answer: { status: number; json: unknown };
      if (req.method === 'GET' && path === '/models') answer = { status: 200, json: { object: 'list', data: [{ id: 'tiny', object: 'model' }] } };
      else {
        const body = JSON.parse(raw) as Record<string, unknown>;
        seen.push({ path, body });
        answer = handle(path, body);
      }
      res.writeHead(answer.status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(answer.json));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { base: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, seen, server };
}

const servers: Server[] = [];
after(() => servers.forEach((s) => s.close()));
const signal = () => new AbortController().signal;

async function backendOn(kind: 'llama.cpp' | 'ollama', ...handlers: Handler[]) {
  const engines = await Promise.all(handlers.map(engine));
  servers.push(...engines.map((e) => e.server));
  const backend = new RemoteBackend([{ name: 'x', urls: engines.map((e) => e.base), kind, concurrency: [1] }], {
    backoff: { baseMs: 60_000, maxMs: 60_000 },
  });
  await backend.refresh();
  return { backend, engines };
}

describe('RemoteBackend direct calls', () => {
  it('embed: POST /embeddings with the engine model id and float encoding; answers by index, normalized; usage on the first', async () => {
    const { backend, engines } = await backendOn('llama.cpp', () => ({
      status: 200,
      json: {
        data: [
          { index: 1, embedding: [0, 2] },
          { index: 0, embedding: [3, 4] },
        ],
        usage: { prompt_tokens: 9, total_tokens: 9 },
      },
    }));
    const r = await backend.embed('x/tiny', ['a', [5, 6]], { signal: signal() });
    assert.deepEqual(engines[0].seen, [{ path: '/embeddings', body: { input: ['a', [5, 6]], encoding_format: 'float', model: 'tiny' } }]);
    assert.deepEqual(
      r.vectors.map((v) => Array.from(v)),
      [
        [Math.fround(0.6), Math.fround(0.8)],
        [0, 1],
      ],
    );
    assert.equal(r.dimensions, 2);
    assert.deepEqual(r.tokens, [9, 0]);
  });

  it('rerank: POST /rerank with every document; scores by index', async () => {
    const { backend, engines } = await backendOn('llama.cpp', () => ({
      status: 200,
      json: {
        results: [
          { index: 1, relevance_score: 0.9 },
          { index: 0, relevance_score: -1.5 },
        ],
        usage: { total_tokens: 12 },
      },
    }));
    const r = await backend.rerank('x/tiny', 'q', ['d0', 'd1'], { signal: signal() });
    assert.deepEqual(engines[0].seen, [{ path: '/rerank', body: { query: 'q', documents: ['d0', 'd1'], top_n: 2, model: 'tiny' } }]);
    assert.deepEqual(r, { scores: [-1.5, 0.9], tokens: [12, 0] });
  });

  it('a busy endpoint (503) is skipped for the next one of the pool; all busy → unavailable', async () => {
    const ok = { status: 200, json: { data: [{ index: 0, embedding: [1, 0] }], usage: { prompt_tokens: 1 } } };
    const { backend, engines } = await backendOn(
      'llama.cpp',
      () => ({ status: 503, json: { error: { message: 'Loading model', code: 503 } } }),
      () => ok,
    );
    const r = await backend.embed('x/tiny', ['a'], { signal: signal() });
    assert.deepEqual(Array.from(r.vectors[0]), [1, 0]);
    // Whichever endpoint was chosen first, the one that answered is the healthy one.
    assert.equal(engines[1].seen.length, 1);
    const busy = await backendOn('llama.cpp', () => ({ status: 503, json: { error: { message: 'busy' } } }));
    await assert.rejects(busy.backend.embed('x/tiny', ['a'], { signal: signal() }), (e: unknown) => {
      assert.ok(e instanceof BackendError);
      assert.equal(e.kind, 'unavailable');
      assert.equal(e.code, 'backend_unavailable');
      return true;
    });
  });

  it("llama.cpp server's 501 (route not started) → unsupported_capability; a mismatched answer → backend_error", async () => {
    const off = await backendOn('llama.cpp', () => ({
      status: 501,
      json: { error: { code: 501, message: 'This server does not support embeddings. Start it with `--embeddings`', type: 'not_supported_error' } },
    }));
    await assert.rejects(off.backend.embed('x/tiny', ['a'], { signal: signal() }), (e: unknown) => {
      assert.ok(e instanceof BackendError);
      assert.equal(e.code, 'unsupported_capability');
      assert.match(e.message, /--embeddings/);
      return true;
    });
    const short = await backendOn('llama.cpp', () => ({ status: 200, json: { results: [{ index: 0, relevance_score: 1 }] } }));
    await assert.rejects(short.backend.rerank('x/tiny', 'q', ['a', 'b'], { signal: signal() }), { name: 'BackendError', code: 'backend_error' });
  });

  it('an Ollama engine has no rerank route: refused param model, nothing sent; embeddings are offered', async () => {
    const { backend, engines } = await backendOn('ollama', () => ({ status: 500, json: {} }));
    assert.equal(backend.supportsRerank('x/tiny'), false);
    assert.equal(backend.supportsEmbeddings('x/tiny'), true);
    await assert.rejects(
      backend.rerank('x/tiny', 'q', ['a'], { signal: signal() }),
      (e: unknown) => e instanceof RequestRefusedError && e.code === 'unsupported_capability' && e.param === 'model',
    );
    assert.equal(engines[0].seen.length, 0);
  });
});
