// Retention's sweep directly, on an injected clock over a real store: ttl expiry of any task (running ones are
// stopped first), deletion of finished tasks past the window, event history purges, old idempotency keys.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { problem } from '../../../src/runtime/problems';
import { sweep, type RetentionPolicy } from '../../../src/runtime/retention';
import { openParts } from '../../fixtures/runtimeParts';

const HOUR = 3_600_000;
const policy: RetentionPolicy = { taskRetentionMs: 24 * HOUR, eventHistoryMs: HOUR, idempotencyKeyTtlMs: 2 * HOUR };

test('a task past its ttl is deleted whatever its status, and a running one is stopped first', async () => {
  const parts = await openParts();
  const short = parts.add({ ttlMs: 60_000 });
  parts.transitions.startRunning(short.id, { messageId: 'msg_1', fromQueued: true });
  const long = parts.add({ ttlMs: 10 * 60_000 });
  const deleted: string[] = [];
  parts.bus.onTaskChange((t, gone) => gone && deleted.push(t.id));
  const stopped: string[] = [];

  assert.deepEqual(
    sweep(parts.store, parts.bus, policy, parts.clock.now(), (id) => stopped.push(id)),
    { expired: 0, deleted: 0, historyPurged: 0 },
  );
  parts.clock.advance(60_000);
  const r = sweep(parts.store, parts.bus, policy, parts.clock.now(), (id) => stopped.push(id));
  assert.equal(r.expired, 1);
  assert.deepEqual(stopped, [short.id]);
  assert.deepEqual(deleted, [short.id]);
  assert.equal(parts.store.getTask(short.id), undefined);
  assert.deepEqual(parts.store.readEvents(short.id, -1), [], 'its events go with it');
  assert.equal(parts.store.getTask(long.id)?.status, 'queued');
  await parts.close();
});

test('a finished task’s history is purged after its window and the task after the retention window; unfinished tasks keep both', async () => {
  const parts = await openParts();
  const done = parts.add();
  parts.transitions.fail(done.id, problem('model_error', 'x'));
  const open = parts.add();
  const stopped: string[] = [];
  const run = () => sweep(parts.store, parts.bus, policy, parts.clock.now(), (id) => stopped.push(id));

  parts.clock.advance(HOUR + 1);
  const first = run();
  assert.equal(first.deleted, 0);
  assert.equal(first.historyPurged, 1, 'only the finished task: a running one may still be followed');
  assert.equal(parts.store.readEvents(open.id, -1).length, 2);
  const purged = parts.store.getTask(done.id)!;
  assert.equal(purged.oldestSeq, purged.nextSeq);
  assert.deepEqual(parts.store.readEvents(done.id, -1), []);
  assert.equal(run().historyPurged, 0, 'nothing purged twice');

  parts.clock.advance(24 * HOUR);
  assert.equal(run().deleted, 1);
  assert.equal(parts.store.getTask(done.id), undefined);
  assert.equal(parts.store.getTask(open.id)?.status, 'queued', 'an unfinished task is never removed by the window');
  assert.deepEqual(stopped, [done.id], 'told before the delete (a no-op for a finished task)');
  await parts.close();
});

test('idempotency keys older than their ttl are dropped; a sweep with nothing to purge writes nothing', async () => {
  const parts = await openParts();
  const t = parts.add();
  parts.db.write(parts.store.insertIdempotencyOps('p', 'lmsp', 'k', 'fp', t.id, parts.clock.now()));
  const run = () => sweep(parts.store, parts.bus, policy, parts.clock.now(), () => undefined);
  run();
  const batches = parts.db.stats.batches;
  run();
  assert.equal(parts.db.stats.batches, batches, 'an idle sweep costs no write');
  assert.ok(parts.store.findIdempotencyKey('p', 'lmsp', 'k'));
  parts.clock.advance(2 * HOUR + 1);
  run();
  assert.equal(parts.store.findIdempotencyKey('p', 'lmsp', 'k'), undefined);
  await parts.close();
});
