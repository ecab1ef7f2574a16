// Every tool usable by a client that declares no tasks (issue #38): Claude Code 2.1.328 declares neither the
// 2025-11-25 `capabilities.tasks` nor the 2026-07-28 tasks extension, never sends params.task, and sends
// `_meta.progressToken` and `_meta["claudecode/toolUseId"]` on tools/call (design/ANTHROPIC-WIRE.md §3). Such a
// client is shown generate_long as usable and gets it run to completion inside the call, with progress, while a
// client that declares tasks sees and gets exactly what it did before. The legacy era is driven by the SDK's real
// Client (whose callTool itself refuses a tool listed as task-required), the modern one by the raw client; both
// against the real runtime and the generated model (temperature 0, end token suppressed: a generation runs to
// exactly max_output_tokens).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { CallToolResultSchema, CreateTaskResultSchema, ErrorCode, type Progress } from '@modelcontextprotocol/sdk/types.js';
import type { TaskRecord } from '../../../src/runtime/task';
import { sseFrames } from '../../fixtures/sse';
import { connect, RawSession, rpcError, startInProcess, TASKS_CLIENT_CAPABILITIES, TOKENS, type InProcessServer } from './harness';
import { ModernClient } from './modernClient';

/** What Claude Code declares at initialize: roots and elicitation, no tasks. */
const CLAUDE_CODE_CAPABILITIES = { roots: {}, elicitation: {} };
const TOOL_USE_ID_KEY = 'claudecode/toolUseId';
const LONG = { prompt: 'long story please', temperature: 0, max_output_tokens: 1800 };

/** The text a task stored, read through the LMSP door (its Responses object), not through MCP. */
async function lmspText(server: InProcessServer, taskId: string): Promise<string> {
  const res = await fetch(`${server.url}/lmsp/v1/tasks/${taskId}`, { headers: { authorization: `Bearer ${TOKENS.alice}` } });
  assert.equal(res.status, 200);
  const task = (await res.json()) as { status: string; response: { output: { type: string; content?: { text?: string }[] }[] } };
  assert.equal(task.status, 'succeeded');
  return task.response.output
    .filter((item) => item.type === 'message')
    .flatMap((item) => item.content ?? [])
    .map((part) => part.text ?? '')
    .join('');
}

function assertProgress(progress: Progress[], total: number): void {
  assert.ok(progress.length > 0, 'progress notifications arrived');
  assert.ok(
    progress.every((p, i) => i === 0 || p.progress > progress[i - 1].progress),
    `progress increases with each notification: ${progress.map((p) => p.progress).join(', ')}`,
  );
  assert.match(progress[0].message ?? '', /^(queued: |loading model |generating: )/, 'the first names the phase');
  for (const p of progress) {
    assert.equal(p.total, total);
    assert.ok(p.progress <= total);
  }
  assert.ok(
    progress.some((p) => p.progress > 0 && /^(generating|completed): \d+ tokens?$/.test(p.message ?? '')),
    'tokens are counted',
  );
}

describe('MCP tools for a client without tasks', () => {
  let server: InProcessServer;
  let claude: Client;
  let tasksClient: Client;
  let useIds = 0;
  const useId = () => `toolu_01NoTasks${process.pid}x${++useIds}`;

  before(async () => {
    server = await startInProcess({ door: { pollIntervalMs: 250 } });
    claude = await connect(server.mcpUrl, TOKENS.alice, 'claude-code', CLAUDE_CODE_CAPABILITIES);
    tasksClient = await connect(server.mcpUrl, TOKENS.alice, 'vscode-like', TASKS_CLIENT_CAPABILITIES);
  });
  after(async () => {
    await claude?.close();
    await tasksClient?.close();
    await server?.close();
  });

  /** The one task of alice's that carries this tool-use id (how the editor and LMSP readers find the call's task). */
  function taskByUseId(id: string): TaskRecord {
    const found = server.runtime.listTasks({ principal: 'alice', origin: 'mcp', limit: 1000 }).tasks.filter((t) => t.meta['mcp_tool_use_id'] === id);
    assert.equal(found.length, 1, `one task carries tool-use id ${id}`);
    return found[0];
  }

  test('2025-11-25 tools/list: generate_long is optional and not described as task-only without tasks, unchanged with them', async () => {
    const plain = new Map((await claude.listTools()).tools.map((t) => [t.name, t]));
    const withTasks = new Map((await tasksClient.listTools()).tools.map((t) => [t.name, t]));
    assert.deepEqual(Object.fromEntries([...plain].map(([n, t]) => [n, t.execution?.taskSupport])), {
      generate: 'optional',
      generate_long: 'optional',
      get_task_text: 'forbidden',
      list_models: 'forbidden',
      cancel_tasks: 'forbidden',
      embed: 'forbidden',
      search_workspace: 'forbidden',
    });
    assert.deepEqual(Object.fromEntries([...withTasks].map(([n, t]) => [n, t.execution?.taskSupport])), {
      generate: 'optional',
      generate_long: 'required',
      get_task_text: 'forbidden',
      list_models: 'forbidden',
      cancel_tasks: 'forbidden',
      embed: 'forbidden',
      search_workspace: 'forbidden',
    });
    assert.doesNotMatch(plain.get('generate_long')!.description ?? '', /as an MCP task|tasks\/result|tasks\/get/);
    assert.match(plain.get('generate_long')!.description ?? '', /Waits for the answer/);
    assert.match(withTasks.get('generate_long')!.description ?? '', /Always runs as an MCP task/);
    for (const name of plain.keys()) assert.deepEqual(plain.get(name)!.inputSchema, withTasks.get(name)!.inputSchema, name);
  });

  test('2025-11-25 generate_long without a task: the result the task stored, progress on the token, the tool-use id kept', async () => {
    const id = useId();
    const progress: Progress[] = [];
    const result = await claude.callTool(
      { name: 'generate_long', arguments: { prompt: 'tell me more', temperature: 0, max_output_tokens: 300 }, _meta: { [TOOL_USE_ID_KEY]: id } },
      CallToolResultSchema,
      { onprogress: (p) => progress.push(p) },
    );
    assert.equal(result.isError, false);
    const structured = result.structuredContent as { status: string; taskId: string; outputTokens: number; text: string };
    assert.equal(structured.status, 'completed');
    assert.equal(structured.outputTokens, 300);
    const stored = await lmspText(server, structured.taskId);
    assert.ok(stored.length > 0);
    assert.deepEqual(result.content, [{ type: 'text', text: stored }]);
    assert.equal(structured.text, stored);
    assertProgress(progress, 300);

    // A task-augmented client reading the same task gets the same result (tasks/result adds only related-task _meta).
    const viaTasks = await tasksClient.experimental.tasks.getTaskResult(structured.taskId, CallToolResultSchema);
    assert.deepEqual({ content: viaTasks.content, structuredContent: viaTasks.structuredContent, isError: viaTasks.isError }, result);

    const task = taskByUseId(id);
    assert.equal(task.id, structured.taskId);
    assert.equal(task.origin, 'mcp');
    assert.equal(task.meta['tool'], 'generate_long');
    assert.equal(task.meta['asTask'], false);
    assert.equal(task.status, 'succeeded');
  });

  test('2025-11-25: no progress notification without a progressToken; an unusable tool-use id is ignored', async () => {
    // Raw, so that every message on the call's response stream is seen (the SDK routes only known tokens).
    const raw = new RawSession(server.mcpUrl, TOKENS.alice);
    await raw.initialize();
    const r = await raw.post({
      jsonrpc: '2.0',
      id: 'plain',
      method: 'tools/call',
      params: { name: 'generate_long', arguments: { prompt: 'x', temperature: 0, max_output_tokens: 40 }, _meta: { [TOOL_USE_ID_KEY]: 42 } },
    });
    assert.equal(r.status, 200);
    assert.deepEqual(
      r.messages.map((m) => m.id),
      ['plain'],
      'the answer alone, no notification',
    );
    const { taskId, outputTokens } = r.messages[0].result.structuredContent as { taskId: string; outputTokens: number };
    assert.equal(outputTokens, 40);
    assert.equal('mcp_tool_use_id' in server.runtime.getTask(taskId, 'alice')!.meta, false);
  });

  test('2025-11-25: cancelling the call (notifications/cancelled) cancels the task', async () => {
    const id = useId();
    const abort = new AbortController();
    const call = claude.callTool({ name: 'generate_long', arguments: LONG, _meta: { [TOOL_USE_ID_KEY]: id } }, CallToolResultSchema, {
      signal: abort.signal,
      onprogress: (p) => {
        if (p.progress > 0) abort.abort(new Error('the user pressed Esc'));
      },
    });
    await assert.rejects(call, /Esc/);
    const task = taskByUseId(id);
    const end = await server.runtime.waitForTerminal(task.id);
    assert.equal(end.status, 'cancelled');
    assert.ok(end.outputTokens > 0 && end.outputTokens < LONG.max_output_tokens, `stopped mid-way (${end.outputTokens} tokens)`);
  });

  test('2025-11-25: a client that declares tasks still gets a task; called plainly, a task-only tool is -32601 as the spec says', async () => {
    const created = await tasksClient.request(
      { method: 'tools/call', params: { name: 'generate_long', arguments: { prompt: 'x', temperature: 0, max_output_tokens: 8 }, task: {} } },
      CreateTaskResultSchema,
    );
    assert.equal(created.task.status, 'working');
    const countBefore = server.runtime.countTasks('alice').total;
    const plain = await rpcError(
      tasksClient.request(
        { method: 'tools/call', params: { name: 'generate_long', arguments: { prompt: 'x', temperature: 0, max_output_tokens: 8 } } },
        CallToolResultSchema,
      ),
    );
    assert.equal(plain.code, ErrorCode.MethodNotFound);
    assert.equal(server.runtime.countTasks('alice').total, countBefore, 'nothing ran');
    const viaTasks = await tasksClient.experimental.tasks.getTaskResult(created.task.taskId, CallToolResultSchema);
    assert.equal((viaTasks.structuredContent as { outputTokens: number }).outputTokens, 8);
  });

  describe('2026-07-28 without the tasks extension', () => {
    let bare: ModernClient;
    let declaring: ModernClient;
    before(() => {
      bare = new ModernClient(server.mcpUrl, TOKENS.alice, false);
      declaring = new ModernClient(server.mcpUrl, TOKENS.alice, true);
    });

    test('tools/list describes generate_long as it runs for the request: synchronously without the extension', async () => {
      const plain = (await bare.result('tools/list')).tools.find((t: { name: string }) => t.name === 'generate_long');
      const withExt = (await declaring.result('tools/list')).tools.find((t: { name: string }) => t.name === 'generate_long');
      assert.doesNotMatch(plain.description, /as an MCP task|tasks\/result|tasks\/get/);
      assert.match(withExt.description, /Always runs as an MCP task/);
      for (const t of [plain, withExt]) assert.equal('execution' in t, false);
    });

    test('generate_long with a progressToken: an SSE answer, progress on that token, then the result the task stored', async () => {
      const id = useId();
      const r = await bare.request(
        'tools/call',
        { name: 'generate_long', arguments: { prompt: 'tell me more', temperature: 0, max_output_tokens: 300 } },
        { meta: { progressToken: 'p-modern', [TOOL_USE_ID_KEY]: id } },
      );
      assert.equal(r.status, 200);
      assert.match(r.headers.get('content-type') ?? '', /^text\/event-stream/);
      const result = r.body.result;
      assert.equal(result.resultType, 'complete');
      assert.equal(result.isError, false);
      assert.equal(result.structuredContent.outputTokens, 300);
      assert.equal(result._meta['io.modelcontextprotocol/serverInfo'].name, 'task-runtime');
      assert.deepEqual(result.content, [{ type: 'text', text: await lmspText(server, result.structuredContent.taskId) }]);
      const notes = r.messages.filter((m) => m.method === 'notifications/progress');
      assert.equal(r.messages.at(-1), r.body, 'the answer is the last event');
      for (const n of notes) assert.equal(n.params.progressToken, 'p-modern');
      assertProgress(
        notes.map((n) => n.params),
        300,
      );
      const task = taskByUseId(id);
      assert.equal(task.id, result.structuredContent.taskId);
      assert.equal(task.meta['era'], '2026-07-28');
      assert.equal(task.meta['asTask'], false);
    });

    test('generate_long without a progressToken: plain JSON, no task handle', async () => {
      const r = await bare.request('tools/call', { name: 'generate_long', arguments: { prompt: 'x', temperature: 0, max_output_tokens: 20 } });
      assert.equal(r.status, 200);
      assert.match(r.headers.get('content-type') ?? '', /^application\/json/);
      assert.equal(r.body.result.resultType, 'complete');
      assert.equal(r.body.result.structuredContent.outputTokens, 20);
      assert.equal('taskId' in r.body.result, false);
    });

    test('closing the response stream cancels the task', async () => {
      const id = useId();
      const params = { name: 'generate_long', arguments: LONG };
      const abort = new AbortController();
      const res = await fetch(bare.mcpUrl, {
        method: 'POST',
        headers: bare.headersFor('tools/call', params),
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 'cancel-me',
          method: 'tools/call',
          params: { ...params, _meta: bare.envelope({ progressToken: 7, [TOOL_USE_ID_KEY]: id }) },
        }),
        signal: abort.signal,
      });
      assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/);
      try {
        for await (const frame of sseFrames(res.body)) {
          const m = JSON.parse(frame.data);
          assert.equal(m.method, 'notifications/progress', 'no answer before the stream is closed');
          if (m.params.progress > 0) break;
        }
      } finally {
        abort.abort();
      }
      const end = await server.runtime.waitForTerminal(taskByUseId(id).id);
      assert.equal(end.status, 'cancelled');
      assert.ok(end.outputTokens < LONG.max_output_tokens, `stopped mid-way (${end.outputTokens} tokens)`);
    });

    test('with the extension generate_long is still a task', async () => {
      const created = await declaring.result('tools/call', {
        name: 'generate_long',
        arguments: { prompt: 'x', temperature: 0, max_output_tokens: 8 },
      });
      assert.equal(created.resultType, 'task');
      const end = await server.runtime.waitForTerminal(created.taskId);
      assert.equal(end.status, 'succeeded');
    });
  });
});
