// MCP 2026-07-28 with the tasks extension on the same /mcp endpoint as 2025-11-25, driven by a raw fetch client
// (modernClient.ts) against an in-process listener with the real runtime and the tiny generated model: base
// protocol (discover, envelope, headers, error codes, resultType), the tasks extension, and one task seen through
// both eras and LMSP.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { CreateTaskResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { connect, RawSession, startInProcess, TOKENS, type InProcessServer } from './harness';
import { until } from '../../support/wait';
import { ModernClient, TASKS_EXT, V } from './modernClient';

const LONG = { prompt: 'long story please', temperature: 0, max_output_tokens: 1800 };
const SHORT = { prompt: 'hi', temperature: 0, max_output_tokens: 4 };

function assertInt(v: unknown, what: string): void {
  assert.ok(typeof v === 'number' && Number.isInteger(v) && v > 0, `${what} must be a positive integer, got ${JSON.stringify(v)}`);
}

describe('MCP 2026-07-28 on /mcp', () => {
  let server: InProcessServer;
  let alice: ModernClient;
  let bare: ModernClient;
  let bob: ModernClient;

  before(async () => {
    server = await startInProcess({ door: { pollIntervalMs: 250 } });
    alice = new ModernClient(server.mcpUrl, TOKENS.alice);
    bare = new ModernClient(server.mcpUrl, TOKENS.alice, false);
    bob = new ModernClient(server.mcpUrl, TOKENS.bob);
  });
  after(async () => server?.close());

  async function running(client: ModernClient, taskId: string): Promise<void> {
    await until(async () => {
      const t = await client.result('tasks/get', { taskId });
      assert.notEqual(t.status, 'completed', 'the long task ended before it could be observed running');
      return /^generating: [1-9]/.test(t.statusMessage) ? t : undefined;
    }, `${taskId} to generate`);
  }

  async function terminal(client: ModernClient, taskId: string): Promise<any> {
    return until(async () => {
      const t = await client.result('tasks/get', { taskId });
      return ['completed', 'failed', 'cancelled'].includes(t.status) ? t : undefined;
    }, `${taskId} to end`);
  }

  test('server/discover: modern versions, tools + exactly {} for the extension, no legacy tasks block, cache hints', async () => {
    const r = await bare.request('server/discover');
    assert.equal(r.status, 200);
    assert.match(r.headers.get('content-type') ?? '', /^application\/json/);
    const d = r.body.result;
    assert.equal(r.body.id, 1);
    assert.equal(d.resultType, 'complete');
    assert.deepEqual(d.supportedVersions, [V]);
    assert.deepEqual(d.capabilities, { tools: {}, extensions: { [TASKS_EXT]: {} } });
    assert.equal('tasks' in d.capabilities, false);
    assertInt(d.ttlMs, 'ttlMs');
    assert.equal(d.cacheScope, 'private');
    assert.equal(d._meta['io.modelcontextprotocol/serverInfo'].name, 'task-runtime');
    assert.match(d.instructions, /generate_long always runs as a task/);
  });

  test('tools/list in the 2026 shape: no execution field, resultType, ttlMs, cacheScope', async () => {
    const l = await bare.result('tools/list');
    assert.equal(l.resultType, 'complete');
    assert.deepEqual(
      l.tools.map((t: { name: string }) => t.name),
      ['generate', 'generate_long', 'get_task_text', 'list_models', 'cancel_tasks', 'embed', 'search_workspace'],
    );
    for (const t of l.tools) {
      assert.equal('execution' in t, false, `${t.name} has no execution in 2026-07-28`);
      assert.equal(t.inputSchema.type, 'object');
    }
    assertInt(l.ttlMs, 'ttlMs');
    assert.equal(l.cacheScope, 'private');
    const bad = await bare.request('tools/list', { cursor: 'nope' });
    assert.equal(bad.status, 400);
    assert.equal(bad.body.error.code, -32602);
  });

  test('headers are checked against the body: -32020, HTTP 400, the request id echoed', async () => {
    const cases: Array<[string, Record<string, unknown>, Record<string, string | null>, RegExp]> = [
      ['tools/list', {}, { 'mcp-protocol-version': null }, /Missing MCP-Protocol-Version/],
      ['tools/list', {}, { 'mcp-protocol-version': '2025-11-25' }, /does not match/],
      ['tools/list', {}, { 'mcp-method': null }, /Missing Mcp-Method/],
      ['tools/call', { name: 'list_models', arguments: {} }, { 'mcp-method': 'tasks/get' }, /Mcp-Method header "tasks\/get" does not match/],
      ['tools/call', { name: 'list_models', arguments: {} }, { 'mcp-name': null }, /Missing Mcp-Name/],
      ['tools/call', { name: 'list_models', arguments: {} }, { 'mcp-name': 'generate' }, /Mcp-Name header does not match params.name/],
      ['tasks/get', { taskId: 'task_x' }, { 'mcp-name': 'task_y' }, /Mcp-Name header does not match params.taskId/],
    ];
    for (const [method, params, headers, message] of cases) {
      const r = await alice.request(method, params, { headers, id: `h-${method}` });
      assert.equal(r.status, 400, `${method} ${JSON.stringify(headers)}`);
      assert.equal(r.body.id, `h-${method}`);
      assert.equal(r.body.error.code, -32020, `${method} ${JSON.stringify(headers)}: ${JSON.stringify(r.body)}`);
      assert.match(r.body.error.message, message);
    }
    // SEP-2243 base64 form of a header value is decoded before comparing.
    const encoded = `=?base64?${Buffer.from('list_models').toString('base64')}?=`;
    const ok = await alice.request('tools/call', { name: 'list_models', arguments: {} }, { headers: { 'mcp-name': encoded } });
    assert.equal(ok.status, 200, JSON.stringify(ok.body));
    assert.equal(ok.body.result.resultType, 'complete');
  });

  test('envelope: missing keys -32602, unsupported version -32022 with the supported list, bad clientInfo -32602', async () => {
    const noCaps = await alice.request('tools/list', {}, { meta: { 'io.modelcontextprotocol/clientCapabilities': undefined } });
    assert.equal(noCaps.status, 400);
    assert.equal(noCaps.body.error.code, -32602);
    assert.match(noCaps.body.error.message, /clientCapabilities/);
    const old = await alice.request(
      'tools/list',
      {},
      { meta: { 'io.modelcontextprotocol/protocolVersion': '2099-01-01' }, headers: { 'mcp-protocol-version': '2099-01-01' } },
    );
    assert.equal(old.status, 400);
    assert.equal(old.body.error.code, -32022);
    assert.deepEqual(old.body.error.data, { supported: [V], requested: '2099-01-01' });
    const info = await alice.request('tools/list', {}, { meta: { 'io.modelcontextprotocol/clientInfo': 'me' } });
    assert.equal(info.body.error.code, -32602);
    assert.match(info.body.error.message, /clientInfo/);
    // A modern header without the body envelope is not sent to the legacy "initialize first" answer.
    const headerOnly = await alice.raw({ jsonrpc: '2.0', id: 'ho', method: 'tools/list' }, alice.headersFor('tools/list', {}));
    assert.equal(headerOnly.status, 400);
    assert.equal(headerOnly.body.id, 'ho');
    assert.equal(headerOnly.body.error.code, -32602);
    assert.match(headerOnly.body.error.message, /_meta/);
  });

  test('unknown and removed methods: HTTP 404 + -32601 (tasks/result, tasks/list, ping, initialize-less era)', async () => {
    for (const method of ['tasks/result', 'tasks/list', 'ping', 'initialize', 'resources/list', 'nope/nope']) {
      const r = await alice.request(method, method.startsWith('tasks/') ? { taskId: 'task_x' } : {}, { id: method });
      assert.equal(r.status, 404, method);
      assert.equal(r.body.id, method);
      assert.equal(r.body.error.code, -32601, method);
    }
  });

  test('method names of Object.prototype are unknown methods like any other, with a plain message', async () => {
    for (const method of ['__proto__', 'constructor', 'toString', 'hasOwnProperty', 'valueOf']) {
      const r = await alice.request(method, {}, { id: method });
      assert.equal(r.status, 404, method);
      assert.equal(r.body.id, method);
      assert.equal(r.body.error.code, -32601, method);
      assert.equal(r.body.error.message, `Method not found: ${method}`);
    }
  });

  test('a numeric id past 2^53 is refused as an invalid request, never echoed changed (both eras)', async () => {
    const big = '12345678901234567890';
    const body = `{"jsonrpc":"2.0","id":${big},"method":"server/discover","params":{"_meta":${JSON.stringify(alice.envelope())}}}`;
    const modern = await alice.raw(body, alice.headersFor('server/discover', {}));
    assert.equal(modern.status, 400);
    assert.equal(modern.body.id, null);
    assert.equal(modern.body.error.code, -32600);
    const legacy = await alice.raw(`{"jsonrpc":"2.0","id":${big},"method":"initialize","params":{}}`, {
      authorization: `Bearer ${TOKENS.alice}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
    });
    assert.equal(legacy.status, 400);
    assert.equal(legacy.body.id, null);
    assert.equal(legacy.body.error.code, -32600);
    // A safe one is echoed as sent.
    const ok = await alice.request('server/discover', {}, { id: Number.MAX_SAFE_INTEGER });
    assert.equal(ok.body.id, Number.MAX_SAFE_INTEGER);
  });

  // generate_long without the extension is answered synchronously (mcpNoTasks.test.ts), not refused.
  test('-32021 with requiredCapabilities: tasks/* without the extension; nothing is created', async () => {
    const before = server.runtime.countTasks('alice').total;
    for (const [method, params] of [
      ['tasks/get', { taskId: 'task_x' }],
      ['tasks/update', { taskId: 'task_x', inputResponses: {} }],
      ['tasks/cancel', { taskId: 'task_x' }],
    ] as const) {
      const r = await bare.request(method, params as Record<string, unknown>);
      assert.equal(r.status, 400, method);
      assert.equal(r.body.error.code, -32021, method);
      assert.deepEqual(r.body.error.data, { requiredCapabilities: { extensions: { [TASKS_EXT]: {} } } });
    }
    assert.equal(server.runtime.countTasks('alice').total, before);
  });

  test('which calls become tasks: generate_long always, generate only when long, never without the extension; a legacy task param is ignored', async () => {
    const short = await alice.result('tools/call', { name: 'generate', arguments: SHORT, task: { ttl: 5000 } });
    assert.equal(short.resultType, 'complete');
    assert.equal(short.isError, false);
    assert.equal(short.content[0].type, 'text');
    const shortNoExt = await bare.result('tools/call', { name: 'generate', arguments: { ...SHORT, max_output_tokens: 300 } });
    assert.equal(shortNoExt.resultType, 'complete', 'without the extension a long generate is answered synchronously');
    const long = await alice.result('tools/call', { name: 'generate', arguments: { ...SHORT, max_output_tokens: 256 } });
    assert.equal(long.resultType, 'task');
    const always = await alice.result('tools/call', { name: 'generate_long', arguments: SHORT });
    assert.equal(always.resultType, 'task');
    const helper = await alice.result('tools/call', { name: 'list_models', arguments: {} });
    assert.equal(helper.resultType, 'complete');
    for (const t of [long, always]) await terminal(alice, t.taskId);
  });

  test('task lifecycle: flat CreateTaskResult, tasks/get resolves at once, integer ttlMs/pollIntervalMs, result inlined when completed', async () => {
    const created = await alice.result('tools/call', { name: 'generate_long', arguments: { ...SHORT, max_output_tokens: 12 } });
    assert.equal(created.resultType, 'task');
    assert.match(created.taskId, /^task_/);
    assert.equal('task' in created, false, 'flat, no task wrapper');
    for (const legacy of ['ttl', 'pollInterval']) assert.equal(legacy in created, false, `no legacy ${legacy}`);
    assertInt(created.ttlMs, 'ttlMs');
    assertInt(created.pollIntervalMs, 'pollIntervalMs');
    assert.equal(created.pollIntervalMs, 250);
    assert.ok(!Number.isNaN(Date.parse(created.createdAt)));
    // Durable create: resolvable immediately.
    const first = await alice.request('tasks/get', { taskId: created.taskId });
    assert.equal(first.status, 200, JSON.stringify(first.body));
    assert.equal(first.body.result.resultType, 'complete');
    assert.equal(first.body.result.taskId, created.taskId);
    const done = await terminal(alice, created.taskId);
    assert.equal(done.status, 'completed');
    assert.equal(done.resultType, 'complete');
    assert.equal(done.result.isError, false);
    assert.equal(done.result.resultType, 'complete', 'the inlined result is what tools/call would have returned');
    assert.equal(done.result.structuredContent.outputTokens, 12);
    assert.equal(done.result._meta?.['io.modelcontextprotocol/related-task'], undefined);
    assert.equal('pollIntervalMs' in done, false, 'no poll hint on a finished task');
    assert.equal(done._meta['io.modelcontextprotocol/serverInfo'].name, 'task-runtime');
  });

  test('tasks/cancel is an acknowledged, idempotent ack; tasks/update acks; unknown and foreign ids are -32602', async () => {
    const t = await alice.result('tools/call', { name: 'generate_long', arguments: LONG });
    await running(alice, t.taskId);
    assert.deepEqual(await strip(alice.result('tasks/cancel', { taskId: t.taskId })), { resultType: 'complete' });
    assert.deepEqual(await strip(alice.result('tasks/cancel', { taskId: t.taskId })), { resultType: 'complete' });
    const end = await terminal(alice, t.taskId);
    assert.equal(end.status, 'cancelled');
    assert.equal('result' in end, false);
    assert.deepEqual(await strip(alice.result('tasks/cancel', { taskId: t.taskId })), { resultType: 'complete' }, 'terminal: still acked');
    assert.deepEqual(await strip(alice.result('tasks/update', { taskId: t.taskId, inputResponses: { k: { action: 'cancel' } } })), {
      resultType: 'complete',
    });
    const badUpdate = await alice.request('tasks/update', { taskId: t.taskId });
    assert.equal(badUpdate.body.error.code, -32602);
    assert.match(badUpdate.body.error.message, /inputResponses/);
    for (const method of ['tasks/get', 'tasks/cancel', 'tasks/update']) {
      const params = { taskId: t.taskId, ...(method === 'tasks/update' && { inputResponses: {} }) };
      const foreign = await bob.request(method, params);
      assert.equal(foreign.status, 400, method);
      assert.equal(foreign.body.error.code, -32602, `${method}: bob must not see alice's task`);
      const unknown = await alice.request(method, { ...params, taskId: 'task_doesnotexist000000' });
      assert.equal(unknown.body.error.code, -32602, method);
      assert.match(unknown.body.error.message, /not found/);
    }
  });

  test('a synchronous call abandoned by its client stops its generation', async () => {
    const gone = new AbortController();
    const params = { name: 'generate', arguments: LONG };
    const pending = fetch(server.mcpUrl, {
      method: 'POST',
      headers: bare.headersFor('tools/call', params),
      signal: gone.signal,
      body: JSON.stringify({ jsonrpc: '2.0', id: 's1', method: 'tools/call', params: { ...params, _meta: bare.envelope() } }),
    }).catch(() => undefined);
    const task = await until(
      () =>
        server.runtime
          .listTasks({ principal: 'alice', origin: 'mcp', limit: 50 })
          .tasks.find(
            (t) => t.status === 'running' && t.outputTokens > 0 && t.meta['era'] === V && t.request.max_output_tokens === 1800 && !t.meta['asTask'],
          ),
      'the synchronous task to generate',
    );
    gone.abort();
    await pending;
    const final = await server.runtime.waitForTerminal(task.id);
    assert.equal(final.status, 'cancelled');
  });
});

describe('one runtime task, both eras and LMSP', () => {
  let server: InProcessServer;
  let legacy: Client;
  let modern: ModernClient;

  before(async () => {
    server = await startInProcess();
    legacy = await connect(server.mcpUrl, TOKENS.alice);
    modern = new ModernClient(server.mcpUrl, TOKENS.alice);
  });
  after(async () => {
    await legacy?.close();
    await server?.close();
  });

  test('a legacy task is read and cancelled by a modern client, a modern task by a legacy client and LMSP, same id', async () => {
    const fromLegacy = (
      await legacy.request({ method: 'tools/call', params: { name: 'generate_long', arguments: LONG, task: {} } }, CreateTaskResultSchema)
    ).task;
    const seen = await modern.result('tasks/get', { taskId: fromLegacy.taskId });
    assert.equal(seen.taskId, fromLegacy.taskId);
    assert.equal(seen.status, 'working');
    await modern.result('tasks/cancel', { taskId: fromLegacy.taskId });
    const legacyView = await legacy.experimental.tasks.getTask(fromLegacy.taskId);
    assert.equal(legacyView.status, 'cancelled');

    const fromModern = await modern.result('tools/call', { name: 'generate_long', arguments: { ...SHORT, max_output_tokens: 6 } });
    const raw = new RawSession(server.mcpUrl, TOKENS.alice);
    await raw.initialize();
    const got = await raw.call('tasks/get', { taskId: fromModern.taskId });
    assert.equal(got.result.taskId, fromModern.taskId);
    const result = await raw.call('tasks/result', { taskId: fromModern.taskId });
    assert.equal(result.result.structuredContent.outputTokens, 6);
    const lmsp = await fetch(`${server.url}/lmsp/v1/tasks/${fromModern.taskId}`, { headers: { authorization: `Bearer ${TOKENS.alice}` } });
    assert.equal(lmsp.status, 200);
    assert.equal(((await lmsp.json()) as { id: string; status: string }).id, fromModern.taskId);
    const after = await modern.result('tasks/get', { taskId: fromModern.taskId });
    assert.equal(after.status, 'completed');
  });
});

async function strip(p: Promise<Record<string, unknown>>): Promise<Record<string, unknown>> {
  const { _meta, ...rest } = await p;
  assert.ok(_meta, 'every result carries _meta.serverInfo');
  return rest;
}
