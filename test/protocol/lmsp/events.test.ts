// GET /tasks/{id}/events with a real SSE client: replay from 0, live follow, resume without gap or duplicate,
// late join, cursor errors.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import {
  assertContiguous,
  call,
  createTask,
  followEvents,
  LONG_INPUT,
  removeDir,
  startServer,
  TERMINAL_TYPES,
  waitForStatus,
  type Server,
} from './harness';

describe('LMSP task event stream', () => {
  let server: Server;
  before(async () => {
    server = await startServer();
  });
  after(async () => {
    assert.equal(await server.stop(), 0);
    removeDir(server.dataDir);
  });

  it('replays from 0 after completion: response.created first, one terminal event last, ids = sequence_number', async () => {
    const t = await createTask(server, { max_output_tokens: 6 });
    const done = await waitForStatus(server, t.id, ['succeeded']);
    const { events } = await followEvents(server, t.id);
    assertContiguous(events);
    assert.equal(events[0].type, 'response.created');
    assert.equal(events[0].data.response.id, t.response_id);
    assert.equal(events.filter((e) => TERMINAL_TYPES.has(e.type)).length, 1);
    assert.ok(TERMINAL_TYPES.has(events.at(-1)!.type));
    const text = events
      .filter((e) => e.type === 'response.output_text.delta')
      .map((e) => e.data.delta)
      .join('');
    assert.equal(text, done.response.output[0].content[0].text);
    for (const order of [
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
    ]) {
      assert.ok(
        events.some((e) => e.type === order),
        order,
      );
    }
  });

  it('follows a running task live from the start to its end', async () => {
    const t = await createTask(server, LONG_INPUT);
    const { events } = await followEvents(server, t.id);
    assertContiguous(events);
    assert.ok(['response.completed', 'response.incomplete'].includes(events.at(-1)!.type));
    assert.ok(events.some((e) => e.type === 'response.in_progress'));
  });

  it('resumes mid-stream with Last-Event-ID: no gap, no duplicate', async () => {
    const t = await createTask(server, LONG_INPUT);
    const first = await followEvents(server, t.id, { until: (_e, all) => all.filter((x) => x.type === 'response.output_text.delta').length >= 3 });
    const last = first.events.at(-1)!.id;
    const status = (await call(server, 'GET', `/tasks/${t.id}`)).json.status;
    const rest = await followEvents(server, t.id, { lastEventId: last });
    assert.equal(rest.events[0].id, last + 1);
    const all = [...first.events, ...rest.events];
    assertContiguous(all);
    assert.ok(TERMINAL_TYPES.has(all.at(-1)!.type));
    assert.ok(['running', 'succeeded'].includes(status));
    // The same history read in one go is identical.
    const whole = await followEvents(server, t.id);
    assert.deepEqual(whole.events, all);
  });

  it('?after=N resumes too, and the Last-Event-ID header wins over it', async () => {
    const t = await createTask(server, { max_output_tokens: 4 });
    await waitForStatus(server, t.id, ['succeeded']);
    const viaQuery = await call(server, 'GET', `/tasks/${t.id}/events?after=2`);
    assert.equal(viaQuery.status, 200);
    const ids = [...viaQuery.text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));
    assert.equal(ids[0], 3);
    const headerWins = await call(server, 'GET', `/tasks/${t.id}/events?after=2`, { headers: { 'last-event-id': '4' } });
    const ids2 = [...headerWins.text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));
    assert.equal(ids2[0], 5);
  });

  it('a late join after the terminal event gets 204 and the client stops', async () => {
    const t = await createTask(server, { max_output_tokens: 4 });
    await waitForStatus(server, t.id, ['succeeded']);
    const { events: all } = await followEvents(server, t.id);
    const r = await followEvents(server, t.id, { lastEventId: all.at(-1)!.id });
    assert.equal(r.events.length, 0);
    assert.equal(r.failedStatus, 204);
  });

  it('a non-integer or future Last-Event-ID is 400 invalid_last_event_id', async () => {
    const t = await createTask(server, { max_output_tokens: 4 });
    await waitForStatus(server, t.id, ['succeeded']);
    for (const bad of ['abc', '-1', '1.5', '1e3', ' ']) {
      const r = await call(server, 'GET', `/tasks/${t.id}/events`, { headers: { 'last-event-id': bad } });
      assert.equal(r.status, 400, bad);
      assert.equal(r.json.code, 'invalid_last_event_id');
    }
    const future = await call(server, 'GET', `/tasks/${t.id}/events`, { headers: { 'last-event-id': '100000' } });
    assert.equal(future.status, 400);
    assert.equal(future.json.code, 'invalid_last_event_id');
    const q = await call(server, 'GET', `/tasks/${t.id}/events?after=x`);
    assert.equal(q.json.code, 'invalid_last_event_id');
    assert.equal(q.json.param, 'after');
  });

  it('sends heartbeat comments and SSE headers', async () => {
    // This server sends a heartbeat every TASK_RUNTIME_HEARTBEAT_MS; the default is long, so read a live stream's
    // head and check the framing instead.
    const t = await createTask(server, LONG_INPUT);
    const res = await fetch(`${server.lmsp}/tasks/${t.id}/events`, { headers: { authorization: `Bearer ${server.tokenA}` } });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type')!, /^text\/event-stream/);
    assert.equal(res.headers.get('cache-control'), 'no-cache');
    const reader = res.body!.getReader();
    const { value } = await reader.read();
    assert.match(Buffer.from(value!).toString(), /^id: 0\nevent: response\.created\ndata: \{/);
    await reader.cancel();
    await call(server, 'POST', `/tasks/${t.id}/cancel`);
    await waitForStatus(server, t.id, ['cancelled', 'succeeded']);
  });
});

describe('LMSP heartbeats', () => {
  let server: Server;
  before(async () => {
    server = await startServer({ env: { TASK_RUNTIME_HEARTBEAT_MS: '100' } });
  });
  after(async () => {
    assert.equal(await server.stop(), 0);
    removeDir(server.dataDir);
  });

  it('an idle stream carries `: ping` comments', async () => {
    const res = await fetch(`${server.lmsp}/task_runtime/changes`, { headers: { authorization: `Bearer ${server.tokenA}` } });
    assert.equal(res.status, 200);
    const reader = res.body!.getReader();
    let text = '';
    while (!text.includes(': ping')) text += Buffer.from((await reader.read()).value!).toString();
    await reader.cancel();
    assert.match(text, /^: ping$/m);
  });
});
