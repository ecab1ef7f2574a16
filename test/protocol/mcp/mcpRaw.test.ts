// Raw JSON-RPC over HTTP (fetch) for what the SDK client never sends, plus the creation limits.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { MAX_BODY_BYTES } from '../../../src/protocols/http/body';
import { MAX_PROMPT_CHARS } from '../../../src/protocols/mcp/tools';
import { RawSession, startInProcess, TOKENS, type InProcessServer } from './harness';
import { until } from '../../support/wait';

/**
 * POSTs `size` bytes of a JSON string in chunks without a content-length (chunked). Resolves once the exchange is
 * over with the answer and the error sending the body ran into, if any.
 */
// Every tool this door lists (search_workspace is listed without an editor index and says none exists).
const EXPECTED_TOOLS = ['cancel_tasks', 'embed', 'generate', 'generate_long', 'get_task_text', 'list_models', 'search_workspace'];
function toolNames(r: { result: { tools: { name: string }[] } }): string[] {
  return r.result.tools.map((t) => t.name).sort();
}

function postChunked(url: string, headers: Record<string, string>, size: number): Promise<{ status: number; body: string; sendError?: string }> {
  return new Promise((resolve) => {
    let status = 0;
    let body = '';
    let sendError: string | undefined;
    const req = httpRequest(url, { method: 'POST', headers }, (res) => {
      status = res.statusCode ?? 0;
      res.setEncoding('utf8').on('data', (d: string) => (body += d));
    });
    req.on('error', (e: NodeJS.ErrnoException) => (sendError = e.code ?? e.message));
    req.on('close', () => resolve({ status, body, sendError }));
    const chunk = Buffer.alloc(64 * 1024, 0x61);
    let sent = 0;
    const pump = () => {
      while (sent < size && !req.destroyed) {
        sent += chunk.length;
        if (!req.write(chunk)) return void req.once('drain', pump);
      }
      req.end('"');
    };
    req.write('"');
    pump();
  });
}

describe('MCP door, raw JSON-RPC', () => {
  let server: InProcessServer;
  let raw: RawSession;

  before(async () => {
    server = await startInProcess({ door: { maxBodyBytes: 1024 * 1024 } });
    raw = new RawSession(server.mcpUrl, TOKENS.alice);
    await raw.initialize();
  });
  after(async () => server?.close());

  test('unknown method → -32601', async () => {
    const r = await raw.call('tasks/frobnicate', {});
    assert.equal(r.error.code, -32601);
  });

  test('malformed task params → -32602 with the field named', async () => {
    for (const method of ['tasks/get', 'tasks/result', 'tasks/cancel']) {
      const missing = await raw.call(method, {});
      assert.equal(missing.error.code, -32602, `${method} without taskId`);
      assert.match(missing.error.message, /taskId/);
      const wrongType = await raw.call(method, { taskId: 42 });
      assert.equal(wrongType.error.code, -32602, `${method} with numeric taskId`);
    }
    const cursor = await raw.call('tasks/list', { cursor: 7 });
    assert.equal(cursor.error.code, -32602);
    const ttl = await raw.call('tools/call', { name: 'generate', arguments: { prompt: 'x' }, task: { ttl: 'soon' } });
    assert.equal(ttl.error.code, -32602);
    const args = await raw.call('tools/call', { name: 'generate', arguments: { prompt: 'x', extra: true } });
    assert.equal(args.error.code, -32602);
    assert.match(args.error.message, /extra/);
  });

  test('wrong task ids → -32602 "not found" for every task method', async () => {
    for (const method of ['tasks/get', 'tasks/result', 'tasks/cancel']) {
      const r = await raw.call(method, { taskId: 'task_doesnotexist0000000000000' });
      assert.equal(r.error.code, -32602);
      assert.match(r.error.message, /not found/i);
    }
  });

  test('tasks/get is answered as plain JSON, not SSE', async () => {
    const res = await fetch(server.mcpUrl, {
      method: 'POST',
      headers: raw.headers(),
      body: JSON.stringify({ jsonrpc: '2.0', id: 'g1', method: 'tasks/get', params: { taskId: 'task_nope' } }),
    });
    assert.match(res.headers.get('content-type') ?? '', /application\/json/);
    const body = (await res.json()) as { id: string; error: { code: number } };
    assert.equal(body.id, 'g1');
    assert.equal(body.error.code, -32602);
  });

  test('invalid JSON → -32700; oversized body → 413; oversized prompt → -32602; server unaffected', async () => {
    const bad = await raw.post('{"jsonrpc":"2.0","id":1,"method":');
    assert.equal(bad.status, 400);
    assert.equal(bad.messages[0].error.code, -32700);

    const huge = await raw.post({
      jsonrpc: '2.0',
      id: 99,
      method: 'tools/call',
      params: { name: 'generate', arguments: { prompt: 'a'.repeat(2 * 1024 * 1024) } },
    });
    assert.equal(huge.status, 413);
    assert.equal(huge.messages[0].error.code, -32600);

    const long = await raw.call('tools/call', { name: 'generate', arguments: { prompt: 'b'.repeat(MAX_PROMPT_CHARS + 1) } });
    assert.equal(long.error.code, -32602);
    assert.match(long.error.message, /prompt/);

    const tools = await raw.call('tools/list', {});
    assert.deepEqual(toolNames(tools), EXPECTED_TOOLS);
  });

  test('an oversized body sent chunked, without a length, is answered 413, not dropped', async () => {
    // The reader keeps reading (and dropping) what the client still sends, then answers: a reader that stops
    // reading at the cap closes the socket under a client that is still writing (EPIPE on its side).
    const { status, body, sendError } = await postChunked(server.mcpUrl, raw.headers(), 16 * 1024 * 1024);
    assert.equal(sendError, undefined, 'the whole body was taken');
    assert.equal(status, 413);
    assert.equal(JSON.parse(body).error.code, -32600);
    assert.deepEqual(toolNames(await raw.call('tools/list', {})), EXPECTED_TOOLS, 'the session still works');
  });

  test('a body that is not application/json → 415 -32600', async () => {
    const r = await raw.post({ jsonrpc: '2.0', id: 5, method: 'tools/list' }, { 'content-type': 'text/plain' });
    assert.equal(r.status, 415);
    assert.equal(r.messages[0].error.code, -32600);
  });

  test('a synchronous call abandoned by its client (HTTP disconnect) stops its generation', async () => {
    const gone = new AbortController();
    const pending = fetch(server.mcpUrl, {
      method: 'POST',
      headers: raw.headers(),
      signal: gone.signal,
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 'sync-1',
        method: 'tools/call',
        params: { name: 'generate', arguments: { prompt: 'long story please', temperature: 0, max_output_tokens: 1800 } },
      }),
    }).catch(() => undefined);
    const running = await until(async () => {
      const list = await raw.call('tasks/list', {});
      return list.result.tasks.find((t: { statusMessage: string }) => /^generating: [1-9]/.test(t.statusMessage));
    }, 'the synchronous task to generate');
    gone.abort();
    await pending;
    const final = await until(async () => {
      const r = await raw.call('tasks/get', { taskId: running.taskId });
      return r.result.status === 'working' ? undefined : r.result;
    }, 'the abandoned task to stop');
    assert.equal(final.status, 'cancelled');
    assert.doesNotMatch(final.statusMessage, /1800 tokens/);
  });

  test('sessions: required header, unknown id, and another principal using my session id', async () => {
    const noSession = await fetch(server.mcpUrl, {
      method: 'POST',
      headers: { ...raw.headers(), 'mcp-session-id': '' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    assert.equal(noSession.status, 400);
    const unknown = await fetch(server.mcpUrl, {
      method: 'POST',
      headers: { ...raw.headers(), 'mcp-session-id': 'feedfeedfeedfeedfeedfeedfeedfeed' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    assert.equal(unknown.status, 404);
    const hijack = await fetch(server.mcpUrl, {
      method: 'POST',
      headers: { ...raw.headers(), authorization: `Bearer ${TOKENS.bob}` },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    assert.equal(hijack.status, 404, "bob cannot use alice's session");
    const noAuth = await fetch(server.mcpUrl, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    assert.equal(noAuth.status, 401);
  });
});

describe('MCP door, default body cap', () => {
  let server: InProcessServer;
  let raw: RawSession;

  before(async () => {
    server = await startInProcess();
    raw = new RawSession(server.mcpUrl, TOKENS.alice);
    await raw.initialize();
  });
  after(async () => server?.close());

  test('one cap for both doors: MCP refuses what LMSP advertises as too large, and accepts up to it', async () => {
    const caps = await fetch(`${server.url}/lmsp/v1/capabilities`, { headers: { authorization: `Bearer ${TOKENS.alice}` } });
    const advertised = ((await caps.json()) as { limits: { max_body_bytes: number } }).limits.max_body_bytes;
    assert.equal(advertised, MAX_BODY_BYTES);
    const call = (pad: number) => JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/list', params: { _meta: { pad: 'p'.repeat(pad) } } });
    const overhead = Buffer.byteLength(call(0));
    const atCap = await raw.post(call(advertised - overhead));
    assert.equal(atCap.status, 200, 'a body of exactly the cap is read');
    const over = await raw.post(call(advertised - overhead + 1));
    assert.equal(over.status, 413);
    assert.equal(over.messages[0].error.code, -32600);
  });
});

describe('MCP door, creation limits', () => {
  let server: InProcessServer;
  let raw: RawSession;

  before(async () => {
    server = await startInProcess({ door: { limits: { maxActiveTasksPerPrincipal: 2, createBurst: 5, createPerSecond: 0.001 } } });
    raw = new RawSession(server.mcpUrl, TOKENS.alice);
    await raw.initialize();
  });
  after(async () => server?.close());

  const long = { name: 'generate_long', arguments: { prompt: 'long story please', temperature: 0, max_output_tokens: 1800 }, task: {} };
  const short = { name: 'generate', arguments: { prompt: 'x', temperature: 0, max_output_tokens: 1 }, task: {} };

  test('concurrency cap, queue position, then the rate limit', async () => {
    const a = await raw.call('tools/call', long);
    const b = await raw.call('tools/call', long);
    assert.equal(a.result.task.status, 'working');
    const queued = await raw.call('tasks/get', { taskId: b.result.task.taskId });
    assert.match(queued.result.statusMessage, /^queued: 1st(, |$)/);
    const c = await raw.call('tools/call', long);
    assert.equal(c.error.code, -32029);
    assert.match(c.error.message, /at most 2/);
    for (const t of [a, b]) {
      const r = await raw.call('tasks/cancel', { taskId: t.result.task.taskId });
      assert.equal(r.result.status, 'cancelled');
    }
    // Three tokens left of the burst of five (the refused call took none).
    for (let i = 0; i < 3; i++) {
      const r = await raw.call('tools/call', short);
      assert.ok(r.result, `creation ${i} allowed: ${JSON.stringify(r.error)}`);
      await raw.call('tasks/result', { taskId: r.result.task.taskId });
    }
    const limited = await raw.call('tools/call', short);
    assert.equal(limited.error.code, -32029);
    assert.match(limited.error.message, /rate limit/);
    assert.ok(limited.error.data.retryAfterMs > 0);
  });
});
