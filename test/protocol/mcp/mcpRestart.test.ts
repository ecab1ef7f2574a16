// A real `task-runtime serve` process: tasks created over MCP survive SIGKILL + restart (finished ones answer
// tasks/get and tasks/result; an interrupted one ends failed with a clear statusMessage), and they are the same
// tasks the LMSP door shows.
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { CallToolResultSchema, CreateTaskResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { connect, startProcess, type ServerProcess } from './harness';
import { until } from '../../support/wait';

async function create(client: Client, name: string, args: Record<string, unknown>): Promise<string> {
  const r = await client.request({ method: 'tools/call', params: { name, arguments: args, task: {} } }, CreateTaskResultSchema);
  return r.task.taskId;
}

describe('MCP door across a server restart (real process)', () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'mcp-restart-'));
  let proc: ServerProcess | undefined;
  let client: Client | undefined;
  after(async () => {
    await client?.close().catch(() => {});
    await proc?.stop('SIGKILL');
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  test('finished tasks answer after SIGKILL; the interrupted one is failed; LMSP sees the same ids', async () => {
    proc = await startProcess(dataDir);
    client = await connect(proc.mcpUrl, proc.token);

    const doneId = await create(client, 'generate', { prompt: 'keep me', temperature: 0, max_output_tokens: 12 });
    const before = await client.experimental.tasks.getTaskResult(doneId, CallToolResultSchema);
    assert.equal(before.isError, false);

    // Kill while a generation is running (tokens are flowing and it is not finished).
    const runningId = await create(client, 'generate_long', { prompt: 'long story please', temperature: 0, max_output_tokens: 1800 });
    await until(async () => {
      const r = await client!.callTool({ name: 'get_task_text', arguments: { taskId: runningId } });
      const sc = r.structuredContent as { status: string; outputTokens: number };
      if (sc.status !== 'running' && sc.status !== 'loading' && sc.status !== 'queued') throw new Error(`finished too early: ${sc.status}`);
      return sc.outputTokens > 0 ? true : undefined;
    }, 'first tokens');
    await client.close().catch(() => {});
    client = undefined;
    await proc.stop('SIGKILL');

    proc = await startProcess(dataDir);
    client = await connect(proc.mcpUrl, proc.token);

    const done = await client.experimental.tasks.getTask(doneId);
    assert.equal(done.status, 'completed');
    const after = await client.experimental.tasks.getTaskResult(doneId, CallToolResultSchema);
    assert.deepEqual(after.content, before.content);
    assert.deepEqual(after.structuredContent, before.structuredContent);

    const interrupted = await client.experimental.tasks.getTask(runningId);
    assert.equal(interrupted.status, 'failed');
    assert.match(interrupted.statusMessage ?? '', /server_restarted.*Re-issue/);
    const failed = await client.experimental.tasks.getTaskResult(runningId, CallToolResultSchema);
    assert.equal(failed.isError, true);
    assert.equal((failed.structuredContent as { status: string }).status, 'failed');

    const listed = await client.experimental.tasks.listTasks();
    assert.deepEqual(listed.tasks.map((t) => t.taskId).sort(), [doneId, runningId].sort());

    for (const id of [doneId, runningId]) {
      const res = await fetch(`${proc.url}/lmsp/v1/tasks/${id}`, { headers: { authorization: `Bearer ${proc.token}` } });
      assert.equal(res.status, 200);
      const body = (await res.json()) as { id: string; status: string };
      assert.equal(body.id, id);
      assert.equal(body.status, id === doneId ? 'succeeded' : 'failed');
    }
  });
});
