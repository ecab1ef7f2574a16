// Idempotency-Key on POST /tasks and POST /responses (profile §9.2).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { deepBody } from '../../support/hostile';
import { until } from '../../support/wait';
import { call, removeDir, startServer, waitForStatus, type Server } from './harness';

describe('LMSP idempotency', () => {
  let server: Server;
  let dataDir: string;
  before(async () => {
    server = await startServer();
    dataDir = server.dataDir;
  });
  after(async () => {
    await server.stop();
    removeDir(dataDir);
  });

  const body = (prompt: string) => ({ type: 'response', input: { model: server.model, input: prompt, max_output_tokens: 4 } });

  it('same key and body → the same task (202 again); other body → 422 idempotency_key_reused', async () => {
    const key = 'key-same-1';
    const a = await call(server, 'POST', '/tasks', { body: body('one'), headers: { 'idempotency-key': key } });
    assert.equal(a.status, 202);
    const b = await call(server, 'POST', '/tasks', { body: body('one'), headers: { 'idempotency-key': key } });
    assert.equal(b.status, 202);
    assert.equal(b.json.id, a.json.id);
    assert.equal(b.headers['idempotent-replayed'], 'true');
    // Key order does not change the fingerprint.
    const reordered = JSON.stringify({ input: { max_output_tokens: 4, input: 'one', model: server.model }, type: 'response' });
    const c = await call(server, 'POST', '/tasks', { rawBody: reordered, headers: { 'idempotency-key': key, 'content-type': 'application/json' } });
    assert.equal(c.json.id, a.json.id);
    const d = await call(server, 'POST', '/tasks', { body: body('two'), headers: { 'idempotency-key': key } });
    assert.equal(d.status, 422);
    assert.equal(d.json.code, 'idempotency_key_reused');
    // A quoted sf-string is the same key.
    const e = await call(server, 'POST', '/tasks', { body: body('one'), headers: { 'idempotency-key': `"${key}"` } });
    assert.equal(e.json.id, a.json.id);
  });

  it('concurrent duplicates create one task', async () => {
    const key = 'key-concurrent';
    const results = await Promise.all(
      Array.from({ length: 12 }, () => call(server, 'POST', '/tasks', { body: body('same'), headers: { 'idempotency-key': key } })),
    );
    const ids = new Set(results.map((r) => r.json.id));
    assert.ok(results.every((r) => r.status === 202));
    assert.equal(ids.size, 1);
    const list = await call(server, 'GET', '/tasks?limit=100');
    assert.equal(list.json.data.filter((t: any) => ids.has(t.id)).length, 1);
  });

  it('keys are per principal', async () => {
    const key = 'key-principal';
    const a = await call(server, 'POST', '/tasks', { body: body('p'), headers: { 'idempotency-key': key } });
    const b = await call(server, 'POST', '/tasks', { body: body('p'), headers: { 'idempotency-key': key }, token: server.tokenB });
    assert.equal(b.status, 202);
    assert.notEqual(a.json.id, b.json.id);
  });

  it('malformed keys are 400 invalid_idempotency_key and create nothing', async () => {
    const before = (await call(server, 'GET', '/tasks?limit=100')).json.data.length;
    for (const bad of ['', 'has space', 'x'.repeat(256), '"unterminated', 'ünicode']) {
      const r = await call(server, 'POST', '/tasks', { body: body('bad'), headers: { 'idempotency-key': bad } });
      assert.equal(r.status, 400, JSON.stringify(bad));
      assert.equal(r.json.code, 'invalid_idempotency_key');
    }
    assert.equal((await call(server, 'GET', '/tasks?limit=100')).json.data.length, before);
  });

  it('a deeply nested body with an Idempotency-Key is a 400 like without one, never a 500', async () => {
    const deep = deepBody();
    for (const headers of [{ 'idempotency-key': 'deep-1' }, {}] as Array<Record<string, string>>) {
      const r = await call(server, 'POST', '/tasks', { rawBody: deep, headers: { 'content-type': 'application/json', ...headers } });
      assert.equal(r.status, 400, r.text.slice(0, 200));
      assert.equal(r.json.code, 'invalid_request');
    }
  });

  it('POST /responses replays a finished response for the same key', async () => {
    const req = { model: server.model, input: 'r', max_output_tokens: 3 };
    const a = await call(server, 'POST', '/responses', { body: req, headers: { 'idempotency-key': 'resp-key' } });
    assert.equal(a.status, 200);
    const b = await call(server, 'POST', '/responses', { body: req, headers: { 'idempotency-key': 'resp-key' } });
    assert.equal(b.status, 200);
    assert.deepEqual(b.json, a.json);
    const c = await call(server, 'POST', '/responses', { body: { ...req, input: 'other' }, headers: { 'idempotency-key': 'resp-key' } });
    assert.equal(c.status, 422);
  });

  it('POST /responses with a key whose first request is still running is 409 idempotency_request_in_progress', async () => {
    const req = { model: server.model, input: 'write a long report', temperature: 0 };
    const first = call(server, 'POST', '/responses', { body: req, headers: { 'idempotency-key': 'slow-key' } });
    // The first request runs until the context is full; retry until the server has registered its key.
    const second = await until(
      async () => {
        const r = await call(server, 'POST', '/responses', { body: req, headers: { 'idempotency-key': 'slow-key' } });
        if (r.status === 200) throw new Error('the first request ended before a second one saw it in progress');
        return r.status === 409 && r;
      },
      'a 409 while the first request runs',
      { intervalMs: 10 },
    );
    assert.equal(second.json.code, 'idempotency_request_in_progress');
    const done = await first;
    assert.equal(done.status, 200);
  });

  it('keys survive a restart', async () => {
    const a = await call(server, 'POST', '/tasks', { body: body('restart'), headers: { 'idempotency-key': 'key-restart' } });
    await waitForStatus(server, a.json.id, ['succeeded']);
    assert.equal(await server.stop(), 0);
    server = await startServer({ dataDir });
    const b = await call(server, 'POST', '/tasks', { body: body('restart'), headers: { 'idempotency-key': 'key-restart' } });
    assert.equal(b.status, 202);
    assert.equal(b.json.id, a.json.id);
    assert.equal(b.json.status, 'succeeded');
  });
});
