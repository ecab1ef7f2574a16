// Per-principal caps (runtime/shares.ts) over the real `task-runtime serve`, each door in its own form: alice goes
// over her share of unfinished tasks, open streams and stored bytes and is refused with the limit named (LMSP: 429 /
// 413 problem+json with the OpenAI `error` member, seen through the openai SDK; MCP 2025-11-25 through the SDK
// client and 2026-07-28 raw: -32029 with data.limit), while bob, on the same server at the same moment, is not.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import OpenAI from 'openai';
import { CreateTaskResultSchema, McpError } from '@modelcontextprotocol/sdk/types.js';
import { connect, connectWatchingStream } from '../mcp/harness';
import { ModernClient } from '../mcp/modernClient';
import { call, createTask, LONG_INPUT, removeDir, startRunningTask, startServer, waitForStatus, type Server } from './harness';

const QUEUED = 3;
const STREAMS = 2;
/**
 * Bytes (TASK_RUNTIME_LIMITS; the flag counts MiB, more than prompts the tiny model's 2 048-token context takes). A
 * task of a 1 500-byte prompt stores about 6 000 with its events (the cap counts them: runtime/shares.ts).
 */
const STORED_BYTES = 15_000;

describe('fair shares: per-principal caps on every door', () => {
  let server: Server;
  let alice: OpenAI;
  before(async () => {
    server = await startServer({
      // One task at a time, so that whose task runs next is the queue's choice.
      args: ['--concurrency', '1', '--max-queued-per-principal', String(QUEUED), '--max-streams-per-principal', String(STREAMS)],
      limits: { maxStoredBytesPerPrincipal: STORED_BYTES },
    });
    alice = new OpenAI({ apiKey: server.tokenA, baseURL: server.lmsp, maxRetries: 0 });
  });
  after(async () => {
    assert.equal(await server.stop(), 0);
    removeDir(server.dataDir);
  });

  it('unfinished tasks: alice at her cap gets 429 limit_exceeded on LMSP and both MCP eras; bob’s creates go through and run before her backlog', async () => {
    const { task: running } = await startRunningTask(server);
    const queued = [await createTask(server, LONG_INPUT), await createTask(server, LONG_INPUT)];

    // LMSP, raw: problem+json naming the limit, Retry-After.
    const raw = await call(server, 'POST', '/tasks', { body: { type: 'response', input: { model: server.model, input: 'x' } } });
    assert.equal(raw.status, 429);
    assert.match(String(raw.headers['content-type']), /^application\/problem\+json/);
    assert.equal(raw.json.code, 'limit_exceeded');
    assert.deepEqual(raw.json.limit, { name: 'max_queued_tasks_per_principal', max: QUEUED, current: QUEUED, unit: 'tasks' });
    assert.equal(raw.json.error.type, 'rate_limit_error');
    assert.match(String(raw.headers['retry-after']), /^\d+$/);
    // LMSP through the openai SDK.
    await assert.rejects(
      alice.responses.create({ model: server.model, input: 'x', max_output_tokens: 2 }),
      (e: unknown) => e instanceof OpenAI.RateLimitError && e.code === 'limit_exceeded' && /max_queued_tasks_per_principal = 3/.test(e.message),
    );
    // MCP 2025-11-25 through the SDK client.
    const legacyAlice = await connect(server.url + '/mcp', server.tokenA);
    await assert.rejects(
      legacyAlice.callTool({ name: 'generate', arguments: { prompt: 'x', max_output_tokens: 1 } }),
      (e: unknown) => e instanceof McpError && e.code === -32029 && (e.data as any)?.limit?.name === 'max_queued_tasks_per_principal',
    );
    // MCP 2026-07-28.
    const modernAlice = new ModernClient(server.url + '/mcp', server.tokenA);
    const refused = await modernAlice.request('tools/call', { name: 'generate_long', arguments: { prompt: 'x', max_output_tokens: 2 } });
    assert.equal(refused.body.error.code, -32029);
    assert.equal(refused.body.error.data.code, 'limit_exceeded');
    assert.equal(refused.body.error.data.limit.name, 'max_queued_tasks_per_principal');

    // Bob, meanwhile, on each door.
    const bobTask = await createTask(server, { max_output_tokens: 2 }, {}, server.tokenB);
    const legacyBob = await connect(server.url + '/mcp', server.tokenB);
    const bobLegacy = await legacyBob.request(
      { method: 'tools/call', params: { name: 'generate', arguments: { prompt: 'x', max_output_tokens: 2 }, task: {} } },
      CreateTaskResultSchema,
    );
    assert.ok(bobLegacy.task.taskId);
    const bobModern = await new ModernClient(server.url + '/mcp', server.tokenB).request('tools/call', {
      name: 'generate_long',
      arguments: { prompt: 'x', max_output_tokens: 2 },
    });
    assert.ok(bobModern.body.result?.taskId, JSON.stringify(bobModern.body));

    // Fair turns: once alice's running task ends, bob's first task runs before her two queued ones.
    await call(server, 'POST', `/tasks/${running.id}/cancel`);
    await waitForStatus(server, bobTask.id, ['succeeded'], server.tokenB);
    const ahead = await call(server, 'GET', `/tasks/${queued[1].id}`);
    assert.equal(ahead.json.status, 'queued', 'alice’s second queued task still waits');
    for (const t of queued) await call(server, 'POST', `/tasks/${t.id}/cancel`);
    for (const t of queued) await waitForStatus(server, t.id, ['cancelled', 'succeeded']);
    await waitForStatus(server, bobLegacy.task.taskId, ['succeeded'], server.tokenB);
    await waitForStatus(server, bobModern.body.result.taskId, ['succeeded'], server.tokenB);
    await Promise.all([legacyAlice.close(), legacyBob.close()]);
  });

  /** Deletes a principal's finished tasks: the tests before left them, and their events count against the share. */
  const clearFinished = async (token: string) => {
    const mine = await call(server, 'GET', '/tasks?limit=100', { token });
    for (const t of mine.json.data)
      if (['succeeded', 'failed', 'cancelled'].includes(t.status)) await call(server, 'DELETE', `/tasks/${t.id}`, { token });
  };

  it('open streams: alice’s third stream answers 429 naming the limit on LMSP and on MCP’s GET stream; bob’s streams open', async () => {
    await clearFinished(server.tokenB);
    const controllers: AbortController[] = [];
    const open = async (path: string, token: string) => {
      const c = new AbortController();
      controllers.push(c);
      return fetch(server.lmsp + path, { headers: { authorization: `Bearer ${token}` }, signal: c.signal });
    };
    try {
      for (let i = 0; i < STREAMS; i++) assert.equal((await open('/task_runtime/changes', server.tokenA)).status, 200);
      const t = await createTask(server, { max_output_tokens: 2 }, {}, server.tokenB);
      const third = await open(`/task_runtime/changes`, server.tokenA);
      assert.equal(third.status, 429);
      const body = (await third.json()) as any;
      assert.equal(body.code, 'limit_exceeded');
      assert.deepEqual(body.limit, { name: 'max_streams_per_principal', max: STREAMS, current: STREAMS, unit: 'streams' });
      assert.equal((await open(`/tasks/${t.id}/events`, server.tokenB)).status, 200);
      assert.equal((await open('/task_runtime/changes', server.tokenB)).status, 200);
    } finally {
      for (const c of controllers) c.abort();
    }

    // MCP 2025-11-25: each session's GET stream counts against its principal (per door).
    const sessions = [];
    for (let i = 0; i < STREAMS; i++) {
      const s = await connectWatchingStream(server.url + '/mcp', server.tokenA);
      await s.streamOpen;
      sessions.push(s.client);
    }
    const init = await fetch(server.url + '/mcp', {
      method: 'POST',
      headers: { authorization: `Bearer ${server.tokenA}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
      }),
    });
    const sessionId = init.headers.get('mcp-session-id')!;
    await init.text();
    const get = await fetch(server.url + '/mcp', {
      headers: {
        authorization: `Bearer ${server.tokenA}`,
        accept: 'text/event-stream',
        'mcp-session-id': sessionId,
        'mcp-protocol-version': '2025-11-25',
      },
    });
    assert.equal(get.status, 429);
    const err = ((await get.json()) as any).error;
    assert.equal(err.code, -32029);
    assert.equal(err.data.limit.name, 'max_streams_per_principal');
    const bob = await connectWatchingStream(server.url + '/mcp', server.tokenB);
    await bob.streamOpen;
    await Promise.all([...sessions, bob.client].map((c) => c.close()));
  });

  it('stored bytes: a prompt over alice’s whole share is 413, one that would pass it 429; bob stores his', async () => {
    const prompt = (chars: number) => 'x'.repeat(chars);
    // The tests before left alice long outputs: deleting them frees her share at once.
    const mine = await call(server, 'GET', '/tasks?limit=100');
    for (const t of mine.json.data) assert.equal((await call(server, 'DELETE', `/tasks/${t.id}`)).status, 200);
    const tooBig = await call(server, 'POST', '/tasks', {
      body: { type: 'response', input: { model: server.model, input: prompt(STORED_BYTES + 1), max_output_tokens: 1 } },
    });
    assert.equal(tooBig.status, 413);
    assert.equal(tooBig.json.code, 'payload_too_large');
    assert.equal(tooBig.json.limit.name, 'max_stored_bytes_per_principal');
    assert.equal(tooBig.json.limit.max, STORED_BYTES);
    // Prompts of 1 500 bytes fill the share in a few tasks (their outputs and events count too).
    let stored = 0;
    for (;;) {
      const r = await call(server, 'POST', '/tasks', {
        body: { type: 'response', input: { model: server.model, input: prompt(1500), max_output_tokens: 1 } },
      });
      if (r.status === 429) {
        assert.equal(r.json.limit.name, 'max_stored_bytes_per_principal');
        assert.ok(r.json.limit.current > STORED_BYTES - 1600, JSON.stringify(r.json.limit));
        assert.equal(r.headers['retry-after'], undefined, 'bytes come free by deleting, not by waiting');
        break;
      }
      assert.equal(r.status, 202, r.text);
      await waitForStatus(server, r.json.id, ['succeeded', 'failed']);
      assert.ok(++stored <= 4, 'the share is reached within four tasks');
    }
    assert.ok(stored >= 2);
    await assert.rejects(
      alice.responses.create({ model: server.model, input: prompt(1500), max_output_tokens: 1 }),
      (e: unknown) => e instanceof OpenAI.RateLimitError && e.code === 'limit_exceeded' && /max_stored_bytes_per_principal/.test(e.message),
    );
    await clearFinished(server.tokenB);
    const bob = await createTask(server, { input: prompt(1500), max_output_tokens: 1 }, {}, server.tokenB);
    await waitForStatus(server, bob.id, ['succeeded'], server.tokenB);
  });
});
