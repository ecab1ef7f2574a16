import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { isRuntimeError } from '../../../src/runtime/errors';
import type { ModelBackend, ModelInfo } from '../../../src/runtime/backend';
import type { TaskEvent } from '../../../src/runtime/task';
import { ManualClock } from '../../support/clock';
import { sleep, taskDeleted, taskReaches, waitFor } from '../../support/wait';
import { backend, collect, longPrompt, openRuntime, prompt, tempDir } from './helpers';

after(() => backend().dispose());

const TERMINAL_EVENTS = ['response.completed', 'response.incomplete', 'response.failed', 'response.cancelled'];

function assertGapFree(events: TaskEvent[], from = 0) {
  events.forEach((e, i) => assert.equal(e.seq, from + i, `event ${i} has seq ${e.seq}`));
}

test('a task runs queued → loading → running → succeeded with one gap-free event sequence', async () => {
  const rt = await openRuntime();
  const { task } = rt.createTask({ origin: 'lmsp', principal: 'p', input: prompt('hello', 12) });
  assert.equal(task.status, 'queued');
  assert.match(task.id, /^task_[0-9a-z]{26,}$/);
  assert.match(task.responseId, /^resp_[0-9a-z]{26,}$/);
  const seen: string[] = [];
  const sub = rt.onTaskChange((t) => t.id === task.id && seen.push(t.status));
  const done = await rt.waitForTerminal(task.id);
  sub.close();
  assert.equal(done.status, 'succeeded');
  assert.deepEqual([...new Set(seen)], ['loading', 'running', 'succeeded']);
  const events = rt.readEvents(task.id);
  assertGapFree(events);
  assert.equal(events[0].type, 'response.created');
  assert.equal(events[1].type, 'response.queued');
  assert.ok(events.some((e) => e.type === 'response.in_progress'));
  const terminal = events.filter((e) => TERMINAL_EVENTS.includes(e.type));
  assert.equal(terminal.length, 1);
  assert.equal(events[events.length - 1], terminal[0]);
  // max_output_tokens reached → response incomplete, task succeeded (LMSP ch.7).
  assert.equal(terminal[0].type, 'response.incomplete');
  const response = done.response as { status: string; output: Array<{ content: Array<{ text: string }> }>; usage: { output_tokens: number } };
  assert.equal(response.status, 'incomplete');
  assert.equal(response.usage.output_tokens, 12);
  const streamed = events
    .filter((e) => e.type === 'response.output_text.delta')
    .map((e) => e.data.delta)
    .join('');
  assert.equal(response.output[0].content[0].text, streamed);
  await rt.close();
});

test('cancel: queued → cancelled at once, running → cancelling → cancelled with the generation stopped', async () => {
  const rt = await openRuntime();
  const long = rt.createTask({ origin: 'lmsp', principal: 'p', input: longPrompt('long') }).task;
  await taskReaches(rt, long.id, (t) => t.status === 'running', 'first task running');
  const queued = rt.createTask({ origin: 'lmsp', principal: 'p', input: prompt('waits', 5) }).task;
  assert.equal(rt.queueInfo(queued.id)?.position, 1);
  const c1 = rt.cancelTask(queued.id);
  assert.equal(c1.status, 'cancelled');
  assert.equal(rt.cancelTask(queued.id).status, 'cancelled', 'cancel is idempotent');

  await taskReaches(rt, long.id, (t) => t.outputTokens > 20, 'tokens to flow');
  const c2 = rt.cancelTask(long.id, undefined, 'user asked');
  assert.equal(c2.status, 'cancelling');
  assert.equal(rt.cancelTask(long.id).status === 'cancelling' || rt.getTask(long.id)?.status === 'cancelled', true);
  const end = await rt.waitForTerminal(long.id);
  assert.equal(end.status, 'cancelled');
  const tokensAtEnd = end.outputTokens;
  const eventsAtEnd = end.nextSeq;
  // One run at a time: the next task starts only once the cancelled run has returned from the backend.
  const next = rt.createTask({ origin: 'lmsp', principal: 'p', input: prompt('after', 2) }).task;
  assert.equal((await rt.waitForTerminal(next.id)).status, 'succeeded');
  assert.equal(rt.getTask(long.id)?.outputTokens, tokensAtEnd, 'no tokens after cancelled');
  assert.equal(rt.getTask(long.id)?.nextSeq, eventsAtEnd, 'no events after cancelled');
  const events = rt.readEvents(long.id);
  assertGapFree(events);
  assert.equal(events[events.length - 1].type, 'response.cancelled');
  assert.ok(events.some((e) => e.type === 'task_runtime:task.status' && (e.data.task as { status: string }).status === 'cancelling'));
  // The partial text is kept in the cancelled response.
  const text = events
    .filter((e) => e.type === 'response.output_text.delta')
    .map((e) => e.data.delta)
    .join('');
  assert.equal((end.response as { output: Array<{ content: Array<{ text: string }> }> }).output[0].content[0].text, text);
  await rt.close();
});

test('cancel on a finished task is task_not_cancelable; unknown ids are task_not_found', async () => {
  const rt = await openRuntime();
  const { task } = rt.createTask({ origin: 'lmsp', principal: 'p', input: prompt('x', 3) });
  await rt.waitForTerminal(task.id);
  assert.throws(
    () => rt.cancelTask(task.id),
    (e) => isRuntimeError(e, 'task_not_cancelable'),
  );
  assert.throws(
    () => rt.cancelTask('task_nope'),
    (e) => isRuntimeError(e, 'task_not_found'),
  );
  assert.throws(
    () => rt.readEvents('task_nope'),
    (e) => isRuntimeError(e, 'task_not_found'),
  );
  await rt.close();
});

test('a cancel racing completion yields exactly one terminal outcome', async () => {
  const rt = await openRuntime();
  const outcomes = new Map<string, number>();
  for (let i = 0; i < 40; i++) {
    const { task } = rt.createTask({ origin: 'lmsp', principal: 'p', input: prompt(`race ${i}`, 3 + (i % 5)) });
    // Cancel at a different moment each time: before start, while loading/running, around completion.
    await sleep(i % 7);
    try {
      rt.cancelTask(task.id);
    } catch (e) {
      assert.ok(isRuntimeError(e, 'task_not_cancelable'));
    }
    const end = await rt.waitForTerminal(task.id);
    const events = rt.readEvents(task.id);
    assertGapFree(events);
    const terminal = events.filter((e) => TERMINAL_EVENTS.includes(e.type));
    assert.equal(terminal.length, 1, `one terminal event for ${task.id}`);
    const expected = end.status === 'cancelled' ? 'response.cancelled' : 'response.incomplete';
    assert.ok(terminal[0].type === expected || (end.status === 'succeeded' && terminal[0].type === 'response.completed'));
    outcomes.set(end.status, (outcomes.get(end.status) ?? 0) + 1);
  }
  assert.ok((outcomes.get('cancelled') ?? 0) > 0, 'some cancels won');
  await rt.close();
});

test('subscribe replays then goes live with no gap and no duplicate, from any point', async () => {
  const rt = await openRuntime();
  const { task } = rt.createTask({ origin: 'lmsp', principal: 'p', input: prompt('stream', 300) });
  const early = collect(rt, task.id);
  await waitFor(() => early.events.length > 8, 'some events');
  const mid = collect(rt, task.id, early.events[5].seq);
  await rt.waitForTerminal(task.id);
  const late = collect(rt, task.id, 3);
  const all = rt.readEvents(task.id);
  assertGapFree(all);
  assert.deepEqual(
    early.events.map((e) => e.seq),
    all.map((e) => e.seq),
  );
  assert.deepEqual(
    mid.events.map((e) => e.seq),
    all.slice(6).map((e) => e.seq),
  );
  assert.deepEqual(
    late.events.map((e) => e.seq),
    all.slice(4).map((e) => e.seq),
  );
  assert.throws(
    () => rt.subscribe(task.id, all.length, () => {}),
    (e) => isRuntimeError(e, 'invalid_last_event_id'),
  );
  assert.throws(
    () => rt.subscribe(task.id, -2, () => {}),
    (e) => isRuntimeError(e, 'invalid_last_event_id'),
  );
  // Many text deltas are batched: far fewer delta events than tokens.
  const deltas = all.filter((e) => e.type === 'response.output_text.delta').length;
  assert.ok(deltas < 300, `${deltas} delta events for 300 tokens`);
  for (const s of [early, mid, late]) s.close();
  await rt.close();
});

test('idempotency: same key and body → same task, other body → idempotency_key_reused, across a restart', async () => {
  const dir = tempDir();
  let rt = await openRuntime(dir);
  const idem = { scope: 'POST /tasks', key: 'k-1', fingerprint: 'fp-a' };
  const first = rt.createTask({ origin: 'lmsp', principal: 'p', input: prompt('a', 2), idempotency: idem });
  const again = rt.createTask({ origin: 'lmsp', principal: 'p', input: prompt('a', 2), idempotency: idem });
  assert.equal(again.task.id, first.task.id);
  assert.equal(again.replayed, true);
  assert.throws(
    () => rt.createTask({ origin: 'lmsp', principal: 'p', input: prompt('b', 2), idempotency: { ...idem, fingerprint: 'fp-b' } }),
    (e) => isRuntimeError(e, 'idempotency_key_reused'),
  );
  // Another principal's identical key is its own.
  const other = rt.createTask({ origin: 'lmsp', principal: 'q', input: prompt('a', 2), idempotency: idem });
  assert.notEqual(other.task.id, first.task.id);
  await rt.waitForTerminal(first.task.id);
  await rt.close();
  rt = await openRuntime(dir);
  assert.equal(rt.createTask({ origin: 'lmsp', principal: 'p', input: prompt('a', 2), idempotency: idem }).task.id, first.task.id);
  await rt.close();
});

test('principals see only their own tasks; lists page newest first with an opaque cursor', async () => {
  const rt = await openRuntime();
  const ids: string[] = [];
  for (let i = 0; i < 7; i++) ids.push(rt.createTask({ origin: 'mcp', principal: 'alice', input: prompt(`t${i}`, 1) }).task.id);
  const bobs = rt.createTask({ origin: 'lmsp', principal: 'bob', input: prompt('b', 1) }).task;
  assert.equal(rt.getTask(bobs.id, 'alice'), undefined);
  assert.equal(rt.getTask(bobs.id, 'bob')?.id, bobs.id);
  assert.throws(
    () => rt.cancelTask(bobs.id, 'alice'),
    (e) => isRuntimeError(e, 'task_not_found'),
  );
  const seen: string[] = [];
  let cursor: string | undefined;
  do {
    const page = rt.listTasks({ principal: 'alice', limit: 3, cursor });
    seen.push(...page.tasks.map((t) => t.id));
    cursor = page.nextCursor ?? undefined;
  } while (cursor);
  assert.deepEqual(new Set(seen), new Set(ids));
  assert.equal(seen.length, 7);
  assert.throws(
    () => rt.listTasks({ cursor: 'not a cursor!' }),
    (e) => isRuntimeError(e, 'invalid_request'),
  );
  assert.equal(rt.countTasks('alice').total, 7);
  await Promise.all(ids.map((id) => rt.waitForTerminal(id)));
  await rt.waitForTerminal(bobs.id);
  await rt.close();
});

test('ttl counts from creation on the runtime clock: an expired task is gone, whatever its status', async () => {
  const clock = new ManualClock();
  const rt = await openRuntime(tempDir(), { now: clock.now });
  const { task } = rt.createTask({ origin: 'mcp', principal: 'p', input: longPrompt('short-lived'), ttlMs: 1000 });
  assert.equal(task.createdAt, clock.now());
  assert.equal(task.expiresAt, task.createdAt + 1000);
  // However long the machine takes to start it, no ttl passes until the clock is moved.
  await taskReaches(rt, task.id, (t) => t.status === 'running', 'running');
  clock.advance(999);
  assert.equal(rt.getTask(task.id)?.status, 'running', 'not expired 1 ms before its ttl');
  assert.equal(rt.sweepNow().expired, 0);
  const deleted = taskDeleted(rt, task.id);
  clock.advance(1);
  assert.equal(rt.getTask(task.id), undefined, 'expired → not found');
  await deleted; // the read queued a sweep, which stops the run and deletes the task
  assert.equal(rt.countTasks().total, 0);
  await rt.close();
});

test('retention on the runtime clock purges old event history (→ event_history_expired) and then the task', async () => {
  const clock = new ManualClock();
  const rt = await openRuntime(tempDir(), { now: clock.now, limits: { eventHistorySeconds: 0.2, taskRetentionSeconds: 0.6 } });
  const { task } = rt.createTask({ origin: 'lmsp', principal: 'p', input: prompt('keep a while', 4) });
  const done = await rt.waitForTerminal(task.id);
  // Every stamp of this task is the clock's reading: it has not moved.
  assert.equal(done.updatedAt, task.createdAt);
  clock.advance(200);
  assert.deepEqual(rt.sweepNow(), { expired: 0, deleted: 0, historyPurged: 0 }, 'inside both windows');
  clock.advance(1);
  assert.equal(rt.sweepNow().historyPurged, 1);
  assert.throws(
    () => rt.readEvents(task.id),
    (e) => isRuntimeError(e, 'event_history_expired'),
  );
  assert.throws(
    () => rt.readEvents(task.id, 2),
    (e) => isRuntimeError(e, 'event_history_expired'),
  );
  assert.deepEqual(rt.readEvents(task.id, done.nextSeq - 1), [], 'nothing after the last id is fine');
  assert.equal(rt.getTask(task.id)?.status, 'succeeded');
  clock.advance(399);
  assert.equal(rt.sweepNow().deleted, 0, 'inside the task retention window');
  clock.advance(1);
  assert.equal(rt.sweepNow().deleted, 1);
  assert.equal(rt.getTask(task.id), undefined);
  await rt.close();
});

test('finished tasks are read from a cache of frozen records that history purges and deletes drop', async () => {
  const clock = new ManualClock();
  const rt = await openRuntime(tempDir(), { now: clock.now, limits: { eventHistorySeconds: 0.2, taskRetentionSeconds: 0.6 } });
  const { task } = rt.createTask({ origin: 'lmsp', principal: 'p', input: prompt('cache me', 4) });
  await rt.waitForTerminal(task.id);
  const first = rt.getTask(task.id)!;
  assert.equal(first.status, 'succeeded');
  assert.equal(rt.getTask(task.id), first, 'a second read is the same record, not another sql.js row');
  assert.ok(Object.isFrozen(first) && Object.isFrozen(first.response) && Object.isFrozen(first.meta), 'shared, so frozen');
  assert.throws(() => {
    (first as { status: string }).status = 'failed';
  }, TypeError);
  assert.equal(first.oldestSeq, 0);
  clock.advance(201);
  assert.equal(rt.sweepNow().historyPurged, 1);
  const purged = rt.getTask(task.id)!;
  assert.notEqual(purged, first, 'the purge dropped the cached record');
  assert.equal(purged.oldestSeq, purged.nextSeq, 'the purge is visible at once');
  assert.throws(
    () => rt.readEvents(task.id),
    (e) => isRuntimeError(e, 'event_history_expired'),
  );
  assert.equal(rt.getTask(task.id), purged);
  rt.deleteTask(task.id, 'p');
  assert.equal(rt.getTask(task.id), undefined, 'deleted → gone, not served from the cache');
  // Retention's delete drops it too.
  const { task: second } = rt.createTask({ origin: 'lmsp', principal: 'p', input: prompt('cache me too', 4) });
  await rt.waitForTerminal(second.id);
  assert.equal(rt.getTask(second.id)?.status, 'succeeded');
  clock.advance(601);
  assert.equal(rt.sweepNow().deleted, 1);
  assert.equal(rt.getTask(second.id), undefined);
  await rt.close();
});

test('a deadline fails a task that runs too long with deadline_exceeded', async () => {
  const rt = await openRuntime();
  const { task } = rt.createTask({ origin: 'lmsp', principal: 'p', input: longPrompt('slow'), deadlineMs: 300 });
  const end = await rt.waitForTerminal(task.id);
  assert.equal(end.status, 'failed');
  assert.equal(end.error?.code, 'deadline_exceeded');
  const events = rt.readEvents(task.id);
  assert.deepEqual(
    events.slice(-2).map((e) => e.type),
    ['error', 'response.failed'],
  );
  await rt.close();
});

test('unknown models and on_restart values the server cannot honour are refused before anything is stored', async () => {
  const rt = await openRuntime(tempDir(), { limits: { onRestart: ['fail', 'retry'] } });
  assert.throws(
    () => rt.createTask({ origin: 'lmsp', principal: 'p', input: { model: 'nope', input: 'x' } }),
    (e) => isRuntimeError(e, 'model_not_found'),
  );
  assert.equal(rt.countTasks().total, 0);
  await rt.close();
});

test('restart: fail → failed/server_restarted, retry → runs again with a fresh response.created, ids continue', async () => {
  const dir = tempDir();
  let rt = await openRuntime(dir);
  const failing = rt.createTask({ origin: 'lmsp', principal: 'p', input: longPrompt('f'), onRestart: 'fail' }).task;
  await taskReaches(rt, failing.id, (t) => t.outputTokens > 5, 'first task running');
  const retrying = rt.createTask({ origin: 'lmsp', principal: 'p', input: prompt('r', 6), onRestart: 'retry' }).task;
  // Stop the process's work without finishing it, as a restart does.
  await rt.close();
  rt = await openRuntime(dir);
  const f = rt.getTask(failing.id)!;
  assert.equal(f.status, 'failed');
  assert.equal(f.error?.code, 'server_restarted');
  const fEvents = rt.readEvents(failing.id);
  assertGapFree(fEvents);
  assert.equal(fEvents[fEvents.length - 1].type, 'response.failed');
  // The queued retry task never started: it just runs now.
  const r = await rt.waitForTerminal(retrying.id);
  assert.equal(r.status, 'succeeded');
  assert.equal(r.attempt, 1);
  await rt.close();

  // A retry task interrupted while running starts a new attempt.
  rt = await openRuntime(dir);
  const again = rt.createTask({ origin: 'lmsp', principal: 'p', input: { ...longPrompt('again'), max_output_tokens: 400 }, onRestart: 'retry' }).task;
  await taskReaches(rt, again.id, (t) => t.outputTokens > 3 && t.status === 'running', 'running');
  const seqBefore = rt.getTask(again.id)!.nextSeq;
  await rt.close();
  rt = await openRuntime(dir);
  const done = await rt.waitForTerminal(again.id);
  assert.equal(done.status, 'succeeded');
  assert.equal(done.attempt, 2);
  const events = rt.readEvents(again.id);
  assertGapFree(events);
  const created = events.filter((e) => e.type === 'response.created');
  assert.equal(created.length, 2);
  assert.ok(created[1].seq >= seqBefore, 'the new attempt continues the sequence');
  assert.equal(events[created[1].seq - 1].type, 'task_runtime:task.status');
  await rt.close();
});

test('loadModel resolves the model (undefined = the default), loads it with the caller’s signal and progress, and refuses unknown models', async () => {
  const loads: Array<{ id: string; signal?: AbortSignal }> = [];
  const models = new Map<string, ModelInfo>([['a', { id: 'a', source: 'a.gguf', state: 'unloaded', maxContextLength: null, demo: false }]]);
  const scripted: ModelBackend = {
    name: 'scripted',
    supportsResume: () => false,
    listModels: () => [...models.values()],
    resolveModel: (m) => (m === undefined ? 'a' : models.has(m) ? m : undefined),
    isLoaded: (id) => models.get(id)?.state === 'loaded',
    load: async (id, options) => {
      loads.push({ id, signal: options?.signal });
      options?.onProgress?.(0.5);
      models.set(id, { ...models.get(id)!, state: 'loaded', maxContextLength: 64 });
    },
    generate: () => Promise.reject(new Error('not used')),
    dispose: () => Promise.resolve(),
  };
  const rt = await openRuntime(tempDir(), { backend: scripted });
  await assert.rejects(rt.loadModel('nope'), (e) => isRuntimeError(e, 'model_not_found') && /"nope"/.test(e.message));
  assert.deepEqual(loads, [], 'nothing is loaded for an unknown model');
  const abort = new AbortController();
  const progress: number[] = [];
  const info = await rt.loadModel(undefined, { signal: abort.signal, onProgress: (p) => progress.push(p) });
  assert.deepEqual(info, { id: 'a', source: 'a.gguf', state: 'loaded', maxContextLength: 64, demo: false });
  assert.deepEqual(loads, [{ id: 'a', signal: abort.signal }]);
  assert.deepEqual(progress, [0.5]);
  await rt.close();
  await assert.rejects(rt.loadModel('a'), (e) => isRuntimeError(e, 'runtime_closed'));
});
