// The editor window that does not own the store sees the owner's tasks through LMSP: the remote task source
// against a real server process (list, counts, vendor fields, change feed, create/cancel/delete, event replay).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { RemoteTaskSource } from '../../../src/extension/model/remoteTaskSource';
import type { TaskEventInfo, TaskInfo } from '../../../src/extension/model/taskSource';
import { call, startServer, type Server } from './harness';

let server: Server;
let source: RemoteTaskSource;

before(async () => {
  server = await startServer();
  source = new RemoteTaskSource({ lmspUrl: server.lmsp, token: server.tokenA });
});
after(async () => {
  source.dispose();
  await server.stop();
});

async function until<T>(f: () => T | undefined | false, what: string, ms = 60_000): Promise<T> {
  const start = Date.now();
  for (;;) {
    const v = f();
    if (v) return v;
    if (Date.now() - start > ms) throw new Error(`timed out: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

test('create, follow the change feed, read the vendor fields and the prompt, count, delete', async () => {
  const changes: Array<{ task: TaskInfo; deleted: boolean }> = [];
  const sub = source.onDidChangeTask((task, deleted) => changes.push({ task, deleted }));
  await source.connected(); // the feed is up: no change below can be missed
  const created = await source.create({ prompt: 'remote window prompt', maxOutputTokens: 6, onRestart: 'retry' });
  assert.equal(created.status, 'queued');
  assert.equal(created.origin, 'lmsp', 'a plain LMSP client');
  assert.equal(created.title, 'remote window prompt');
  const done = await until(() => changes.find((c) => c.task.id === created.id && c.task.status === 'succeeded'), 'succeeded via the feed');
  assert.equal(done.task.outputTokens > 0, true);
  const got = await source.get(created.id);
  assert.equal(got?.prompt, 'remote window prompt', 'the single read carries the prompt for a retry');
  assert.equal(got?.onRestart, 'retry');
  const counts = await source.counts();
  assert.ok(counts.succeeded >= 1);
  const page = await source.list({ statuses: ['succeeded'], limit: 10 });
  assert.ok(page.tasks.some((t) => t.id === created.id));
  await source.delete(created.id);
  await until(() => changes.find((c) => c.task.id === created.id && c.deleted), 'deletion via the feed');
  assert.equal(await source.get(created.id), undefined);
  sub.dispose();
});

test("an editor window's origin claim is refused by a server that has no editor principal", async () => {
  const editorSource = new RemoteTaskSource({ lmspUrl: server.lmsp, token: server.tokenA, editorOrigin: true });
  try {
    await assert.rejects(editorSource.create({ prompt: 'claims the editor', maxOutputTokens: 2 }), /Only the editor/);
  } finally {
    editorSource.dispose();
  }
});

test('events: replay from a sequence, then live, ending after the terminal event; cancel through the owner', async () => {
  // Greedy decoding keeps the tiny model going until cancelled (the editor's create has no temperature).
  const res = await call(server, 'POST', '/tasks', {
    body: { type: 'response', input: { model: server.model, input: 'stream me', temperature: 0 } },
  });
  assert.equal(res.status, 202);
  const task = { id: (res.json as { id: string }).id };
  const seen: TaskEventInfo[] = [];
  let ended = false;
  const stream = source.subscribeEvents(task.id, undefined, { onEvent: (e) => seen.push(e), onEnd: () => (ended = true) });
  await until(() => seen.filter((e) => e.type === 'response.output_text.delta').length >= 2 || ended, 'deltas');
  const cancelled = await source.cancel(task.id);
  assert.ok(['cancelling', 'cancelled'].includes(cancelled.status));
  await until(() => ended, 'stream end');
  assert.equal(seen[seen.length - 1].type, 'response.cancelled');
  seen.forEach((e, i) => assert.equal(e.seq, i));
  stream.dispose();
  // A second reader starting mid-way gets exactly the rest.
  const rest: TaskEventInfo[] = [];
  let restEnded = false;
  const again = source.subscribeEvents(task.id, 3, { onEvent: (e) => rest.push(e), onEnd: () => (restEnded = true) });
  await until(() => restEnded, 'replay end');
  assert.deepEqual(
    rest.map((e) => e.seq),
    seen.slice(4).map((e) => e.seq),
  );
  again.dispose();
});

test('the queue through the owner: a queued task’s place, run next, and cancelling one’s queued tasks at once', async () => {
  // One task at a time, and greedy decoding keeps that slot busy until cancelled: the rest wait behind it.
  const one = await startServer({ args: ['--concurrency', '1'] });
  const src = new RemoteTaskSource({ lmspUrl: one.lmsp, token: one.tokenA });
  try {
    const holder = await call(one, 'POST', '/tasks', {
      body: { type: 'response', input: { model: one.model, input: 'hold the slot', temperature: 0 } },
    });
    const holderId = (holder.json as { id: string }).id;
    const a = await src.create({ prompt: 'first in line', maxOutputTokens: 2 });
    const b = await src.create({ prompt: 'second in line', maxOutputTokens: 2 });
    const read = async (id: string) => (await src.get(id))?.queue?.position;
    assert.deepEqual([await read(a.id), await read(b.id)], [1, 2]);
    const moved = await src.runNext(b.id);
    assert.deepEqual([moved.priority, moved.queue?.position], [10, 1]);
    assert.equal(await read(a.id), 2);
    const cancelled = await src.cancelMany(['queued']);
    assert.deepEqual(cancelled.map((t) => t.id).sort(), [a.id, b.id].sort());
    assert.deepEqual(await src.cancelMany(['queued']), [], 'nothing left');
    await src.cancel(holderId);
  } finally {
    src.dispose();
    await one.stop();
  }
});
