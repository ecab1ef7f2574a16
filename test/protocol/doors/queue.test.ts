// The queue through every door, with each door's real client: a priority on create (LMSP task `priority`, the
// `task_runtime.priority` vendor member of /responses and chat completions, the Messages door's `metadata.priority`,
// MCP's `_meta["task-runtime/priority"]`), the place and expected start of a queued task (LMSP task object,
// GET /responses/{id}, MCP statusMessage), run next, cancel by filter (LMSP route, MCP tool), and /metrics' depths.
// One slot, held by a gated run, keeps everything else queued while the test reads it.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CreateTaskResultSchema } from '@modelcontextprotocol/sdk/types.js';
import OpenAI from 'openai';
import { startEndpoint, type Endpoint } from '../../../src/protocols/endpoint';
import { TaskRuntime } from '../../../src/runtime/runtime';
import { Gate, ScriptedBackend } from '../../fixtures/scriptedBackend';
import { waitFor } from '../../support/wait';

const TOKEN = 'tok-queue-doors-0123456789';
const OTHER = 'tok-queue-other-0123456789';

describe('the queue through every door', () => {
  let dataDir: string;
  let runtime: TaskRuntime;
  let endpoint: Endpoint;
  let mcp: Client;
  const gate = new Gate();

  const lmsp = async (method: string, p: string, body?: unknown, token = TOKEN) => {
    const res = await fetch(endpoint.lmspUrl + p, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as Record<string, any> };
  };
  const newTask = (input: string, priority?: number, token = TOKEN) =>
    lmsp('POST', '/tasks', { type: 'response', input: { model: 'm', input }, ...(priority === undefined ? {} : { priority }) }, token);

  before(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tr-queue-doors-'));
    runtime = await TaskRuntime.open({ dataDir, backend: new ScriptedBackend(gate.script), deltaFlushMs: 0 });
    endpoint = await startEndpoint(runtime, {
      port: 0,
      tokens: new Map([
        [TOKEN, 'alice'],
        [OTHER, 'bob'],
      ]),
    });
    mcp = new Client({ name: 'queue-doors', version: '1.0.0' }, { capabilities: { tasks: { requests: { elicitation: {} } } } as never });
    await mcp.connect(
      new StreamableHTTPClientTransport(new URL(endpoint.mcpUrl), { requestInit: { headers: { authorization: `Bearer ${TOKEN}` } } }),
    );
    const holder = await newTask('holds the one slot');
    assert.equal(holder.status, 202);
    await gate.started(1);
  });

  after(async () => {
    gate.release();
    await mcp?.close();
    await endpoint?.close();
    await runtime?.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('every door takes a priority and refuses one out of range in its own error form', async () => {
    const bad = await newTask('x', 11);
    assert.equal(bad.status, 400);
    assert.equal(bad.body.param, 'priority');

    const openai = new OpenAI({ baseURL: endpoint.lmspUrl, apiKey: TOKEN, maxRetries: 0 });
    await assert.rejects(
      openai.responses.create({ model: 'm', input: 'x', background: true, task_runtime: { priority: 20 } } as never),
      (e: unknown) => e instanceof OpenAI.BadRequestError && /priority/.test(e.message),
    );
    const bg = await openai.responses.create({ model: 'm', input: 'responses', background: true, task_runtime: { priority: 3 } } as never);
    const chat = openai.chat.completions
      .create({ model: 'm', messages: [{ role: 'user', content: 'chat' }], task_runtime: { priority: -4 } } as never)
      .catch((e: unknown) => e);
    const anthropic = new Anthropic({ baseURL: endpoint.anthropicUrl, apiKey: TOKEN, maxRetries: 0 });
    const messages = anthropic.messages
      .create({ model: 'm', max_tokens: 16, messages: [{ role: 'user', content: 'messages' }], metadata: { priority: 5 } as never })
      .catch((e: unknown) => e);
    await assert.rejects(
      mcp.request(
        { method: 'tools/call', params: { name: 'generate', arguments: { prompt: 'x' }, task: {}, _meta: { 'task-runtime/priority': 'high' } } },
        CreateTaskResultSchema,
      ),
      /task-runtime\/priority.*-10 to 10/,
    );
    const viaMcp = await mcp.request(
      { method: 'tools/call', params: { name: 'generate', arguments: { prompt: 'mcp' }, task: {}, _meta: { 'task-runtime/priority': 8 } } },
      CreateTaskResultSchema,
    );

    await waitFor(() => runtime.countTasks('alice').byStatus.queued === 4, 'four queued');
    const byPrompt = new Map(runtime.listTasks({ principal: 'alice', statuses: ['queued'] }).tasks.map((t) => [t.title, t] as const));
    assert.deepEqual(
      ['responses', 'chat', 'messages', 'mcp'].map((p) => byPrompt.get(p)?.priority),
      [3, -4, 5, 8],
    );
    // Higher first among alice's own: mcp (8), messages (5), responses (3), chat (-4).
    assert.deepEqual(
      ['mcp', 'messages', 'responses', 'chat'].map((p) => runtime.queueInfo(byPrompt.get(p)!.id)?.position),
      [1, 2, 3, 4],
    );
    assert.equal(viaMcp.task.statusMessage, 'queued: 1st');
    const polled = await mcp.experimental.tasks.getTask(viaMcp.task.taskId);
    assert.equal(polled.statusMessage, 'queued: 1st');

    const retrieved = (await openai.responses.retrieve(bg.id)) as unknown as { task_runtime?: { queue?: Record<string, unknown> } };
    assert.deepEqual(retrieved.task_runtime?.queue, { position: 3, priority: 3, expected_start_at: null, expected_start_at_ms: null });

    // cancel_tasks (MCP): alice's queued tasks, in one call; the blocked chat and Messages calls end with it.
    const cancelled = await mcp.callTool({ name: 'cancel_tasks', arguments: {} });
    assert.equal((cancelled.structuredContent as { count: number }).count, 4);
    assert.equal(((await mcp.callTool({ name: 'cancel_tasks', arguments: {} })).structuredContent as { count: number }).count, 0);
    await chat;
    await messages;
    assert.equal(runtime.countTasks('alice').byStatus.queued, 0);
  });

  it('LMSP: the task object tells a queued task’s place; run next and cancel by filter act on one’s own tasks', async () => {
    const a = (await newTask('first')).body;
    const b = (await newTask('second', -1)).body;
    const theirs = (await newTask('bob’s', 0, OTHER)).body;
    assert.deepEqual(a.task_runtime.queue, { position: 1, priority: 0, expected_start_at: null, expected_start_at_ms: null }, 'alone then');
    assert.equal(a.task_runtime.priority, 0);
    assert.equal((await lmsp('GET', `/tasks/${a.id}`)).body.task_runtime.queue.position, 2, 'bob’s first task goes before it now');
    assert.equal((await lmsp('GET', `/tasks/${b.id}`)).body.task_runtime.queue.position, 3);
    assert.equal((await lmsp('GET', `/tasks/${theirs.id}`, undefined, OTHER)).body.task_runtime.queue.position, 1, 'bob was never served');

    const moved = await lmsp('POST', `/tasks/${b.id}/run_next`);
    assert.equal(moved.status, 200);
    assert.deepEqual([moved.body.task_runtime.priority, moved.body.task_runtime.queue.position], [10, 2]);
    assert.equal((await lmsp('POST', `/tasks/${b.id}/run_next`, undefined, OTHER)).status, 404, 'not bob’s');

    const metrics = await (await fetch(`${endpoint.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })).text();
    assert.match(metrics, /^task_runtime_queue_depth\{model="m"\} 3$/m);
    assert.match(metrics, /^task_runtime_queue_depth_by_principal\{principal="alice"\} 2$/m);
    assert.match(metrics, /^task_runtime_queue_oldest_wait_seconds \d/m);

    const badFilter = await lmsp('POST', '/task_runtime/cancel', { status: ['done'] });
    assert.equal(badFilter.status, 400);
    const none = await lmsp('POST', '/task_runtime/cancel', { model: 'another' });
    assert.deepEqual(none.body.data, []);
    const cleared = await lmsp('POST', '/task_runtime/cancel', {});
    assert.deepEqual(cleared.body.data.map((t: { id: string }) => t.id).sort(), [a.id, b.id].sort());
    assert.ok(cleared.body.data.every((t: { status: string }) => t.status === 'cancelled'));
    assert.equal((await lmsp('GET', `/tasks/${theirs.id}`, undefined, OTHER)).body.status, 'queued', 'bob’s task is untouched');
    await lmsp('POST', '/task_runtime/cancel', {}, OTHER);
  });
});
