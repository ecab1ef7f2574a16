// Each LMSP endpoint's success path and its documented errors, against a real server process.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { EventSource } from 'eventsource';
import { until } from '../../support/wait';
import { call, createTask, followEvents, removeDir, startRunningTask, startServer, waitForStatus, type Server } from './harness';

// ch.7 §7.1 members, plus the vendor member the editor's other windows read (Responses clients ignore it).
const TASK_KEYS = [
  'id',
  'object',
  'type',
  'status',
  'created_at',
  'updated_at',
  'response_id',
  'events_url',
  'on_restart',
  'response',
  'error',
  'task_runtime',
];

function assertProblem(r: { status: number; headers: Record<string, unknown>; json: any }, status: number, code: string): void {
  assert.equal(r.status, status, JSON.stringify(r.json));
  assert.match(String(r.headers['content-type']), /^application\/problem\+json/);
  assert.equal(r.json.status, status);
  assert.equal(r.json.code, code);
  assert.equal(typeof r.json.title, 'string');
  assert.equal(typeof r.json.detail, 'string');
  assert.equal(typeof r.json.type, 'string');
}

describe('LMSP endpoints', () => {
  let server: Server;
  before(async () => {
    // One task at a time: the cancel test needs a task queued behind a running one.
    server = await startServer({ args: ['--concurrency', '1'] });
  });
  after(async () => {
    assert.equal(await server.stop(), 0);
    removeDir(server.dataDir);
  });

  it('serves the discovery document', async () => {
    const r = await call(server, 'GET', '/capabilities');
    assert.equal(r.status, 200);
    assert.equal(r.json.protocol, 'lmsp');
    assert.equal(r.json.version, '1.0');
    assert.equal(r.json.capabilities.event_resume, true);
    assert.ok(r.json.capabilities.on_restart.includes('fail'));
    assert.ok(r.json.capabilities.on_restart.includes('retry'));
    for (const k of ['event_history_seconds', 'task_retention_seconds', 'idempotency_key_ttl_seconds'])
      assert.equal(typeof r.json.limits[k], 'number');
  });

  it('lists models and reads one; an unknown model is 404 model_not_found', async () => {
    const list = await call(server, 'GET', '/models');
    assert.equal(list.status, 200);
    assert.equal(list.json.object, 'list');
    assert.ok(list.json.data.length >= 1);
    const first = list.json.data[0];
    assert.equal(first.object, 'model');
    assert.ok(['unloaded', 'loading', 'loaded', 'error'].includes(first.state));
    const one = await call(server, 'GET', `/models/${encodeURIComponent(first.id)}`);
    assert.equal(one.status, 200);
    assert.equal(one.json.id, first.id);
    assertProblem(await call(server, 'GET', '/models/no-such-model'), 404, 'model_not_found');
    const r = await call(server, 'POST', '/tasks', { body: { type: 'response', input: { model: 'no-such-model', input: 'x' } } });
    assertProblem(r, 404, 'model_not_found');
  });

  it('reports what a loaded model runs on in the vendor member (a CPU here, with the reason and the threads)', async () => {
    const task = await createTask(server, { model: server.model, input: 'hello', max_output_tokens: 2 });
    await waitForStatus(server, task.id, ['succeeded', 'failed']);
    const r = await call(server, 'GET', `/models/${encodeURIComponent(server.model)}`);
    assert.equal(r.json.state, 'loaded');
    const hw = r.json.task_runtime?.hardware;
    assert.ok(hw, JSON.stringify(r.json));
    assert.equal(hw.compute, 'cpu');
    assert.equal(hw.gpu_layers, 0);
    assert.match(hw.fallback_reason, /CPU/);
    assert.ok(Number.isInteger(hw.threads) && hw.threads >= 1);
    assert.ok(['calibration', 'cache', 'setting'].includes(hw.threads_from));
    assert.equal(hw.threads_cap, null, '--threads auto sets no bound');
    assert.match(hw.summary, /CPU, \d+ thread/);
  });

  it('creates a task (202, ch.7 shape), reads it, and it succeeds', async () => {
    const r = await call(server, 'POST', '/tasks', {
      body: { type: 'response', input: { model: server.model, input: 'hello', max_output_tokens: 4 } },
    });
    assert.equal(r.status, 202);
    assert.deepEqual(Object.keys(r.json).sort(), [...TASK_KEYS].sort());
    assert.equal(r.json.task_runtime.origin, 'lmsp');
    assert.equal(r.json.task_runtime.status, r.json.status);
    assert.equal(typeof r.json.task_runtime.created_at_ms, 'number');
    assert.equal(Math.floor(r.json.task_runtime.created_at_ms / 1000), r.json.created_at);
    assert.match(r.json.id, /^task_/);
    assert.match(r.json.response_id, /^resp_/);
    assert.equal(r.json.object, 'task');
    assert.equal(r.json.type, 'response');
    assert.equal(r.json.status, 'queued');
    assert.equal(r.json.on_restart, 'fail');
    assert.equal(r.json.events_url, `/lmsp/v1/tasks/${r.json.id}/events`);
    assert.equal(r.headers.location, `/lmsp/v1/tasks/${r.json.id}`);
    assert.ok(Number.isInteger(r.json.created_at) && r.json.created_at < 1e11, 'created_at is in seconds');
    const done = await waitForStatus(server, r.json.id, ['succeeded', 'failed', 'cancelled']);
    assert.equal(done.status, 'succeeded');
    assert.equal(done.error, null);
    assert.equal(done.response.id, r.json.response_id);
    assert.ok(['completed', 'incomplete'].includes(done.response.status));
    assert.equal(done.response.output[0].content[0].type, 'output_text');
    assert.ok(done.updated_at >= done.created_at);
  });

  it('a response that ends incomplete (token limit) leaves the task succeeded', async () => {
    const t = await createTask(server, { input: 'write a long report', temperature: 0, max_output_tokens: 3 });
    const done = await waitForStatus(server, t.id, ['succeeded', 'failed', 'cancelled']);
    assert.equal(done.status, 'succeeded');
    assert.equal(done.response.status, 'incomplete');
    assert.equal(done.response.incomplete_details.reason, 'max_output_tokens');
  });

  it('404 task_not_found for unknown and malformed ids', async () => {
    assertProblem(await call(server, 'GET', '/tasks/task_doesnotexist0000000000'), 404, 'task_not_found');
    assertProblem(await call(server, 'GET', '/tasks/..%2F..%2Fetc'), 404, 'task_not_found');
    assertProblem(await call(server, 'POST', '/tasks/task_nope/cancel'), 404, 'task_not_found');
    assertProblem(await call(server, 'GET', '/tasks/task_nope/events'), 404, 'task_not_found');
    assertProblem(await call(server, 'DELETE', '/tasks/not-a-task'), 404, 'task_not_found');
  });

  it('lists tasks newest first with a cursor and a status filter', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await createTask(server, {}, {}, server.tokenB)).id);
    for (const id of ids) await waitForStatus(server, id, ['succeeded'], server.tokenB);
    const page1 = await call(server, 'GET', '/tasks?limit=2', { token: server.tokenB });
    assert.equal(page1.status, 200);
    assert.equal(page1.json.object, 'list');
    assert.deepEqual(
      page1.json.data.map((t: any) => t.id),
      [ids[2], ids[1]],
    );
    assert.equal(page1.json.has_more, true);
    const page2 = await call(server, 'GET', `/tasks?limit=2&cursor=${encodeURIComponent(page1.json.next_cursor)}`, { token: server.tokenB });
    assert.deepEqual(
      page2.json.data.map((t: any) => t.id),
      [ids[0]],
    );
    assert.equal(page2.json.next_cursor, null);
    const queued = await call(server, 'GET', '/tasks?status=queued,running', { token: server.tokenB });
    assert.deepEqual(queued.json.data, []);
    const succeeded = await call(server, 'GET', '/tasks?status=succeeded', { token: server.tokenB });
    assert.equal(succeeded.json.data.length, 3);
    assertProblem(await call(server, 'GET', '/tasks?status=bogus', { token: server.tokenB }), 400, 'invalid_request');
    assertProblem(await call(server, 'GET', '/tasks?limit=0', { token: server.tokenB }), 400, 'invalid_request');
    assertProblem(await call(server, 'GET', '/tasks?cursor=!!!', { token: server.tokenB }), 400, 'invalid_request');
    assertProblem(await call(server, 'GET', '/tasks?colour=red', { token: server.tokenB }), 400, 'invalid_request');
  });

  it('cancel: running → cancelling → cancelled, idempotent; queued → cancelled at once; finished → 409', async () => {
    const { task } = await startRunningTask(server);
    const queuedBehind = await createTask(server, { input: 'x', max_output_tokens: 4 });
    assert.equal(queuedBehind.status, 'queued');
    const cq = await call(server, 'POST', `/tasks/${queuedBehind.id}/cancel`);
    assert.equal(cq.status, 200);
    assert.equal(cq.json.status, 'cancelled');
    const c1 = await call(server, 'POST', `/tasks/${task.id}/cancel`);
    assert.equal(c1.status, 200);
    assert.ok(['cancelling', 'cancelled'].includes(c1.json.status), c1.json.status);
    const done = await waitForStatus(server, task.id, ['cancelled', 'succeeded', 'failed']);
    assert.equal(done.status, 'cancelled');
    assert.equal(done.response, null);
    assert.equal(done.error, null);
    const again = await call(server, 'POST', `/tasks/${task.id}/cancel`);
    assert.equal(again.status, 200);
    assert.equal(again.json.status, 'cancelled');
    // The partial output stays readable through the response id.
    const partial = await call(server, 'GET', `/responses/${task.response_id}`);
    assert.equal(partial.status, 200);
    assert.equal(partial.json.status, 'cancelled');
    const { events } = await followEvents(server, task.id);
    assert.equal(events.at(-1)!.type, 'response.cancelled');
    const finished = await createTask(server);
    await waitForStatus(server, finished.id, ['succeeded']);
    assertProblem(await call(server, 'POST', `/tasks/${finished.id}/cancel`), 409, 'task_not_cancelable');
  });

  it('delete: terminal tasks only (409 otherwise); then 404', async () => {
    const { task } = await startRunningTask(server);
    assertProblem(await call(server, 'DELETE', `/tasks/${task.id}`), 409, 'task_not_deletable');
    await call(server, 'POST', `/tasks/${task.id}/cancel`);
    await waitForStatus(server, task.id, ['cancelled']);
    const d = await call(server, 'DELETE', `/tasks/${task.id}`);
    assert.equal(d.status, 200);
    assert.deepEqual(d.json, { id: task.id, object: 'task.deleted', deleted: true });
    assertProblem(await call(server, 'GET', `/tasks/${task.id}`), 404, 'task_not_found');
    assertProblem(await call(server, 'DELETE', `/tasks/${task.id}`), 404, 'task_not_found');
  });

  it('binds tasks to their principal: another token sees 404 everywhere', async () => {
    const t = await createTask(server);
    await waitForStatus(server, t.id, ['succeeded']);
    const asBob = { token: server.tokenB };
    assertProblem(await call(server, 'GET', `/tasks/${t.id}`, asBob), 404, 'task_not_found');
    assertProblem(await call(server, 'POST', `/tasks/${t.id}/cancel`, asBob), 404, 'task_not_found');
    assertProblem(await call(server, 'DELETE', `/tasks/${t.id}`, asBob), 404, 'task_not_found');
    assertProblem(await call(server, 'GET', `/tasks/${t.id}/events`, asBob), 404, 'task_not_found');
    assertProblem(await call(server, 'GET', `/responses/${t.response_id}`, asBob), 404, 'response_not_found');
    const list = await call(server, 'GET', '/tasks?limit=100', asBob);
    assert.ok(!list.json.data.some((x: any) => x.id === t.id));
    assert.equal((await call(server, 'GET', `/tasks/${t.id}`)).status, 200);
  });

  it('POST /responses answers a Responses object; GET /responses/{id} reads it back', async () => {
    const r = await call(server, 'POST', '/responses', {
      body: { model: server.model, input: [{ role: 'user', content: 'hi' }], max_output_tokens: 5 },
    });
    assert.equal(r.status, 200);
    assert.equal(r.json.object, 'response');
    assert.match(r.json.id, /^resp_/);
    assert.ok(['completed', 'incomplete'].includes(r.json.status));
    assert.equal(typeof r.json.output[0].content[0].text, 'string');
    const g = await call(server, 'GET', `/responses/${r.json.id}`);
    assert.equal(g.status, 200);
    assert.deepEqual(g.json, r.json);
    assertProblem(await call(server, 'GET', '/responses/resp_unknown000000'), 404, 'response_not_found');
    assertProblem(await call(server, 'GET', '/responses/bad%20id'), 404, 'response_not_found');
  });

  it('POST /responses with stream:true is SSE ending with the terminal event and [DONE]', async () => {
    const r = await call(server, 'POST', '/responses', { body: { model: server.model, input: 'hi', max_output_tokens: 6, stream: true } });
    assert.equal(r.status, 200);
    assert.match(String(r.headers['content-type']), /^text\/event-stream/);
    const frames = r.text.split('\n\n').filter((f) => f.trim() !== '');
    assert.equal(frames.at(-1), 'data: [DONE]');
    const types = frames.slice(0, -1).map((f) => /^event: (.*)$/m.exec(f)![1]);
    assert.equal(types[0], 'response.created');
    assert.ok(['response.completed', 'response.incomplete'].includes(types.at(-1)!));
    assert.ok(types.includes('response.output_text.delta'));
    assert.ok(!types.some((t) => t.startsWith('task_runtime:')), 'vendor events stay on the task stream');
  });

  it('refuses what it cannot honour: 400 unsupported_capability', async () => {
    const caps = (await call(server, 'GET', '/capabilities')).json;
    if (!caps.capabilities.on_restart.includes('resume')) {
      const r = await call(server, 'POST', '/tasks', {
        body: { type: 'response', input: { model: server.model, input: 'x' }, on_restart: 'resume' },
      });
      assertProblem(r, 400, 'unsupported_capability');
    } else {
      const r = await call(server, 'POST', '/tasks', {
        body: { type: 'response', input: { model: server.model, input: 'x', max_output_tokens: 2 }, on_restart: 'resume' },
      });
      assert.equal(r.status, 202);
      assert.equal(r.json.on_restart, 'resume');
    }
    // A hosted tool (OpenAI's cloud ones) is left out of what the model sees, not refused; choosing it is refused.
    const tools = await call(server, 'POST', '/responses', {
      body: { model: server.model, input: 'x', max_output_tokens: 2, tools: [{ type: 'function', name: 'f' }, { type: 'web_search' }] },
    });
    assert.equal(tools.status, 200, tools.text);
    assert.deepEqual(tools.json.task_runtime, { ignored_tools: [{ index: 1, type: 'web_search' }] });
    const chosen = await call(server, 'POST', '/responses', {
      body: { model: server.model, input: 'x', tools: [{ type: 'web_search' }], tool_choice: { type: 'web_search' } },
    });
    assertProblem(chosen, 400, 'unsupported_capability');
    assert.equal(chosen.json.param, 'tool_choice.type');
    assert.match(chosen.json.detail, /web_search/);
    // A reasoning effort on a model whose template has no thought segment (the demo model's plain prompt).
    const reasoning = await call(server, 'POST', '/tasks', {
      body: { type: 'response', input: { model: server.model, input: 'x', reasoning: { effort: 'low' } } },
    });
    assertProblem(reasoning, 400, 'unsupported_capability');
    assert.equal(reasoning.json.param, 'input.reasoning.effort');
  });

  it('405 for a wrong method, 404 not_found for an unknown route', async () => {
    const r = await call(server, 'PUT', '/tasks');
    assertProblem(r, 405, 'method_not_allowed');
    assert.match(String(r.headers.allow), /GET/);
    assertProblem(await call(server, 'GET', '/nothing-here'), 404, 'not_found');
    assertProblem(await call(server, 'GET', '/lmsp/v2/tasks'), 404, 'not_found');
  });

  it('streams task changes of the caller only on /task_runtime/changes', async () => {
    const seen: any[] = [];
    let opened!: () => void;
    const isOpen = new Promise<void>((r) => (opened = r));
    const es = new EventSource(`${server.lmsp}/task_runtime/changes`, {
      fetch: (input, init) =>
        fetch(input, { ...init, headers: { ...(init?.headers as Record<string, string>), authorization: `Bearer ${server.tokenA}` } }),
    });
    es.addEventListener('open', () => opened());
    es.addEventListener('task_runtime:task.changed', (e: MessageEvent) => seen.push(JSON.parse(e.data)));
    await isOpen;
    const other = await createTask(server, {}, {}, server.tokenB);
    const mine = await createTask(server);
    await waitForStatus(server, mine.id, ['succeeded']);
    await waitForStatus(server, other.id, ['succeeded'], server.tokenB);
    assert.equal((await call(server, 'DELETE', `/tasks/${mine.id}`)).status, 200);
    await until(() => seen.some((c) => c.deleted && c.task.id === mine.id), 'the deletion on the change feed');
    es.close();
    // Other tasks of the same principal (earlier tests) may still report changes; another principal's never do.
    assert.ok(
      seen.every((c) => c.task.id !== other.id),
      'nothing of the other principal',
    );
    const ofMine = seen.filter((c) => c.task.id === mine.id);
    assert.ok(ofMine.length >= 3, `saw ${ofMine.length} changes of the task`);
    assert.ok(ofMine.some((c) => c.task.status === 'succeeded' && !c.deleted));
    assert.ok(ofMine.at(-1).deleted);
    assert.equal(seen[0].type, 'task_runtime:task.changed');
  });
});
