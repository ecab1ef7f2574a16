// A second, independent 2026-07-28 client: @modelcontextprotocol/ext-tasks 0.2.2 (the MCP project's own requester
// library; it validates every task response against its zod wire schemas, checks task identity, honours
// pollIntervalMs), over a raw-fetch session port of ours that only frames the envelope and headers. It drives
// tools/call → task → tasks/get polling → inlined result, a synchronous call, and cancellation; and, with the
// conformance fixture tools, a task that asks its client for input (answered through the library's input handler
// and tasks/update), MRTR rounds before a task, and a protocol-level task failure.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import { startInProcess, TOKENS, type InProcessServer } from './harness';
import { TASKS_EXT, V } from './modernClient';
import { ensurePackage, PINNED, skipReason } from './toolCache';

const ext = ensurePackage(PINNED.extTasks.pkg, PINNED.extTasks.version);

type Json = any;

/**
 * ConnectedMcpSessionPort over fetch: adds the envelope, an id and the SEP-2243 headers; nothing else. `capabilities`
 * are declared on every request (a client that answers input must declare what it answers).
 */
function fetchPort(mcpUrl: string, token: string, capabilities: Record<string, unknown> = {}) {
  let nextId = 1;
  return {
    endpointId: 'mcp-ext-tasks-test',
    taskCapabilities: { generation: 'v2', capabilities: {} },
    invalidated: false,
    async dispatch(request: Json, options?: { signal?: AbortSignal; context?: { headers?: Record<string, string> } }) {
      const params = request.params ?? {};
      const meta = params._meta ?? {};
      const caps = meta['io.modelcontextprotocol/clientCapabilities'] ?? {};
      const body = {
        jsonrpc: '2.0',
        id: nextId++,
        method: request.method,
        params: {
          ...params,
          _meta: {
            ...meta,
            'io.modelcontextprotocol/protocolVersion': V,
            'io.modelcontextprotocol/clientInfo': { name: 'ext-tasks-port', version: '1.0.0' },
            'io.modelcontextprotocol/clientCapabilities': { ...capabilities, ...caps, extensions: { ...caps.extensions, [TASKS_EXT]: {} } },
          },
        },
      };
      const headers: Record<string, string> = {
        authorization: `Bearer ${token}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': V,
        'mcp-method': request.method,
        ...(request.method === 'tools/call' && { 'mcp-name': params.name }),
        ...options?.context?.headers,
      };
      const res = await fetch(mcpUrl, { method: 'POST', headers, body: JSON.stringify(body), signal: options?.signal });
      const reply = (await res.json()) as Json;
      assert.equal(reply.id, body.id, 'every answer echoes the request id');
      return reply.error ? { kind: 'error', error: reply.error } : { kind: 'result', result: reply.result };
    },
    onServerRequest: () => () => {},
    onNotification: () => () => {},
    onInvalidated: () => () => {},
  };
}

describe('ext-tasks 0.2.2 as a 2026-07-28 client', { skip: skipReason('skip' in ext ? ext.skip : undefined) }, () => {
  let server: InProcessServer;
  let client: Json;
  let session: Json;

  before(async () => {
    const dir = (ext as { dir: string }).dir;
    // session.js and api.js, not the client index: that also loads the SDK-v2 adapter, whose optional peer
    // (@modelcontextprotocol/client) we do not install — our port replaces it.
    const load = (f: string) => import(pathToFileURL(path.join(dir, 'dist/client', f)).href);
    client = { ...(await load('api.js')), ...(await load('session.js')) };
    server = await startInProcess({ door: { pollIntervalMs: 100 } });
    session = client.withTasks(fetchPort(server.mcpUrl, TOKENS.alice));
  });
  after(async () => {
    await session?.close?.();
    await server?.close();
  });

  test('generate_long becomes a task; the library polls tasks/get and settles with the inlined result', async () => {
    const execution = await session.callTool('generate_long', { prompt: 'hello', temperature: 0, max_output_tokens: 10 });
    const events: string[] = [];
    const { outcome } = await execution.settle({ onEvent: (e: Json) => void events.push(e.type === 'task' ? e.task.status : e.type) });
    assert.equal(outcome.status, 'completed', `${outcome.error?.message} ${JSON.stringify(outcome.error?.cause?.message ?? outcome.error)}`);
    assert.ok(outcome.task?.taskId?.startsWith('task_'), `a task id: ${JSON.stringify(outcome.task)}`);
    const result = client.resultFromTaskOutcome(outcome);
    assert.equal(result.isError, false);
    assert.equal(result.structuredContent.outputTokens, 10);
    assert.equal(result.structuredContent.taskId, outcome.task.taskId);
    assert.equal(server.runtime.getTask(outcome.task.taskId, 'alice')?.status, 'succeeded', 'the same runtime task');
  });

  test('a short generate is answered synchronously (no task), and the library accepts that', async () => {
    const before = server.runtime.listTasks({ principal: 'alice', limit: 100 }).tasks.length;
    const execution = await session.callTool('generate', { prompt: 'hi', temperature: 0, max_output_tokens: 3 });
    const { outcome } = await execution.settle();
    assert.equal(outcome.status, 'completed');
    assert.equal(client.resultFromTaskOutcome(outcome).isError, false);
    // The synchronous call is still one durable runtime task (as in the legacy era), just not an MCP task.
    assert.equal(server.runtime.listTasks({ principal: 'alice', limit: 100 }).tasks.length, before + 1);
  });

  test('cancel through the library: acknowledged, and the task settles as cancelled', async () => {
    const execution = await session.callTool('generate_long', { prompt: 'long story please', temperature: 0, max_output_tokens: 1800 });
    let cancelled = false;
    const settled = execution.settle({
      onEvent: async (e: Json) => {
        if (!cancelled && e.type === 'task' && /^generating: [1-9]/.test(e.task.statusMessage ?? '')) {
          cancelled = true;
          await execution.cancel();
        }
      },
    });
    const { outcome } = await settled;
    assert.equal(cancelled, true, 'the task was seen generating before it was cancelled');
    assert.equal(outcome.status, 'cancelled');
  });
});

describe('ext-tasks 0.2.2 answering input (conformance fixture tools)', { skip: skipReason('skip' in ext ? ext.skip : undefined) }, () => {
  let server: InProcessServer;
  let client: Json;
  let session: Json;
  const asked: Array<{ kind: string; delivery: string; message: unknown }> = [];

  before(async () => {
    const dir = (ext as { dir: string }).dir;
    const load = (f: string) => import(pathToFileURL(path.join(dir, 'dist/client', f)).href);
    client = { ...(await load('api.js')), ...(await load('session.js')) };
    server = await startInProcess({ fixtures: true, door: { pollIntervalMs: 100 } });
    session = client.withTasks(fetchPort(server.mcpUrl, TOKENS.alice, { elicitation: {} }), {
      // The application's answer to every elicitation: confirm a delete, give a name otherwise.
      onInputRequest: async (request: Json, context: Json) => {
        asked.push({ kind: request.kind, delivery: context.delivery, message: request.params?.message });
        const wantsConfirm = request.params?.requestedSchema?.properties?.confirm !== undefined;
        return wantsConfirm ? { action: 'accept', content: { confirm: true } } : { action: 'accept', content: { name: 'Ext' } };
      },
    });
  });
  after(async () => {
    await session?.close?.();
    await server?.close();
  });

  test('confirm_delete: the library sees input_required, calls the handler, answers by tasks/update; the task completes', async () => {
    asked.length = 0;
    const execution = await session.callTool('confirm_delete', { filename: 'x.txt' });
    const { outcome } = await execution.settle();
    assert.equal(outcome.status, 'completed', `${outcome.error?.message}`);
    assert.equal(client.resultFromTaskOutcome(outcome).content[0].text, 'Deleted x.txt.');
    assert.deepEqual(asked, [{ kind: 'elicitation', delivery: 'task-update', message: 'Delete x.txt? This cannot be undone.' }]);
  });

  test('multi_input: two requests pending at once, both answered', async () => {
    asked.length = 0;
    const { outcome } = await (await session.callTool('multi_input', {})).settle();
    assert.equal(outcome.status, 'completed', `${outcome.error?.message}`);
    assert.equal(client.resultFromTaskOutcome(outcome).content[0].text, 'Received first="Ext", second="Ext".');
    assert.equal(asked.length, 2);
  });

  test('test_tool_with_task: the MRTR round is answered by retrying the call, then the task runs with the answer', async () => {
    asked.length = 0;
    const { outcome } = await (await session.callTool('test_tool_with_task', {})).settle();
    assert.equal(outcome.status, 'completed', `${outcome.error?.message}`);
    assert.match(client.resultFromTaskOutcome(outcome).content[0].text, /Hello, Ext!/);
    assert.deepEqual(
      asked.map((a) => a.delivery),
      ['request-retry'],
    );
  });

  test('protocol_error_job: the library reports the task failed with the JSON-RPC error', async () => {
    const { outcome } = await (await session.callTool('protocol_error_job', {})).settle();
    assert.equal(outcome.status, 'failed');
    assert.equal(outcome.error.code, -32603);
    assert.match(outcome.error.message, /protocol_error_job: internal failure/);
  });
});
