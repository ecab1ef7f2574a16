// The MCP door driven by the SDK's real Client over Streamable HTTP, against an in-process listener with the
// real runtime, sql.js store and the tiny generated model.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import {
  CallToolResultSchema,
  CreateTaskResultSchema,
  ErrorCode,
  McpError,
  RELATED_TASK_META_KEY,
  TaskStatusNotificationSchema,
  type Task,
} from '@modelcontextprotocol/sdk/types.js';
import { sleep, until } from '../../support/wait';
import {
  connect,
  connectWatchingStream,
  MODEL_ID,
  rpcError,
  startInProcess,
  TASKS_CLIENT_CAPABILITIES,
  TOKENS,
  type InProcessServer,
} from './harness';

async function createTask(client: Client, name: string, args: Record<string, unknown>, ttl?: number): Promise<Task> {
  const r = await client.request(
    { method: 'tools/call', params: { name, arguments: args, task: ttl === undefined ? {} : { ttl } } },
    CreateTaskResultSchema,
  );
  return r.task;
}

async function tokensOf(client: Client, taskId: string): Promise<number> {
  const r = await client.callTool({ name: 'get_task_text', arguments: { taskId } });
  return (r.structuredContent as { outputTokens: number }).outputTokens;
}

describe('MCP door over the SDK client', () => {
  let server: InProcessServer;
  let alice: Client;
  let bob: Client;

  before(async () => {
    server = await startInProcess({ door: { pageSize: 3, pollIntervalMs: 200 }, limits: { maxTtlMs: 600_000, defaultTtlMs: 300_000 } });
    // Alice declares tasks as VS Code does (tools/list shows her task-only tools as such); bob declares none.
    alice = await connect(server.mcpUrl, TOKENS.alice, 'mcp-door-test', TASKS_CLIENT_CAPABILITIES);
    bob = await connect(server.mcpUrl, TOKENS.bob);
  });
  after(async () => {
    await alice?.close();
    await bob?.close();
    await server?.close();
  });

  test('initialize declares exactly tools and principal-scoped tasks', () => {
    assert.deepEqual(alice.getServerCapabilities(), {
      tools: {},
      tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } },
    });
    assert.match(alice.getInstructions() ?? '', /TTL: default 300000 ms, maximum 600000 ms/);
  });

  test('tools/list publishes taskSupport (to a client that declared tasks) and real input schemas', async () => {
    const { tools } = await alice.listTools();
    const support = Object.fromEntries(tools.map((t) => [t.name, t.execution?.taskSupport]));
    assert.deepEqual(support, {
      generate: 'optional',
      generate_long: 'required',
      get_task_text: 'forbidden',
      list_models: 'forbidden',
      cancel_tasks: 'forbidden',
      embed: 'forbidden',
      search_workspace: 'forbidden',
    });
    const generate = tools.find((t) => t.name === 'generate')!;
    assert.equal(generate.inputSchema.type, 'object');
    assert.ok(generate.inputSchema.properties && 'prompt' in generate.inputSchema.properties && 'messages' in generate.inputSchema.properties);
    assert.equal((generate.inputSchema as { additionalProperties?: boolean }).additionalProperties, false);
  });

  test('call as task, poll tasks/get at pollInterval, then tasks/result', async () => {
    const task = await createTask(alice, 'generate', { prompt: 'hello', temperature: 0, max_output_tokens: 24 });
    assert.match(task.taskId, /^task_/);
    assert.equal(task.status, 'working');
    assert.equal(task.ttl, 300_000, 'default TTL reported');
    assert.equal(task.pollInterval, 200);
    assert.ok(Date.parse(task.createdAt) > 0 && Date.parse(task.lastUpdatedAt) >= Date.parse(task.createdAt));
    let polled = task;
    let polls = 0;
    while (polled.status === 'working') {
      await sleep(polled.pollInterval ?? 200);
      polled = await alice.experimental.tasks.getTask(task.taskId);
      polls++;
      assert.ok(polls < 500, 'task never finished');
    }
    assert.equal(polled.status, 'completed');
    assert.equal(polled.ttl, 300_000);
    assert.match(polled.statusMessage ?? '', /^completed: 24 tokens$/);
    const result = await alice.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema);
    assert.equal(result.isError, false);
    const structured = result.structuredContent as { text: string; outputTokens: number; taskId: string };
    assert.equal(structured.outputTokens, 24);
    assert.equal(structured.taskId, task.taskId);
    assert.equal((result.content[0] as { text: string }).text, structured.text);
    assert.ok(structured.text.length > 0);
    assert.deepEqual(result._meta?.[RELATED_TASK_META_KEY], { taskId: task.taskId });
  });

  test('tasks/result blocks until the task is terminal', async () => {
    const task = await createTask(alice, 'generate_long', { prompt: 'write', temperature: 0, max_output_tokens: 400 });
    const before = await alice.experimental.tasks.getTask(task.taskId);
    assert.equal(before.status, 'working');
    const result = await alice.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema);
    const after = await alice.experimental.tasks.getTask(task.taskId);
    assert.equal(after.status, 'completed');
    assert.equal((result.structuredContent as { outputTokens: number }).outputTokens, 400);
  });

  test('optional tool without a task answers directly, with progress, and is still a visible task', async () => {
    const progress: number[] = [];
    const result = await alice.callTool(
      { name: 'generate', arguments: { messages: [{ role: 'user', content: 'hi' }], temperature: 0, max_output_tokens: 300 } },
      CallToolResultSchema,
      { onprogress: (p) => progress.push(p.progress) },
    );
    assert.equal(result.isError, false);
    const { taskId, outputTokens } = result.structuredContent as { taskId: string; outputTokens: number };
    assert.equal(outputTokens, 300);
    assert.ok(progress.length > 0, 'progress notifications arrived');
    assert.ok(
      progress.every((p, i) => i === 0 || p > progress[i - 1]),
      'progress increases',
    );
    const seen = await alice.experimental.tasks.getTask(taskId);
    assert.equal(seen.status, 'completed');
    assert.equal(seen.ttl, 300_000, 'synchronous calls get the default TTL too (no immortal hidden task)');
  });

  test('requested TTL above the maximum is capped and reported', async () => {
    const task = await createTask(alice, 'generate', { prompt: 'x', temperature: 0, max_output_tokens: 2 }, 10_000_000_000);
    assert.equal(task.ttl, 600_000);
    await alice.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema);
  });

  test('TTL expiry: the task is gone (-32602) once ttl from createdAt has passed', async () => {
    const task = await createTask(alice, 'generate', { prompt: 'x', temperature: 0, max_output_tokens: 2 }, 1000);
    assert.equal(task.ttl, 1000);
    // Under load the task may still be queued when its TTL ends; it is deleted whatever its status (spec).
    const err = await until(async () => {
      try {
        await alice.experimental.tasks.getTask(task.taskId);
        return undefined;
      } catch (e) {
        return e as McpError;
      }
    }, 'TTL expiry');
    assert.equal(err.code, ErrorCode.InvalidParams);
    assert.ok(Date.now() >= Date.parse(task.createdAt) + 1000);
    assert.equal((await rpcError(alice.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema))).code, ErrorCode.InvalidParams);
  });

  test('cancel mid-generation: cancelled in the reply, generation stops, result is the documented isError', async () => {
    const task = await createTask(alice, 'generate_long', { prompt: 'long story please', temperature: 0, max_output_tokens: 1800 });
    await until(async () => (await tokensOf(alice, task.taskId)) > 0, 'first tokens');
    const cancelled = await alice.experimental.tasks.cancelTask(task.taskId);
    assert.equal(cancelled.status, 'cancelled');
    const result = await alice.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema);
    assert.equal(result.isError, true);
    const sc = result.structuredContent as { status: string; outputTokens: number; text: string };
    assert.equal(sc.status, 'cancelled');
    assert.ok(sc.outputTokens < 1800, `stopped early (${sc.outputTokens} tokens)`);
    const first = await tokensOf(alice, task.taskId);
    assert.equal(first, sc.outputTokens);
    // One run at a time here: a task created now runs only once the cancelled run has returned from the backend.
    const next = await createTask(alice, 'generate', { prompt: 'after', temperature: 0, max_output_tokens: 1 });
    await alice.experimental.tasks.getTaskResult(next.taskId, CallToolResultSchema);
    assert.equal(await tokensOf(alice, task.taskId), first, 'no tokens after the stop');
    assert.equal((await alice.experimental.tasks.getTask(task.taskId)).status, 'cancelled');
    const again = await rpcError(alice.experimental.tasks.cancelTask(task.taskId));
    assert.equal(again.code, ErrorCode.InvalidParams);
    assert.match(again.message, /terminal status 'cancelled'/);
  });

  test('cancel of a completed task is -32602', async () => {
    const task = await createTask(alice, 'generate', { prompt: 'x', temperature: 0, max_output_tokens: 2 });
    await alice.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema);
    const e = await rpcError(alice.experimental.tasks.cancelTask(task.taskId));
    assert.equal(e.code, ErrorCode.InvalidParams);
    assert.match(e.message, /terminal status 'completed'/);
  });

  // To a client without tasks a `required` tool is shown `optional` and runs in the call (mcpNoTasks.test.ts).
  test('taskSupport misuse by a client that declared tasks is -32601 and nothing runs', async () => {
    const countBefore = server.runtime.countTasks('alice').total;
    const required = await rpcError(
      alice.request({ method: 'tools/call', params: { name: 'generate_long', arguments: { prompt: 'x' } } }, CallToolResultSchema),
    );
    assert.equal(required.code, ErrorCode.MethodNotFound);
    const forbidden = await rpcError(
      alice.request({ method: 'tools/call', params: { name: 'list_models', arguments: {}, task: {} } }, CreateTaskResultSchema),
    );
    assert.equal(forbidden.code, ErrorCode.MethodNotFound);
    assert.equal(server.runtime.countTasks('alice').total, countBefore, 'no task was created');
  });

  test('bad arguments and unknown tools are -32602 with a clear message', async () => {
    const both = await rpcError(
      alice.request(
        { method: 'tools/call', params: { name: 'generate', arguments: { prompt: 'a', messages: [{ role: 'user', content: 'b' }] } } },
        CallToolResultSchema,
      ),
    );
    assert.equal(both.code, ErrorCode.InvalidParams);
    assert.match(both.message, /exactly one of `prompt` or `messages`/);
    const range = await rpcError(
      alice.request({ method: 'tools/call', params: { name: 'generate', arguments: { prompt: 'a', temperature: 9 } } }, CallToolResultSchema),
    );
    assert.match(range.message, /temperature/);
    const unknown = await rpcError(alice.request({ method: 'tools/call', params: { name: 'nope', arguments: {} } }, CallToolResultSchema));
    assert.equal(unknown.code, ErrorCode.InvalidParams);
  });

  test('tasks are bound to the principal: foreign ids are not found, lists are disjoint', async () => {
    const task = await createTask(alice, 'generate', { prompt: 'mine', temperature: 0, max_output_tokens: 2 });
    for (const p of [
      bob.experimental.tasks.getTask(task.taskId),
      bob.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema),
      bob.experimental.tasks.cancelTask(task.taskId),
    ]) {
      assert.equal((await rpcError(p)).code, ErrorCode.InvalidParams);
    }
    const text = await bob.callTool({ name: 'get_task_text', arguments: { taskId: task.taskId } });
    assert.equal(text.isError, true);
    const { tasks } = await bob.experimental.tasks.listTasks();
    assert.ok(!tasks.some((t) => t.taskId === task.taskId));
    await alice.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema);
  });

  test('a reconnecting client (new session) still sees its tasks', async () => {
    const task = await createTask(alice, 'generate', { prompt: 'persist', temperature: 0, max_output_tokens: 3 });
    const again = await connect(server.mcpUrl, TOKENS.alice, 'second-session');
    try {
      const result = await again.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema);
      assert.equal(result.isError, false);
    } finally {
      await again.close();
    }
  });

  test('tasks/list paginates with opaque cursors and rejects bad ones', async () => {
    const mine = await bob.experimental.tasks.listTasks();
    assert.equal(mine.tasks.length, 0, 'bob has no tasks yet');
    const created: string[] = [];
    for (let i = 0; i < 7; i++) created.push((await createTask(bob, 'generate', { prompt: `p${i}`, temperature: 0, max_output_tokens: 1 })).taskId);
    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const page = await bob.experimental.tasks.listTasks(cursor);
      assert.ok(page.tasks.length <= 3);
      seen.push(...page.tasks.map((t) => t.taskId));
      cursor = page.nextCursor;
      pages++;
    } while (cursor);
    assert.equal(pages, 3);
    assert.deepEqual([...seen].sort(), [...created].sort());
    const bad = await rpcError(bob.experimental.tasks.listTasks('not-a-cursor!'));
    assert.equal(bad.code, ErrorCode.InvalidParams);
  });

  test('get_task_text reads tasks started through LMSP, and MCP tasks show up in LMSP with the same id', async () => {
    const res = await fetch(`${server.url}/lmsp/v1/responses`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKENS.alice}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL_ID, input: 'from lmsp', temperature: 0, max_output_tokens: 5 }),
    });
    assert.ok(res.status < 300, `LMSP create: ${res.status} ${await res.clone().text()}`);
    const created = (await res.json()) as { id: string; task?: { id: string } };
    const lmspTask = server.runtime.getTaskByResponseId(created.id, 'alice')!;
    assert.ok(lmspTask, 'LMSP task exists');
    await server.runtime.waitForTerminal(lmspTask.id);
    const text = await alice.callTool({ name: 'get_task_text', arguments: { taskId: lmspTask.id } });
    const sc = text.structuredContent as { origin: string; status: string; outputTokens: number; text: string };
    assert.equal(sc.origin, 'lmsp');
    assert.equal(sc.status, 'succeeded');
    assert.equal(sc.outputTokens, 5);
    // Not a tool call, so not an MCP task.
    assert.equal((await rpcError(alice.experimental.tasks.getTask(lmspTask.id))).code, ErrorCode.InvalidParams);

    const task = await createTask(alice, 'generate', { prompt: 'both doors', temperature: 0, max_output_tokens: 4 });
    await alice.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema);
    const viaLmsp = await fetch(`${server.url}/lmsp/v1/tasks/${task.taskId}`, { headers: { authorization: `Bearer ${TOKENS.alice}` } });
    assert.equal(viaLmsp.status, 200);
    assert.equal(((await viaLmsp.json()) as { id: string }).id, task.taskId);
    const foreign = await fetch(`${server.url}/lmsp/v1/tasks/${task.taskId}`, { headers: { authorization: `Bearer ${TOKENS.bob}` } });
    assert.equal(foreign.status, 404);
  });

  test('notifications/tasks/status arrive on the session stream (best effort) and end terminal', async () => {
    const statuses: Task[] = [];
    const { client: watcher, streamOpen } = await connectWatchingStream(server.mcpUrl, TOKENS.alice, 'notified');
    watcher.setNotificationHandler(TaskStatusNotificationSchema, (n) => {
      statuses.push(n.params as Task);
    });
    try {
      await streamOpen;
      const task = await createTask(watcher, 'generate', { prompt: 'notify', temperature: 0, max_output_tokens: 200 });
      await watcher.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema);
      const last = await until(
        () => statuses.filter((s) => s.taskId === task.taskId).find((s) => s.status === 'completed'),
        'completed status notification',
      );
      assert.equal(last.ttl, 300_000);
      assert.match(last.statusMessage ?? '', /completed/);
    } finally {
      await watcher.close();
    }
  });

  test('list_models lists the configured model', async () => {
    const r = await alice.callTool({ name: 'list_models', arguments: {} });
    const models = (r.structuredContent as { models: { id: string; capabilities: unknown }[] }).models;
    assert.deepEqual(
      models.map((m) => m.id),
      [MODEL_ID],
    );
    // The same capabilities as GET /models (the backend's; a model it says nothing about: false).
    const listed = server.runtime.listModels().find((m) => m.id === MODEL_ID)?.capabilities;
    assert.deepEqual(models[0]!.capabilities, { tools: listed?.tools ?? false, reasoning: listed?.reasoning ?? false });
  });
});
