// Bad input of every kind gets its documented 4xx problem; the server keeps serving and stored tasks stay as
// they were.
import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { call, createTask, removeDir, startServer, waitForStatus, type CallResult, type Server } from './harness';

function expectProblem(r: CallResult, status: number, code: string): void {
  assert.equal(r.status, status, r.text);
  assert.match(String(r.headers['content-type']), /^application\/problem\+json/);
  assert.equal(r.json.code, code);
  assert.equal(r.json.status, status);
  // Problems never leak stacks, paths or tokens.
  assert.doesNotMatch(r.text, /\/work\/|\/tmp\/|node_modules|at [A-Za-z]+ \(/);
}

describe('LMSP bad input', () => {
  let server: Server;
  let stored: any;
  before(async () => {
    server = await startServer();
    const t = await createTask(server);
    stored = await waitForStatus(server, t.id, ['succeeded']);
  });
  after(async () => {
    // The stored task is unchanged after everything below, and the server still works.
    const again = await call(server, 'GET', `/tasks/${stored.id}`);
    assert.deepEqual(again.json, stored);
    const list = await call(server, 'GET', '/tasks?limit=100');
    assert.equal(list.json.data.length, 1, 'no request below created a task');
    assert.equal(await server.stop(), 0);
    removeDir(server.dataDir);
  });

  const validInput = () => ({ model: server.model, input: 'x', max_output_tokens: 2 });

  it('malformed JSON and empty bodies are 400 invalid_request', async () => {
    const headers = { 'content-type': 'application/json' };
    expectProblem(await call(server, 'POST', '/tasks', { rawBody: '{"type":', headers }), 400, 'invalid_request');
    expectProblem(await call(server, 'POST', '/tasks', { rawBody: '', headers }), 400, 'invalid_request');
    expectProblem(await call(server, 'POST', '/responses', { rawBody: 'null', headers }), 400, 'invalid_request');
    expectProblem(await call(server, 'POST', '/tasks', { rawBody: '[]', headers }), 400, 'invalid_request');
  });

  it('wrong types and unknown fields are 400 invalid_request with the param', async () => {
    const cases: Array<[unknown, string]> = [
      [{ type: 'batch', input: validInput() }, 'type'],
      [{ input: validInput() }, 'type'],
      [{ type: 'response' }, 'input'],
      [{ type: 'response', input: { ...validInput(), max_output_tokens: 'ten' } }, 'input.max_output_tokens'],
      [{ type: 'response', input: { ...validInput(), max_output_tokens: -1 } }, 'input.max_output_tokens'],
      [{ type: 'response', input: { ...validInput(), temperature: 9 } }, 'input.temperature'],
      [{ type: 'response', input: { ...validInput(), input: 42 } }, 'input.input'],
      [{ type: 'response', input: { ...validInput(), input: [] } }, 'input.input'],
      [{ type: 'response', input: { ...validInput(), input: [{ role: 'robot', content: 'x' }] } }, 'input.input.0.role'],
      [{ type: 'response', input: { ...validInput(), model: 7 } }, 'input.model'],
      [{ type: 'response', input: validInput(), on_restart: 'sometimes' }, 'on_restart'],
      [{ type: 'response', input: validInput(), colour: 'red' }, 'colour'],
      [{ type: 'response', input: { ...validInput(), surprise: true } }, 'input.surprise'],
    ];
    for (const [body, param] of cases) {
      const r = await call(server, 'POST', '/tasks', { body });
      expectProblem(r, 400, 'invalid_request');
      assert.equal(r.json.param, param, JSON.stringify(body));
    }
    const r = await call(server, 'POST', '/responses', { body: { ...validInput(), stream: 'yes' } });
    expectProblem(r, 400, 'invalid_request');
    assert.equal(r.json.param, 'stream');
  });

  it('only the editor token may mark a task as made in the editor: 403 for clients, 400 for other values', async () => {
    // This server (task-runtime serve) has no editor principal: alice's claim is refused, and nothing is created.
    const claim = await call(server, 'POST', '/tasks', { body: { type: 'response', input: validInput(), task_runtime: { origin: 'editor' } } });
    expectProblem(claim, 403, 'forbidden');
    assert.equal(claim.json.param, 'task_runtime.origin');
    const cases: Array<[unknown, string]> = [
      [{ origin: 'mcp' }, 'task_runtime.origin'],
      [{ origin: 'editor', title: 'x' }, 'task_runtime.title'],
      ['editor', 'task_runtime'],
    ];
    for (const [vendor, param] of cases) {
      const r = await call(server, 'POST', '/tasks', { body: { type: 'response', input: validInput(), task_runtime: vendor } });
      expectProblem(r, 400, 'invalid_request');
      assert.equal(r.json.param, param, JSON.stringify(vendor));
    }
  });

  it('oversized bodies are 413 payload_too_large', async () => {
    const big = JSON.stringify({ type: 'response', input: { ...validInput(), input: 'x'.repeat(5 * 1024 * 1024) } });
    expectProblem(await call(server, 'POST', '/tasks', { rawBody: big, headers: { 'content-type': 'application/json' } }), 413, 'payload_too_large');
  });

  it('oversized chunked bodies are cut off with 413 too', async () => {
    const r = await new Promise<CallResult>((resolve, reject) => {
      const req = httpRequest(
        {
          host: '127.0.0.1',
          port: server.port,
          method: 'POST',
          path: '/lmsp/v1/tasks',
          agent: false,
          headers: { authorization: `Bearer ${server.tokenA}`, 'content-type': 'application/json', 'transfer-encoding': 'chunked' },
        },
        (res) => {
          let text = '';
          res.on('data', (c) => (text += c));
          res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, text, json: JSON.parse(text) }));
        },
      );
      req.on('error', reject);
      const chunk = 'x'.repeat(1024 * 1024);
      req.write('{"type":"response","input":{"input":"');
      let i = 0;
      const pump = () => {
        while (i < 6 && req.write(chunk)) i++;
        if (i < 6)
          req.once('drain', () => {
            i++;
            pump();
          });
        else req.end('"}}');
      };
      pump();
    });
    expectProblem(r, 413, 'payload_too_large');
  });

  it('a wrong content type is 415 unsupported_media_type', async () => {
    const raw = JSON.stringify({ type: 'response', input: validInput() });
    expectProblem(await call(server, 'POST', '/tasks', { rawBody: raw, headers: { 'content-type': 'text/plain' } }), 415, 'unsupported_media_type');
    expectProblem(await call(server, 'POST', '/tasks', { rawBody: raw }), 415, 'unsupported_media_type');
    expectProblem(
      await call(server, 'POST', '/responses', { rawBody: raw, headers: { 'content-type': 'application/x-www-form-urlencoded' } }),
      415,
      'unsupported_media_type',
    );
  });

  it('bad ids are 404 with the right code', async () => {
    expectProblem(await call(server, 'GET', '/tasks/%E0%A4%A'), 400, 'invalid_request');
    expectProblem(await call(server, 'GET', `/tasks/${'task_' + 'a'.repeat(300)}`), 404, 'task_not_found');
    expectProblem(await call(server, 'GET', `/tasks/${stored.response_id}`), 404, 'task_not_found');
    expectProblem(await call(server, 'GET', `/responses/${stored.id}`), 404, 'response_not_found');
  });

  it('missing or wrong tokens are 401 with WWW-Authenticate', async () => {
    for (const token of [null, 'wrong-token-wrong-token', '']) {
      const r = await call(server, 'GET', `/tasks/${stored.id}`, { token });
      expectProblem(r, 401, 'unauthorized');
      assert.match(String(r.headers['www-authenticate']), /^Bearer realm="lmsp"/);
    }
    const basic = await call(server, 'GET', '/capabilities', { token: null, headers: { authorization: 'Basic dXNlcjpwYXNz' } });
    expectProblem(basic, 401, 'unauthorized');
    const noAuthCreate = await call(server, 'POST', '/tasks', { token: null, body: { type: 'response', input: validInput() } });
    expectProblem(noAuthCreate, 401, 'unauthorized');
  });

  it('foreign Host or Origin is 403 forbidden (DNS-rebinding defence)', async () => {
    for (const host of ['evil.example', `evil.example:${server.port}`, '127.0.0.1:1', `127.0.0.2:${server.port}`]) {
      expectProblem(await call(server, 'GET', '/capabilities', { headers: { host } }), 403, 'forbidden');
    }
    for (const host of [`localhost:${server.port}`, `[::1]:${server.port}`]) {
      assert.equal((await call(server, 'GET', '/capabilities', { headers: { host } })).status, 200, host);
    }
    expectProblem(await call(server, 'GET', '/capabilities', { headers: { origin: 'https://evil.example' } }), 403, 'forbidden');
    expectProblem(
      await call(server, 'POST', '/tasks', { body: { type: 'response', input: validInput() }, headers: { origin: 'http://localhost:3000' } }),
      403,
      'forbidden',
    );
  });

  it('the MCP door answers auth failures in a form MCP clients understand', async () => {
    const r = await call(server, 'POST', '/mcp', { token: null, body: { jsonrpc: '2.0', id: 1, method: 'ping' } });
    assert.equal(r.status, 401);
    assert.match(String(r.headers['www-authenticate']), /^Bearer/);
    assert.equal(r.json.jsonrpc, '2.0');
    assert.equal(typeof r.json.error.code, 'number');
  });

  it('garbage on the socket gets 400 and the server keeps serving', async () => {
    const reply = await new Promise<string>((resolve) => {
      const s = connect(server.port, '127.0.0.1', () => s.write('NOT HTTP AT ALL\r\n\r\n'));
      let text = '';
      s.on('data', (d) => (text += d));
      s.on('close', () => resolve(text));
      s.on('error', () => resolve(text));
    });
    assert.match(reply, /^HTTP\/1\.1 400/);
    assert.equal((await call(server, 'GET', '/capabilities')).status, 200);
  });
});
