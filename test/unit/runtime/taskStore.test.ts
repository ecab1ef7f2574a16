// TaskStore directly, over a real sql.js store: records round-trip through the write builders and a reopen, lists
// page newest first per principal/status/origin, counts, events after a sequence, idempotency keys, deletes and
// history purges, and the finished-task cache that every poll reads.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { problem } from '../../../src/runtime/problems';
import type { TaskRecord } from '../../../src/runtime/task';
import { TaskTransitions } from '../../../src/runtime/transitions';
import { openParts } from '../../fixtures/runtimeParts';

test('a task written by the create batch reads back the same, also after a reopen', async () => {
  const parts = await openParts();
  const t = parts.add({
    principal: 'alice',
    title: 'hello',
    input: { model: 'm', input: 'hi', temperature: 0.5 },
    ttlMs: 60_000,
    meta: { tool: 'x' },
  });
  const read = parts.store.getTask(t.id);
  assert.deepEqual(read, t);
  assert.equal(parts.store.getTaskByResponseId(t.responseId)?.id, t.id);
  assert.equal(read?.expiresAt, t.createdAt + 60_000);
  await parts.close();
  const again = await openParts(parts.dir, parts.clock);
  assert.deepEqual(again.store.getTask(t.id), t);
  assert.equal(again.store.maxQueueOrder(), 1);
  assert.equal(again.store.getTask('task_unknown'), undefined);
  await again.close();
});

test('lists page newest first with a keyset cursor, filtered by principal, status and origin; counts per status', async () => {
  const parts = await openParts();
  const made: TaskRecord[] = [];
  for (let i = 0; i < 5; i++) {
    made.push(parts.add({ principal: i % 2 ? 'bob' : 'alice', origin: i === 4 ? 'mcp' : 'lmsp' }));
    parts.clock.advance(1000);
  }
  parts.transitions.fail(made[0].id, problem('model_error', 'x'));
  const alice = parts.store.listTasks({ principal: 'alice', limit: 2 });
  assert.deepEqual(
    alice.map((t) => t.id),
    [made[4].id, made[2].id],
  );
  const last = alice[alice.length - 1];
  const next = parts.store.listTasks({ principal: 'alice', before: { createdAt: last.createdAt, id: last.id }, limit: 2 });
  assert.deepEqual(
    next.map((t) => t.id),
    [made[0].id],
  );
  assert.deepEqual(
    parts.store.listTasks({ statuses: ['failed'], limit: 10 }).map((t) => t.id),
    [made[0].id],
  );
  assert.deepEqual(
    parts.store.listTasks({ origin: 'mcp', limit: 10 }).map((t) => t.id),
    [made[4].id],
  );
  const now = parts.clock.now();
  const counts = Object.fromEntries(parts.store.countByStatus(now).map((c) => [c.status, c.n]));
  assert.deepEqual(counts, { queued: 4, failed: 1 });
  assert.deepEqual(parts.store.countByStatus(now, 'bob'), [{ status: 'queued', n: 2 }]);
  assert.deepEqual(
    parts.store.activeTasks().map((t) => t.id),
    made.slice(1).map((t) => t.id),
    'unfinished tasks in queue order',
  );
  await parts.close();
});

test('events read after a sequence; idempotency keys found by principal and scope', async () => {
  const parts = await openParts();
  const t = parts.add();
  parts.transitions.startRunning(t.id, { messageId: 'msg_1', fromQueued: true });
  const all = parts.store.readEvents(t.id, -1);
  assert.equal(all.length, 6);
  assert.deepEqual(
    parts.store.readEvents(t.id, 3).map((e) => e.seq),
    [4, 5],
  );
  assert.deepEqual(
    parts.store.readEvents(t.id, 1, 2).map((e) => e.seq),
    [2, 3],
    'limit',
  );

  parts.db.write(parts.store.insertIdempotencyOps('alice', 'lmsp', 'k1', 'fp', t.id, parts.clock.now()));
  assert.deepEqual(parts.store.findIdempotencyKey('alice', 'lmsp', 'k1'), { fingerprint: 'fp', taskId: t.id, createdAt: parts.clock.now() });
  assert.equal(parts.store.findIdempotencyKey('bob', 'lmsp', 'k1'), undefined, 'keys are per principal');
  assert.equal(parts.store.findIdempotencyKey('alice', 'mcp', 'k1'), undefined, 'and per scope');
  assert.ok(parts.store.hasIdempotencyKeysBefore(parts.clock.now() + 1));
  parts.db.write(parts.store.purgeIdempotencyOps(parts.clock.now() + 1));
  assert.equal(parts.store.findIdempotencyKey('alice', 'lmsp', 'k1'), undefined);
  await parts.close();
});

test('a finished task is read from the cache as a frozen record; a purge or delete drops it', async () => {
  const parts = await openParts();
  const t = parts.add();
  parts.transitions.fail(t.id, problem('model_error', 'x'));
  const first = parts.store.getTask(t.id)!;
  assert.ok(Object.isFrozen(first));
  assert.equal(parts.store.getTask(t.id), first, 'the same record, no second read');

  parts.db.write(parts.store.purgeEventsOps(t.id, first.nextSeq));
  const purged = parts.store.getTask(t.id)!;
  assert.notEqual(purged, first);
  assert.equal(purged.oldestSeq, first.nextSeq);
  assert.deepEqual(parts.store.readEvents(t.id, -1), []);

  parts.db.write(parts.store.deleteTaskOps(t.id));
  assert.equal(parts.store.getTask(t.id), undefined);
  await parts.close();
});

test('snapshots and input rounds are stored with the task and cleared by the write that ends it', async () => {
  const parts = await openParts();
  const t = parts.add({ onRestart: 'resume' });
  parts.transitions.startRunning(t.id, { messageId: 'msg_1', fromQueued: true });
  const snapshot = { statePath: '/tmp/x', text: 'ab', outputTokens: 2 };
  parts.transitions.progress(t.id, { messageId: 'msg_1', tokens: 2, output: [{ kind: 'text', delta: 'ab' }], snapshot });
  assert.deepEqual(parts.store.snapshotOf(t.id), snapshot);
  const round = { round: 1, requests: { 'q.1': { method: 'roots/list' } }, responses: {} };
  parts.transitions.awaitInput(t.id, [], round);
  assert.deepEqual(parts.store.inputRoundsOf(t.id), [round]);
  parts.transitions.succeed(t.id, { finishReason: 'stop', inputTokens: 1, outputTokens: 2 }, { text: 'ab', messageId: 'msg_1' });
  assert.equal(parts.store.snapshotOf(t.id), null);
  assert.deepEqual(parts.store.inputRoundsOf(t.id), [round], 'rounds stay: they are the task’s history');
  await parts.close();
});

test('counts leave out tasks whose ttl has passed, before retention has swept them', async () => {
  const parts = await openParts();
  parts.add({ ttlMs: 60_000 });
  parts.add();
  assert.deepEqual(parts.store.countByStatus(parts.clock.now()), [{ status: 'queued', n: 2 }]);
  parts.clock.advance(60_000);
  assert.deepEqual(parts.store.countByStatus(parts.clock.now()), [{ status: 'queued', n: 1 }]);
  await parts.close();
});

test('stored bytes count what is stored for the principal: the task rows and their events, not another principal’s', async () => {
  const parts = await openParts();
  const instructions = 'i'.repeat(10_000);
  const t = parts.add({ principal: 'alice', input: { model: 'm', input: 'hi', instructions } });
  parts.add({ principal: 'bob', input: { model: 'm', input: 'x'.repeat(50_000) } });
  const row = Buffer.byteLength(JSON.stringify(t.request));
  // The events as stored (their echoes of the request are references to it: the test after the next).
  const events = () =>
    parts.store.database
      .all('SELECT type, data_json FROM events WHERE task_id = ?', [t.id])
      .reduce((n, r) => n + Buffer.byteLength(String(r.data_json)) + String(r.type).length, 0);
  const meta = Buffer.byteLength(JSON.stringify(t.meta));
  assert.equal(parts.store.storedBytes('alice'), row + meta + events());
  assert.ok(parts.store.storedBytes('alice') < 2 * instructions.length, 'the prompt once: its echoes in created and queued are references');
  // A running task's events: long deltas.
  parts.transitions.startRunning(t.id, { messageId: 'msg_1', fromQueued: true });
  const delta = 'd'.repeat(20_000);
  parts.transitions.progress(t.id, { messageId: 'msg_1', tokens: 1, output: [{ kind: 'text', delta }] });
  const before = parts.store.storedBytes('alice');
  // The prompt and the delta.
  assert.ok(before >= row + delta.length, String(before));
  assert.equal(parts.store.storedBytes('nobody'), 0);
  // Purged history and deleted tasks give their bytes back.
  parts.transitions.succeed(t.id, { finishReason: 'stop', inputTokens: 1, outputTokens: 1 }, { text: delta, messageId: 'msg_1' });
  const done = parts.store.getTask(t.id)!;
  const finished = parts.store.storedBytes('alice');
  assert.ok(finished > before + 2 * delta.length, 'the response on the row and in response.completed');
  parts.db.write(parts.store.purgeEventsOps(t.id, done.nextSeq));
  const purged = parts.store.storedBytes('alice');
  assert.ok(purged < finished - 2 * delta.length, `${purged} < ${finished}: the delta and the completed event are gone`);
  parts.db.write(parts.store.deleteTaskOps(t.id));
  assert.equal(parts.store.storedBytes('alice'), 0);
  await parts.close();
});

test('the bytes a batch stores are counted as it is written, for its task’s principal', async () => {
  const parts = await openParts();
  const told = new Map<string, number>();
  const transitions = new TaskTransitions(parts.store, parts.bus, parts.clock.now, (p, n) => told.set(p, (told.get(p) ?? 0) + n));
  const t = parts.record({ principal: 'alice', input: { model: 'm', input: 'hi', instructions: 'i'.repeat(5000) } });
  transitions.create(t, 1);
  transitions.startRunning(t.id, { messageId: 'msg_1', fromQueued: true });
  transitions.progress(t.id, { messageId: 'msg_1', tokens: 1, output: [{ kind: 'text', delta: 'd'.repeat(8000) }] });
  const stored = parts.store.storedBytes('alice');
  // What was told is at least what is stored (ids and status messages count too), and not much more.
  assert.ok((told.get('alice') ?? 0) >= stored, `${told.get('alice')} >= ${stored}`);
  assert.ok((told.get('alice') ?? 0) < stored * 1.2, `${told.get('alice')} < 1.2 × ${stored}`);
  await parts.close();
});

test("events keep the request's large echoes as references to it; reading them, also after a reopen, gives them back whole", async () => {
  const parts = await openParts();
  const instructions = 'Be precise and brief. '.repeat(500);
  const description = 'The path of the file to read. '.repeat(200);
  const schema = { type: 'object', properties: { answer: { type: 'string', enum: Array.from({ length: 300 }, (_, i) => `choice number ${i}`) } } };
  const t = parts.add({
    principal: 'alice',
    input: {
      model: 'm',
      input: 'hi',
      instructions,
      tools: [
        {
          type: 'function',
          name: 'read',
          description: 'Reads',
          parameters: { type: 'object', properties: { path: { type: 'string', description } } },
        },
      ],
      text: { format: { type: 'json_schema', name: 'a', schema } },
    },
  });
  parts.transitions.fail(t.id, problem('model_error', 'x'));
  const check = (store: typeof parts.store) => {
    const withResponse = store.readEvents(t.id, -1).filter((e) => typeof e.data.response === 'object');
    assert.ok(withResponse.length >= 3, `${withResponse.length} events with a response`);
    for (const e of withResponse) {
      const r = e.data.response as { instructions: string; tools: Array<{ parameters: unknown }>; text: { format: { schema: unknown } } };
      assert.equal(r.instructions, instructions, e.type);
      assert.deepEqual(r.tools[0]!.parameters, { type: 'object', properties: { path: { type: 'string', description } } });
      assert.deepEqual(r.text.format.schema, schema);
    }
    const raw = store.database
      .all('SELECT data_json FROM events WHERE task_id = ?', [t.id])
      .map((r) => String(r.data_json))
      .join('\n');
    for (const big of [instructions, description, 'choice number 299']) assert.ok(!raw.includes(big), 'stored once, in the task row only');
  };
  check(parts.store);
  await parts.close();
  const again = await openParts(parts.dir, parts.clock);
  check(again.store);
  await again.close();
});
