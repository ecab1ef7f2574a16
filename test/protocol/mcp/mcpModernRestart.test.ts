// A real `task-runtime serve` process, 2026-07-28 clients only: tasks created over the tasks extension survive
// SIGKILL while clients keep polling tasks/get; after the restart the finished task answers with its inlined
// result unchanged, the interrupted one is `completed` with an isError result (modern era; legacy says `failed`)
// naming the restart, and the legacy era and LMSP see the same ids.
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { RawSession, ROOT, startProcess, type ServerProcess } from './harness';
import { until } from '../../support/wait';
import { ModernClient } from './modernClient';

const HAS_CLI = fs.existsSync(path.join(ROOT, 'dist/cli.js'));

describe('MCP 2026-07-28 across SIGKILL (real process)', { skip: HAS_CLI ? false : 'dist/cli.js not built (npm run build)' }, () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'mcp-modern-restart-'));
  let proc: ServerProcess | undefined;
  after(async () => {
    await proc?.stop('SIGKILL');
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  test('finished and interrupted tasks after SIGKILL with pollers running; same ids in the legacy era and LMSP', async () => {
    proc = await startProcess(dataDir);
    let client = new ModernClient(proc.mcpUrl, proc.token);

    const done = await client.result('tools/call', { name: 'generate_long', arguments: { prompt: 'keep me', temperature: 0, max_output_tokens: 12 } });
    const before = await until(async () => {
      const t = await client.result('tasks/get', { taskId: done.taskId });
      return t.status === 'completed' ? t : undefined;
    }, 'the short task');

    const running = await client.result('tools/call', { name: 'generate_long', arguments: { prompt: 'long story please', temperature: 0, max_output_tokens: 1800 } });
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
    assert.ok(answers.every((s) => s === 'working'), `a task is never reported finished before the kill: ${answers.join(',')}`);

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
});
