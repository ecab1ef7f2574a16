// Security: no token / a wrong token, another principal's task ids, foreign Host and Origin, and task text that
// carries HTML/script coming back as plain data. (The events panel rendering it as text is checked in the UI
// suite, test/e2e/tasks.ui.test.ts.)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { call, createTask, removeDir, startServer, waitForStatus } from '../protocol/lmsp/harness';
import { RawSession } from '../protocol/mcp/harness';
import { recordFigures } from './support';

const INJECTION = '<img src=x onerror="document.title=\'pwned\'"><script>alert(1)</script>';

test('tokens, principals, Host/Origin and HTML in task text', async () => {
  const server = await startServer();
  let requests = 0;
  let status5xx = 0;
  const req = async (...args: Parameters<typeof call>) => {
    requests++;
    const r = await call(...args);
    if (r.status >= 500) status5xx++;
    return r;
  };
  try {
    const task = await createTask(server, { input: INJECTION, max_output_tokens: 4 });
    await waitForStatus(server, task.id, ['succeeded']);
    const mcpUrl = `${server.url}/mcp`;

    // No token and a wrong token: 401 with a challenge, in each door's own form.
    for (const token of [null, 'wrong-token', server.tokenA + 'x']) {
      const r = await req(server, 'GET', `/tasks/${task.id}`, { token });
      assert.equal(r.status, 401);
      assert.equal(r.json.code, 'unauthorized');
      assert.match(String(r.headers['www-authenticate']), /^Bearer/);
      const m = await req(server, 'POST', '/mcp', { token, body: { jsonrpc: '2.0', id: 1, method: 'tools/list' } });
      assert.equal(m.status, 401);
      assert.equal(m.json.jsonrpc, '2.0');
      assert.equal(typeof m.json.error.code, 'number');
    }

    // Another principal's task: indistinguishable from an unknown id.
    for (const [method, p] of [['GET', `/tasks/${task.id}`], ['POST', `/tasks/${task.id}/cancel`], ['DELETE', `/tasks/${task.id}`], ['GET', `/tasks/${task.id}/events`]] as const) {
      const r = await req(server, method, p, { token: server.tokenB });
      assert.equal(r.status, 404, `${method} ${p} as bob`);
      assert.equal(r.json.code, 'task_not_found');
    }
    const bobList = await req(server, 'GET', '/tasks', { token: server.tokenB });
    assert.equal(bobList.json.data.length, 0, "bob's list does not show alice's task");
    const bob = new RawSession(mcpUrl, server.tokenB);
    await bob.initialize();
    for (const method of ['tasks/get', 'tasks/result', 'tasks/cancel']) {
      requests++;
      const r = await bob.call(method, { taskId: task.id });
      assert.equal(r.error?.code, -32602, `${method} on a foreign task`);
    }
    requests++;
    const text = await bob.call('tools/call', { name: 'get_task_text', arguments: { taskId: task.id } });
    assert.ok(text.error?.code === -32602 || text.result?.isError === true, 'get_task_text of a foreign task is refused');
    assert.doesNotMatch(JSON.stringify(text), /onerror/, 'nothing of the foreign task leaks');

    // Foreign Host and Origin: 403 before auth, in both doors.
    const foreign: Record<string, string>[] = [{ host: 'evil.example' }, { host: `attacker.test:${server.port}` }, { origin: 'https://evil.example' }, { origin: 'null' }];
    for (const headers of foreign) {
      for (const p of [`/lmsp/v1/tasks/${task.id}`, '/mcp']) {
        const r = await req(server, p === '/mcp' ? 'POST' : 'GET', p, { headers, body: p === '/mcp' ? { jsonrpc: '2.0', id: 1, method: 'tools/list' } : undefined });
        assert.equal(r.status, 403, `${JSON.stringify(headers)} ${p}`);
        if (p === '/mcp') assert.equal(r.json.jsonrpc, '2.0');
        else assert.equal(r.json.code, 'forbidden');
      }
    }

    // HTML in task text is data: returned verbatim as a JSON string, never as markup.
    const own = await req(server, 'GET', `/tasks/${task.id}`);
    assert.match(String(own.headers['content-type']), /^application\/json/);
    assert.equal(own.json.task_runtime.prompt, INJECTION);
    assert.equal(own.headers['x-content-type-options'] ?? 'nosniff', 'nosniff');

    recordFigures('security', { iterations: 1, faultsInjected: 0, requestsTried: requests, crashes: server.proc.exitCode === null ? 0 : 1, status5xx, dataLost: 0 });
  } finally {
    await server.kill();
    removeDir(server.dataDir);
  }
  assert.equal(status5xx, 0);
});
