// A real `task-runtime serve` process, 2026-07-28 clients only: tasks created over the tasks extension survive
// SIGKILL while clients keep polling tasks/get; after the restart the finished task answers with its inlined
// result unchanged, the interrupted one is `completed` with an isError result (modern era; legacy says `failed`)
// naming the restart, and the legacy era and LMSP see the same ids. A task waiting for its client's input survives
// the kill with its pending requests and completes once answered.
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { RawSession, startProcess, type ServerProcess } from './harness';
import { until } from '../../support/wait';
import { ModernClient } from './modernClient';

describe('MCP 2026-07-28 across SIGKILL (real process)', () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'mcp-modern-restart-'));
  let proc: ServerProcess | undefined;
  after(async () => {
    await proc?.stop('SIGKILL');
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  test('finished and interrupted tasks after SIGKILL with pollers running; same ids in the legacy era and LMSP', async () => {
    proc = await startProcess(dataDir);
    let client = new ModernClient(proc.mcpUrl, proc.token);

    const done = await client.result('tools/call', {
      name: 'generate_long',
      arguments: { prompt: 'keep me', temperature: 0, max_output_tokens: 12 },
    });
    const before = await until(async () => {
      const t = await client.result('tasks/get', { taskId: done.taskId });
      return t.status === 'completed' ? t : undefined;
    }, 'the short task');

    const running = await client.result('tools/call', {
      name: 'generate_long',
      arguments: { prompt: 'long story please', temperature: 0, max_output_tokens: 1800 },
    });
    await until(async () => {
      const t = await client.result('tasks/get', { taskId: running.taskId });
      if (t.status !== 'working') throw new Error(`finished too early: ${t.status}`);
      return /^generating: [1-9]/.test(t.statusMessage) ? true : undefined;
    }, 'first tokens');

    // Pollers keep hitting tasks/get while the process dies; each poll either answers or fails at the socket.
    let polling = true;
    const answers: string[] = [];
    const poller = (async () => {
      while (polling) {
        const r = await client.request('tasks/get', { taskId: running.taskId }).catch(() => undefined);
        if (r?.status === 200) answers.push(r.body.result.status);
        await new Promise((res) => setImmediate(res));
      }
    })();
    await until(() => (answers.length >= 3 ? true : undefined), 'pollers answered');
    await proc.stop('SIGKILL');
    polling = false;
    await poller;
    assert.ok(
      answers.every((s) => s === 'working'),
      `a task is never reported finished before the kill: ${answers.join(',')}`,
    );

    proc = await startProcess(dataDir);
    client = new ModernClient(proc.mcpUrl, proc.token);
    const after = await client.result('tasks/get', { taskId: done.taskId });
    assert.equal(after.status, 'completed');
    assert.deepEqual(after.result, before.result);

    const interrupted = await client.result('tasks/get', { taskId: running.taskId });
    assert.equal(interrupted.status, 'completed', 'an interrupted generation is a tool error (isError), not a JSON-RPC error');
    assert.equal(interrupted.result.isError, true);
    assert.match(interrupted.statusMessage, /server_restarted.*Re-issue/);
    assert.equal(interrupted.result.structuredContent.status, 'failed');

    const legacy = new RawSession(proc.mcpUrl, proc.token);
    await legacy.initialize();
    assert.equal((await legacy.call('tasks/get', { taskId: running.taskId })).result.status, 'failed');
    for (const id of [done.taskId, running.taskId]) {
      const res = await fetch(`${proc.url}/lmsp/v1/tasks/${id}`, { headers: { authorization: `Bearer ${proc.token}` } });
      assert.equal(res.status, 200);
      assert.equal(((await res.json()) as { id: string }).id, id);
    }
  });

  test('a task waiting for input survives SIGKILL with its pending request, and completes once answered', async () => {
    const fixturesDir = fs.mkdtempSync(path.join(os.tmpdir(), 'mcp-modern-input-restart-'));
    const meta = { 'io.modelcontextprotocol/clientCapabilities': { elicitation: {}, extensions: { 'io.modelcontextprotocol/tasks': {} } } };
    let server = await startProcess(fixturesDir, [], { fixtures: true });
    try {
      let client = new ModernClient(server.mcpUrl, server.token);
      const get = async (taskId: string) => (await client.request('tasks/get', { taskId }, { meta })).body.result;
      const created = await client.result('tools/call', { name: 'confirm_delete', arguments: { filename: 'survivor.txt' } });
      const parked = await until(async () => {
        const t = await get(created.taskId);
        return t.status === 'input_required' ? t : undefined;
      }, 'confirm_delete to ask');
      await server.stop('SIGKILL');

      server = await startProcess(fixturesDir, [], { fixtures: true });
      client = new ModernClient(server.mcpUrl, server.token);
      const after = await get(created.taskId);
      assert.equal(after.status, 'input_required', 'still waiting after the kill (confirm_delete is on_restart "retry")');
      assert.deepEqual(after.inputRequests, parked.inputRequests, 'the same pending request, under the same key');
      const [key] = Object.keys(after.inputRequests);
      const ack = await client.request(
        'tasks/update',
        { taskId: created.taskId, inputResponses: { [key]: { action: 'accept', content: { confirm: true } } } },
        { meta },
      );
      assert.equal(ack.body.result.resultType, 'complete');
      const done = await until(async () => {
        const t = await get(created.taskId);
        return ['completed', 'failed', 'cancelled'].includes(t.status) ? t : undefined;
      }, 'the answered task to finish');
      assert.equal(done.status, 'completed');
      assert.equal(done.result.content[0].text, 'Deleted survivor.txt.');
    } finally {
      await server.stop('SIGKILL');
      fs.rmSync(fixturesDir, { recursive: true, force: true });
    }
  });
});
