// The Scheduler directly, over a real store and transitions, with a scripted backend: queue order, concurrency per
// model and per capacity group, retries of an unavailable backend, a backend cut off mid-output per on_restart,
// deadlines, stops and close; fair shares between principals (round robin per capacity group, FIFO within each).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BackendError } from '../../../src/runtime/backend';
import { EVENT } from '../../../src/runtime/responseEvents';
import { Scheduler, type SchedulerOptions } from '../../../src/runtime/scheduler';
import { isTerminal, type TaskRecord } from '../../../src/runtime/task';
import { Gate, ScriptedBackend, says, type Script, type ScriptedBackendOptions } from '../../fixtures/scriptedBackend';
import { openParts, types, type Parts } from '../../fixtures/runtimeParts';
import { taskReaches, waitFor } from '../../support/wait';

async function setup(script: Script, o: ScriptedBackendOptions = {}, extra: Partial<SchedulerOptions> = {}) {
  const parts = await openParts();
  const backend = new ScriptedBackend(script, o);
  const scheduler = new Scheduler({
    store: parts.store,
    transitions: parts.transitions,
    backend,
    dataDir: parts.dir,
    maxConcurrentPerModel: 1,
    deltaFlushMs: 0,
    now: parts.clock.now,
    ...extra,
  });
  const add = (fields: Parameters<Parts['add']>[0] = {}) => {
    const t = parts.add(fields);
    scheduler.enqueue(t);
    return t;
  };
  const done = (t: TaskRecord) => taskReaches(parts.source, t.id, (x) => isTerminal(x.status), `${t.id} to finish`);
  const close = async () => {
    await scheduler.close();
    await parts.close();
  };
  return { parts, backend, scheduler, add, done, close };
}

const status = (parts: Parts, t: TaskRecord) => parts.store.getTask(t.id)?.status;
const pos = (s: { scheduler: Scheduler }, id: string) => s.scheduler.queueInfo(id)?.position ?? null;

test('tasks of one model run one at a time in the order they were queued; positions count from 1', async () => {
  const gate = new Gate();
  const s = await setup(gate.script);
  const [a, b, c] = [
    s.add({ title: 'a', input: { model: 'm', input: 'a' } }),
    s.add({ input: { model: 'm', input: 'b' } }),
    s.add({ input: { model: 'm', input: 'c' } }),
  ];
  await gate.started(1);
  assert.deepEqual([status(s.parts, a), status(s.parts, b), status(s.parts, c)], ['running', 'queued', 'queued']);
  assert.deepEqual([pos(s, a.id), pos(s, b.id), pos(s, c.id)], [null, 1, 2]);
  assert.equal(s.scheduler.queueLength, 2);
  for (let n = 2; n <= 3; n++) {
    gate.release();
    await gate.started(n);
  }
  gate.release();
  for (const t of [a, b, c]) assert.equal((await s.done(t)).status, 'succeeded');
  assert.deepEqual(
    s.backend.requests.map((r) => r.messages.at(-1)?.content),
    ['a', 'b', 'c'],
  );
  assert.equal(s.backend.maxActive, 1);
  await s.close();
});

test('a busy model does not hold up another; a shared capacity group counts both', async () => {
  const gate = new Gate();
  const s = await setup(gate.script, { models: ['a', 'b'] });
  const a1 = s.add({ input: { model: 'a', input: '1' } });
  const a2 = s.add({ input: { model: 'a', input: '2' } });
  const b1 = s.add({ input: { model: 'b', input: '3' } });
  await gate.started(2);
  assert.deepEqual([status(s.parts, a1), status(s.parts, a2), status(s.parts, b1)], ['running', 'queued', 'running']);
  gate.release();
  await gate.started(3);
  gate.release();
  await Promise.all([a1, a2, b1].map(s.done));
  await s.close();

  const shared = new Gate();
  const g = await setup(shared.script, { models: ['a', 'b'], concurrency: () => ({ group: 'engine', limit: 2 }) });
  const tasks = [
    g.add({ input: { model: 'a', input: '1' } }),
    g.add({ input: { model: 'b', input: '2' } }),
    g.add({ input: { model: 'a', input: '3' } }),
  ];
  await shared.started(2);
  assert.deepEqual(
    tasks.map((t) => status(g.parts, t)),
    ['running', 'running', 'queued'],
  );
  shared.release();
  await shared.started(3);
  shared.release();
  await Promise.all(tasks.map(g.done));
  assert.equal(g.backend.maxActive, 2);
  await g.close();
});

test('an unavailable backend: the task waits queued with a status message, is retried, then fails backend_unavailable', async () => {
  const s = await setup(
    async () => {
      throw new BackendError('unavailable', 'backend_unavailable', 'The engine did not answer.');
    },
    {},
    { backendRetry: { attempts: 2, baseMs: 1, maxMs: 1 } },
  );
  const t = s.add();
  const failed = await s.done(t);
  assert.equal(failed.status, 'failed');
  assert.equal(failed.error?.code, 'backend_unavailable');
  assert.match(failed.error?.detail ?? '', /The engine did not answer\. Gave up after 2 retries\./);
  assert.equal(s.backend.runs, 3, 'the first run and two retries');
  const messages = s.parts
    .events(t.id)
    .filter((e) => e.type === EVENT.taskStatus)
    .map((e) => (e.data.task as { status_message: string }).status_message);
  assert.ok(messages.includes('waiting for the backend: The engine did not answer. (retry 1 of 2 in 1 ms)'), messages.join('\n'));
  // Each run had opened its output item (the model was loaded): each retry is a new attempt, with a new response.
  assert.equal(failed.attempt, 3);
  assert.equal(types(s.parts.events(t.id)).filter((x) => x === EVENT.created).length, 3);
  await s.close();
});

test('a backend cut off mid-output: on_restart "retry" runs a new attempt, "fail" fails with backend_interrupted and the text', async () => {
  const cutOff: Script = async (_r, o, call) => {
    if (call > 1) return says('whole answer')(_r, o, call);
    o.onText('half', 1);
    throw new BackendError('interrupted', 'backend_interrupted', 'The engine went away.');
  };
  const s = await setup(cutOff, {}, { backendRetry: { attempts: 2, baseMs: 1, maxMs: 1 } });
  const retried = await s.done(s.add({ onRestart: 'retry' }));
  assert.equal(retried.status, 'succeeded');
  assert.equal(retried.attempt, 2);
  assert.equal(retried.response?.['output_text'], 'whole answer');
  assert.equal(types(s.parts.events(retried.id)).filter((t) => t === EVENT.created).length, 2);
  await s.close();

  const f = await setup(cutOff);
  const failed = await f.done(f.add({ onRestart: 'fail' }));
  assert.equal(failed.status, 'failed');
  assert.equal(failed.error?.code, 'backend_interrupted');
  assert.equal(failed.response?.['output_text'], 'half');
  assert.equal(f.backend.runs, 1);
  await f.close();
});

test('a deadline fails a task that never started; stop cancels a running one with its text', async () => {
  const gate = new Gate(['partial ']);
  const s = await setup(gate.script);
  const running = s.add();
  await gate.started(1);
  const late = s.parts.add({ deadlineAt: s.parts.clock.now() + 5 });
  s.parts.clock.advance(10);
  s.scheduler.enqueue(late);
  const expired = await s.done(late);
  assert.equal(expired.error?.code, 'deadline_exceeded');
  assert.equal(expired.error?.detail, 'The task did not start before its deadline.');
  assert.equal(pos(s, late.id), null);

  s.parts.transitions.requestCancel(running.id);
  assert.equal(s.scheduler.stop(running.id, 'cancel'), true);
  const cancelled = await s.done(running);
  assert.equal(cancelled.status, 'cancelled');
  assert.equal(cancelled.response?.['output_text'], 'partial ');
  await s.close();
});

test('close stops every run and leaves its task unfinished, for restart recovery', async () => {
  const gate = new Gate(['some ']);
  const s = await setup(gate.script, {}, { maxConcurrentPerModel: 2 });
  const a = s.add();
  const b = s.add();
  await gate.started(2);
  await s.scheduler.close();
  assert.deepEqual([status(s.parts, a), status(s.parts, b)], ['running', 'running']);
  await s.parts.close();
});

test('a queued task’s position is its place in the fair order: principals take turns, the least recently served first', async () => {
  const gate = new Gate();
  const s = await setup(gate.script);
  const running = s.add({ principal: 'alice' });
  await gate.started(1);
  const a1 = s.add({ principal: 'alice' });
  const b1 = s.add({ principal: 'bob' });
  const b2 = s.add({ principal: 'bob' });
  const a2 = s.add({ principal: 'alice' });
  assert.deepEqual(
    [a1, b1, b2, a2].map((t) => pos(s, t.id)),
    [2, 1, 3, 4],
    'bob (never served) first, then alice (running now), in turns',
  );
  assert.equal(pos(s, running.id), null);
  s.scheduler.remove(a1.id);
  assert.equal(pos(s, a2.id), 2);
  await s.close();
});

test('fair shares: B’s first task starts after the one task that holds the slot while A has 200 queued; FIFO within A', async () => {
  const gate = new Gate();
  const s = await setup(gate.script);
  const text = (n: number) => s.backend.requests[n - 1].messages.at(-1)?.content;
  const a = Array.from({ length: 201 }, (_, i) => s.add({ principal: 'A', input: { model: 'm', input: `a${i}` } }));
  await gate.started(1);
  assert.equal(s.scheduler.unfinishedOf('A'), 201, 'one running, 200 queued');
  const b = s.add({ principal: 'B', input: { model: 'm', input: 'b0' } });
  const b1 = s.add({ principal: 'B', input: { model: 'm', input: 'b1' } });
  assert.equal(pos(s, b.id), 1, 'first in its own line');
  assert.equal(s.scheduler.unfinishedOf('B'), 2);
  // The slot frees once: the next run is B's, not A's second task.
  gate.release(1);
  await gate.started(2);
  assert.equal(text(2), 'b0');
  assert.equal(status(s.parts, b), 'running');
  // Then the two lines take turns, each in its own order.
  gate.release(1);
  await gate.started(3);
  assert.equal(text(3), 'a1');
  gate.release(1);
  await gate.started(4);
  assert.equal(text(4), 'b1');
  gate.release(1);
  await gate.started(5);
  assert.equal(text(5), 'a2');
  // Cleanup: forget what is left and let the running one end.
  for (const t of a.slice(3)) s.scheduler.remove(t.id);
  gate.release();
  await s.done(b1);
  await s.close();
});

test('fair shares: three principals are served in turn; a principal whose tasks drained starts afresh', async () => {
  const gate = new Gate();
  const s = await setup(gate.script);
  const text = (n: number) => s.backend.requests[n - 1].messages.at(-1)?.content;
  const add = (principal: string, input: string) => s.add({ principal, input: { model: 'm', input } });
  add('A', 'a1');
  await gate.started(1);
  for (const [p, i] of [
    ['A', 'a2'],
    ['A', 'a3'],
    ['B', 'b1'],
    ['B', 'b2'],
    ['C', 'c1'],
  ])
    add(p, i);
  const order = ['a1'];
  for (let n = 2; n <= 6; n++) {
    gate.release(1);
    await gate.started(n);
    order.push(String(text(n)));
  }
  assert.deepEqual(order, ['a1', 'b1', 'c1', 'a2', 'b2', 'a3']);
  gate.release();
  await waitIdle(s);
  // Nothing held: every principal's turn is forgotten, so the next tasks run in plain queue order again.
  const last = [add('C', 'c2'), add('A', 'a4')];
  await gate.started(7);
  assert.equal(text(7), 'c2');
  gate.release();
  await gate.started(8);
  assert.equal(text(8), 'a4');
  gate.release();
  await Promise.all(last.map(s.done));
  await s.close();
});

test('fair shares: turns are kept per capacity group; a busy group does not hold up the same principal’s other model', async () => {
  const gate = new Gate();
  const s = await setup(gate.script, { models: ['x', 'y'] });
  const text = (n: number) => s.backend.requests[n - 1].messages.at(-1)?.content;
  const add = (principal: string, model: string, input: string) => s.add({ principal, input: { model, input } });
  add('A', 'x', 'ax1');
  add('A', 'x', 'ax2');
  add('A', 'y', 'ay1');
  await gate.started(2);
  assert.deepEqual([text(1), text(2)], ['ax1', 'ay1'], 'A’s y task starts beside its running x task');
  const bx = add('B', 'x', 'bx1');
  gate.release(1); // ax1 ends: x goes to B, who has not been served on x
  await gate.started(3);
  assert.equal(text(3), 'bx1');
  gate.release();
  await s.done(bx);
  await gate.started(4); // ax2, A's last
  assert.equal(text(4), 'ax2');
  gate.release();
  await waitIdle(s);
  await s.close();
});

async function waitIdle(s: Awaited<ReturnType<typeof setup>>): Promise<void> {
  await waitFor(() => s.backend.active === 0 && s.scheduler.queueLength === 0, 'every run to end');
}

test('priority: within one principal higher runs first, ties in queue order; another principal still gets its turn', async () => {
  const gate = new Gate();
  const s = await setup(gate.script);
  const text = (n: number) => s.backend.requests[n - 1].messages.at(-1)?.content;
  const add = (principal: string, input: string, priority?: number) => s.add({ principal, input: { model: 'm', input }, priority });
  add('A', 'a-running');
  await gate.started(1);
  add('A', 'a-low', -5);
  add('A', 'a-normal');
  add('A', 'a-high', 7);
  add('A', 'a-high-2', 7);
  add('B', 'b-low', -10);
  const order = ['b-low', 'a-high', 'a-high-2', 'a-normal', 'a-low'];
  assert.deepEqual(
    [...s.parts.store.activeTasks()].filter((t) => t.status === 'queued').map((t) => [t.request.input, pos(s, t.id)]),
    [
      ['a-low', 5],
      ['a-normal', 4],
      ['a-high', 2],
      ['a-high-2', 3],
      ['b-low', 1],
    ],
    'positions are the order below',
  );
  for (let n = 2; n <= 6; n++) {
    gate.release(1);
    await gate.started(n);
    assert.equal(text(n), order[n - 2], `start ${n}`);
  }
  gate.release();
  await s.close();
});

test('aging: a waiting task rises one level per priorityAgingMs, so newer higher-priority tasks stop overtaking it', async () => {
  const gate = new Gate();
  const s = await setup(gate.script, {}, { priorityAgingMs: 1000 });
  const text = (n: number) => s.backend.requests[n - 1].messages.at(-1)?.content;
  const add = (input: string, priority?: number) => s.add({ principal: 'A', input: { model: 'm', input }, priority });
  add('running');
  await gate.started(1);
  const low = add('low', -2);
  add('normal-1');
  assert.equal(pos(s, low.id), 2, 'a normal task overtakes it at first');
  gate.release(1);
  await gate.started(2);
  assert.equal(text(2), 'normal-1');
  // Two levels of waiting: -2 + 2 = 0, and it is older than any new normal task.
  s.parts.clock.advance(2000);
  add('normal-2');
  add('high', 1);
  assert.equal(pos(s, low.id), 2, 'only the higher priority goes first now');
  gate.release(1);
  await gate.started(3);
  assert.equal(text(3), 'high');
  gate.release(1);
  await gate.started(4);
  assert.equal(text(4), 'low');
  gate.release();
  await s.close();
});

test('expected start: unknown until a run of the model was timed, then from the typical run and the slots', async () => {
  const gate = new Gate();
  const s = await setup(gate.script, {}, { maxConcurrentPerModel: 2 });
  const clock = s.parts.clock;
  const first = s.add();
  await gate.started(1);
  clock.advance(4000);
  gate.release(1);
  await s.done(first); // one 4 s run of the model timed
  const [r1, r2] = [s.add(), s.add()];
  await gate.started(3);
  const [q1, q2, q3] = [s.add(), s.add(), s.add()];
  clock.advance(1000);
  const info = (t: TaskRecord) => s.scheduler.queueInfo(t.id);
  // Two slots, both running for 1 s of a typical 4 s: free at +3 s, +3 s; then q3 after q1's 4 s.
  assert.deepEqual(
    [q1, q2, q3].map((t) => [info(t)?.position, info(t)?.expectedWaitMs]),
    [
      [1, 3000],
      [2, 3000],
      [3, 7000],
    ],
  );
  assert.equal(info(q1)?.expectedStartAt, clock.now() + 3000);
  assert.equal(info(r1), null, 'a running task has no queue place');
  for (const t of [q1, q2, q3]) s.scheduler.remove(t.id);
  gate.release();
  await Promise.all([s.done(r1), s.done(r2)]);
  await s.close();
});

test('run next: a queued task goes to the front of its own line with the top priority', async () => {
  const gate = new Gate();
  const s = await setup(gate.script);
  const text = (n: number) => s.backend.requests[n - 1].messages.at(-1)?.content;
  const add = (input: string, priority?: number) => s.add({ principal: 'A', input: { model: 'm', input }, priority });
  add('running');
  await gate.started(1);
  add('high', 10);
  const last = add('last', -3);
  assert.equal(pos(s, last.id), 2);
  assert.equal(s.scheduler.runNext(last.id), true);
  assert.deepEqual(s.scheduler.queueInfo(last.id), { position: 1, priority: 10, expectedStartAt: null, expectedWaitMs: null });
  assert.equal(s.scheduler.runNext('task_unknown'), false);
  gate.release(1);
  await gate.started(2);
  assert.equal(text(2), 'last');
  gate.release();
  await s.close();
});

test('queued tasks hear of their moving place on their stream (task_runtime:task.queue), not more than every few seconds', async () => {
  const gate = new Gate();
  const s = await setup(gate.script);
  s.add();
  await gate.started(1);
  const [a, b] = [s.add(), s.add()];
  const queueEvents = (t: TaskRecord) => s.parts.events(t.id).filter((e) => e.type === EVENT.taskQueue);
  await waitFor(() => queueEvents(b).length === 1, 'b told its place');
  assert.deepEqual(queueEvents(b)[0].data, { position: 2, priority: 0, expected_start_at: null, expected_start_at_ms: null });
  assert.equal(queueEvents(a)[0]?.data.position, 1);
  // The runtime clock has not moved: b's place changes but the next notice waits its turn (5 s per task).
  s.scheduler.remove(a.id);
  s.parts.clock.advance(6000);
  await waitFor(() => queueEvents(b).length === 2, 'b told it moved up');
  assert.equal(queueEvents(b)[1].data.position, 1);
  s.scheduler.remove(b.id);
  gate.release();
  await s.close();
});
