// The tasks/get fast path (taskGetFastPath.ts) against the SDK transport path, on one door as served: each request
// goes once as it is (the fast path takes it) and once with an empty `_meta` in its params, which the fast path
// leaves to the SDK (the SDK parses `_meta`; our handler's result does not depend on it). For every case the
// JSON-RPC message must be byte for byte the one the SDK path sends (inside its one SSE event), with the same status
// and session header; and every request the fast path must not take is answered by the SDK (SSE or its error).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { LlamaBackend } from '../../../src/backends/llama/llamaBackend';
import { startListener, type Listener } from '../../../src/protocols/http/listener';
import { createMcpDoor, type McpDoor } from '../../../src/protocols/mcp/mcpDoor';
import type { GenerateOptions, GenerateRequest, GenerateResult, ModelBackend } from '../../../src/runtime/backend';
import { TaskRuntime } from '../../../src/runtime/runtime';
import { until } from '../../support/wait';
import { MODEL_ID, slowModelPath, TOKENS } from './harness';

interface Answer {
  status: number;
  contentType: string;
  sessionId: string | null;
  contentLength: string | null;
  body: string;
}

async function post(url: string, sessionId: string | undefined, body: string, headers: Record<string, string> = {}): Promise<Answer> {
  const res = await fetch(url, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${TOKENS.alice}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2025-11-25',
      ...(sessionId ? { 'mcp-session-id': sessionId } : {}),
      ...headers,
    },
    body,
  });
  return {
    status: res.status,
    contentType: res.headers.get('content-type') ?? '',
    sessionId: res.headers.get('mcp-session-id'),
    contentLength: res.headers.get('content-length'),
    body: await res.text(),
  };
}

/** The one JSON-RPC message of an SSE answer, exactly as the SDK wrote it (`event: message\ndata: <json>\n\n`). */
function sseMessage(a: Answer): string {
  assert.match(a.contentType, /^text\/event-stream/, `SDK path answered ${a.status} ${a.contentType} ${a.body}`);
  const m = /^event: message\ndata: (.*)\n\n$/.exec(a.body);
  assert.ok(m, `one SSE message expected, got ${JSON.stringify(a.body)}`);
  return m[1];
}

/** The same request for the SDK path: an empty `_meta` in a single request's params (the fast path declines it). */
function viaSdk(body: string): string {
  const msg = JSON.parse(body) as Record<string, unknown>;
  const params = (msg.params ?? {}) as Record<string, unknown>;
  return JSON.stringify({ ...msg, params: { ...params, _meta: {} } });
}

async function openSession(url: string): Promise<string> {
  const init = await post(
    url,
    undefined,
    JSON.stringify({
      jsonrpc: '2.0',
      id: 0,
      method: 'initialize',
      params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'bytes', version: '1' } },
    }),
  );
  assert.equal(init.status, 200);
  assert.ok(init.sessionId);
  const ack = await post(url, init.sessionId, JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
  assert.equal(ack.status, 202);
  return init.sessionId;
}

describe('MCP tasks/get fast path: the same bytes as the SDK path', () => {
  let dataDir: string;
  let backend: LlamaBackend;
  let runtime: TaskRuntime;
  let door: McpDoor;
  let listener: Listener;
  let url: string;
  let fastSession: string;
  let sdkSession: string;
  const ids: Record<string, string> = {};

  before(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'mcp-fastpath-'));
    backend = new LlamaBackend({ models: [{ id: MODEL_ID, source: slowModelPath(), demo: true }], suppressEndOfGeneration: true });
    // A run whose prompt says "hold" emits nothing until it is stopped: its view ("generating: 0 tokens") and the
    // queue behind it stand still, so every state compares byte for byte.
    const held: ModelBackend = new Proxy(backend, {
      get(target, key) {
        if (key === 'generate') {
          return (request: GenerateRequest, options: GenerateOptions): Promise<GenerateResult> =>
            JSON.stringify(request.messages).includes('hold')
              ? new Promise((resolve) =>
                  options.signal.addEventListener('abort', () => resolve({ finishReason: 'aborted', inputTokens: 1, outputTokens: 0 }), {
                    once: true,
                  }),
                )
              : target.generate(request, options);
        }
        const v = Reflect.get(target, key, target) as unknown;
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    });
    runtime = await TaskRuntime.open({ dataDir, backend: held });
    door = createMcpDoor(runtime);
    listener = await startListener({
      port: 0,
      tokens: new Map([
        [TOKENS.alice, 'alice'],
        [TOKENS.bob, 'bob'],
      ]),
      doors: [{ prefix: '/mcp', handler: door.handle, problemStyle: 'jsonrpc' }],
    });
    url = `${listener.url}/mcp`;
    fastSession = await openSession(url);
    sdkSession = await openSession(url);

    // Tasks in every state: finished three ways, one running (held), one queued behind it.
    const mcpTask = (input: string, maxTokens: number | undefined, extra: { deadlineMs?: number } = {}) =>
      runtime.createTask({
        origin: 'mcp',
        principal: 'alice',
        input: { model: MODEL_ID, input, ...(maxTokens !== undefined ? { max_output_tokens: maxTokens } : {}), temperature: 0 },
        meta: { tool: 'generate' },
        ttlMs: 3_600_000,
        ...extra,
      }).task.id;
    ids.succeeded = mcpTask('finish "quoted" \u2028 ünïcode', 3);
    await runtime.waitForTerminal(ids.succeeded);
    ids.failed = mcpTask('too slow', undefined, { deadlineMs: 50 });
    await runtime.waitForTerminal(ids.failed);
    ids.running = mcpTask('hold: keeps running', undefined); // no budget: up to the context
    await until(() => runtime.getTask(ids.running)?.status === 'running', 'the held task runs');
    ids.queued = mcpTask('waits its turn', 4);
    ids.cancelled = mcpTask('cancelled while queued', 4);
    runtime.cancelTask(ids.cancelled, 'alice', 'not needed');
    ids.lmsp = runtime.createTask({
      origin: 'lmsp',
      principal: 'alice',
      input: { model: MODEL_ID, input: 'not an MCP task', max_output_tokens: 1 },
    }).task.id;
    ids.bobs = runtime.createTask({
      origin: 'mcp',
      principal: 'bob',
      input: { model: MODEL_ID, input: 'bob', max_output_tokens: 1 },
      meta: { tool: 'generate' },
    }).task.id;
  });

  after(async () => {
    await door?.close();
    await listener?.close();
    await runtime?.close();
    await backend?.dispose();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  /** Sends the body as it is and by the SDK path; asserts the fast path answered and its message is the SDK's, byte for byte. */
  async function same(body: string, label: string, headers: Record<string, string> = {}): Promise<string> {
    const a = await post(url, fastSession, body, headers);
    const b = await post(url, sdkSession, viaSdk(body), headers);
    assert.match(b.contentType, /^text\/event-stream/, `${label}: the _meta form took the SDK path`);
    assert.equal(a.status, b.status, `${label}: status`);
    assert.equal(a.status, 200, label);
    assert.equal(a.contentType, 'application/json', `${label}: the fast path answered (plain JSON, the SDK's JSON-response framing)`);
    assert.equal(a.sessionId, fastSession, `${label}: mcp-session-id echoed`);
    assert.equal(b.sessionId, sdkSession, `${label}: mcp-session-id echoed by the SDK`);
    assert.equal(a.contentLength, String(Buffer.byteLength(a.body)), `${label}: content-length`);
    assert.equal(a.body, sseMessage(b), `${label}: the JSON-RPC message differs from the SDK path's`);
    return a.body;
  }

  test('results: finished, failed, cancelled and queued tasks, numeric and string ids; a cached read is the same bytes', async () => {
    for (const state of ['succeeded', 'failed', 'cancelled', 'running', 'queued'] as const) {
      for (const id of [7, 'req-"x"-\u00e9', 0, -3, 9007199254740991]) {
        const body = JSON.stringify({ jsonrpc: '2.0', id, method: 'tasks/get', params: { taskId: ids[state] } });
        const first = await same(body, `${state} id ${JSON.stringify(id)}`);
        assert.equal(JSON.parse(first).result.taskId, ids[state]);
        assert.equal(await same(body, `${state} again`), first, 'a second read (cache) gives the same bytes');
      }
    }
    // Key order and params order of the request do not matter; extra params are passed through by both.
    await same(`{"params":{"extra":1,"taskId":"${ids.succeeded}"},"method":"tasks/get","id":"z","jsonrpc":"2.0"}`, 'reordered');
    // Headers the SDK accepts as they are: media-type parameters, other Accept forms, no MCP-Protocol-Version.
    const plain = JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'tasks/get', params: { taskId: ids.succeeded } });
    await same(plain, 'content-type with parameters', { 'content-type': 'Application/JSON; charset=utf-8' });
    await same(plain, 'accept with q-values', { accept: 'text/event-stream;q=0.9, application/json' });
    await same(plain, 'older protocol version', { 'mcp-protocol-version': '2025-06-18' });
    const views = await Promise.all(
      (['succeeded', 'failed', 'cancelled', 'running', 'queued'] as const).map(async (s) => {
        const r = await post(url, fastSession, JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tasks/get', params: { taskId: ids[s] } }));
        return JSON.parse(r.body) as { result: { status: string; statusMessage: string } };
      }),
    );
    assert.deepEqual(
      views.map((v) => [v.result.status, v.result.statusMessage.split(/[ :]/)[0]]),
      [
        ['completed', 'completed'],
        ['failed', 'failed'],
        ['cancelled', 'cancelled'],
        ['working', 'generating'],
        ['working', 'queued'],
      ],
    );
    assert.deepEqual(Object.keys(views[0]), ['result', 'jsonrpc', 'id'], 'the SDK Protocol key order');
  });

  test('errors: unknown, foreign, non-MCP, missing and malformed task ids', async () => {
    const cases: Array<[string, unknown]> = [
      ['unknown id', { taskId: 'task_doesnotexist0000000000000' }],
      ["another principal's task", { taskId: ids.bobs }],
      ['an LMSP task', { taskId: ids.lmsp }],
      ['no taskId', {}],
      ['numeric taskId', { taskId: 42 }],
      ['empty taskId', { taskId: '' }],
      ['overlong taskId', { taskId: 'x'.repeat(201) }],
    ];
    for (const [label, params] of cases) {
      const body = await same(JSON.stringify({ jsonrpc: '2.0', id: 5, method: 'tasks/get', params }), label);
      assert.equal(JSON.parse(body).error.code, -32602, label);
    }
    // No params at all: the SDK form needs params for its `_meta`, so only the fast path's own answer is checked.
    const none = await post(url, fastSession, JSON.stringify({ jsonrpc: '2.0', id: 5, method: 'tasks/get' }));
    assert.equal(none.contentType, 'application/json');
    assert.equal(JSON.parse(none.body).error.code, -32602);
  });

  test('requests the SDK treats differently are left to it: the SDK answers them', async () => {
    const ok = { jsonrpc: '2.0', id: 9, method: 'tasks/get', params: { taskId: ids.succeeded } };
    const cases: Array<[string, string, Record<string, string>]> = [
      ['Accept without text/event-stream', JSON.stringify(ok), { accept: 'application/json' }],
      ['a +json content type', JSON.stringify(ok), { 'content-type': 'application/vnd.x+json' }],
      ['unsupported protocol version', JSON.stringify(ok), { 'mcp-protocol-version': '1999-01-01' }],
      ['fractional id', JSON.stringify({ ...ok, id: 1.5 }), {}],
      ['unsafe integer id', '{"jsonrpc":"2.0","id":9007199254740993,"method":"tasks/get","params":{"taskId":"x"}}', {}],
      ['extra member', JSON.stringify({ ...ok, extra: true }), {}],
      ['params with _meta', JSON.stringify({ ...ok, params: { taskId: ids.succeeded, _meta: { progressToken: 1 } } }), {}],
      ['params with task', JSON.stringify({ ...ok, params: { taskId: ids.succeeded, task: { ttl: 1000 } } }), {}],
      ['params an array', JSON.stringify({ ...ok, params: [ids.succeeded] }), {}],
      ['params null', JSON.stringify({ ...ok, params: null }), {}],
      ['a batch', JSON.stringify([ok]), {}],
    ];
    for (const [label, body, headers] of cases) {
      const a = await post(url, fastSession, body, headers);
      // The fast path answers only 200 with plain JSON; the SDK answers a request it runs as SSE and a refusal as an
      // error status.
      assert.ok(
        !(a.status === 200 && a.contentType === 'application/json'),
        `${label}: the fast path must not answer (${a.status} ${a.contentType})`,
      );
      if (a.status === 200) sseMessage(a);
    }
  });
});
