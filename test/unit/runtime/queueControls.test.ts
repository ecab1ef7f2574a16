// The queue's controls on a real runtime (real store, the tiny model): priority checked and stored, "run next"
// kept across a restart, cancel by filter in one batch per principal and model, queue depths for /metrics.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { isRuntimeError } from '../../../src/runtime/errors';
import { backend, longPrompt, openRuntime, prompt, tempDir } from './helpers';
import { taskReaches } from '../../support/wait';

after(() => backend().dispose());

test('priority: checked at create (integer -10..10, from the create or the request vendor member) and stored', async () => {
  const rt = await openRuntime();
  const blocker = rt.createTask({ origin: 'lmsp', principal: 'p', input: longPrompt('hold') }).task;
  await taskReaches(rt, blocker.id, (t) => t.status === 'running', 'blocker running');
  for (const bad of [11, -11, 1.5, '3']) {
    assert.throws(
      () => rt.createTask({ origin: 'lmsp', principal: 'p', input: prompt('x'), priority: bad as number }),
      (e: unknown) => isRuntimeError(e, 'invalid_request') && e.param === 'priority' && /-10 to 10/.test(e.message),
      `priority ${String(bad)}`,
    );
  }
  assert.throws(
    () => rt.createTask({ origin: 'lmsp', principal: 'p', input: { ...prompt('x'), task_runtime: { priority: 99 } } }),
    (e: unknown) => isRuntimeError(e, 'invalid_request') && e.param === 'task_runtime.priority',
  );
  const viaRequest = rt.createTask({ origin: 'lmsp', principal: 'p', input: { ...prompt('x'), task_runtime: { priority: 4 } } }).task;
  const explicit = rt.createTask({ origin: 'lmsp', principal: 'p', input: { ...prompt('x'), task_runtime: { priority: 4 } }, priority: -2 }).task;
  const plain = rt.createTask({ origin: 'lmsp', principal: 'p', input: prompt('x') }).task;
  assert.deepEqual(
    [viaRequest, explicit, plain].map((t) => rt.getTask(t.id)?.priority),
    [4, -2, 0],
  );
  assert.deepEqual(
    [viaRequest, plain, explicit].map((t) => rt.queueInfo(t.id)?.position),
    [1, 2, 3],
  );
  rt.cancelTasks({ principal: 'p', statuses: ['queued', 'running'] });
  await rt.close();
});

test('run next survives a restart: the task is first of its line, its priority the top', async () => {
  const dir = tempDir();
  let rt = await openRuntime(dir);
  const blocker = rt.createTask({ origin: 'lmsp', principal: 'p', input: longPrompt('hold'), onRestart: 'fail' }).task;
  await taskReaches(rt, blocker.id, (t) => t.status === 'running', 'blocker running');
  const tasks = ['a', 'b', 'c'].map((x) => rt.createTask({ origin: 'lmsp', principal: 'p', input: prompt(x), onRestart: 'retry' }).task);
  const moved = rt.runNext(tasks[2].id, 'p');
  assert.equal(moved.priority, 10);
  assert.equal(moved.statusMessage, 'queued: runs next');
  assert.throws(
    () => rt.runNext(tasks[0].id, 'someone else'),
    (e: unknown) => isRuntimeError(e, 'task_not_found'),
  );
  assert.equal(rt.runNext(blocker.id).status, 'running', 'a running task is returned unchanged');
  assert.deepEqual(
    tasks.map((t) => rt.queueInfo(t.id)?.position),
    [2, 3, 1],
  );
  await rt.close();
  // One slot after the restart: the moved task is the one that starts, the others wait in their order.
  rt = await openRuntime(dir, { limits: { maxConcurrentTasks: 1 } });
  assert.deepEqual(
    tasks.map((t) => rt.getTask(t.id)?.priority),
    [0, 0, 10],
  );
  assert.deepEqual(
    tasks.map((t) => rt.queueInfo(t.id)?.position ?? null),
    [1, 2, null],
  );
  for (const t of tasks) await rt.waitForTerminal(t.id);
  await rt.close();
});

test('cancel by filter: one principal’s queued (and running) tasks, optionally one model, in one batch; repeats change nothing', async () => {
  const rt = await openRuntime();
  const running = rt.createTask({ origin: 'lmsp', principal: 'p', input: longPrompt('hold') }).task;
  await taskReaches(rt, running.id, (t) => t.status === 'running', 'running');
  const mine = [1, 2, 3].map((n) => rt.createTask({ origin: 'lmsp', principal: 'p', input: prompt(`mine ${n}`) }).task);
  const theirs = rt.createTask({ origin: 'lmsp', principal: 'q', input: prompt('theirs') }).task;
  const depth = rt.metrics().queue;
  assert.deepEqual(
    [depth.byModel, depth.byPrincipal.sort((x, y) => (x.principal < y.principal ? -1 : 1))],
    [
      [{ model: 'tiny', n: 4 }],
      [
        { principal: 'p', n: 3 },
        { principal: 'q', n: 1 },
      ],
    ],
  );
  assert.deepEqual(rt.cancelTasks({ principal: 'p', statuses: ['queued'], model: 'another-model' }), [], 'no task of that model');
  const before = rt.storeStats.batches;
  const cancelled = rt.cancelTasks({ principal: 'p', statuses: ['queued'], reason: 'clearing the queue' });
  assert.equal(rt.storeStats.batches - before, 1, 'one durable batch');
  assert.deepEqual(cancelled.map((t) => t.id).sort(), mine.map((t) => t.id).sort());
  assert.ok(cancelled.every((t) => t.status === 'cancelled'));
  assert.equal(rt.getTask(running.id)?.status, 'running', 'queued only: the running task goes on');
  assert.equal(rt.getTask(theirs.id)?.status, 'queued', 'another principal’s task is untouched');
  assert.equal(rt.queueInfo(theirs.id)?.position, 1);
  assert.deepEqual(rt.cancelTasks({ principal: 'p', statuses: ['queued'] }), [], 'idempotent');
  const stopping = rt.cancelTasks({ principal: 'p', statuses: ['running'], model: 'tiny' });
  assert.deepEqual(
    stopping.map((t) => t.id),
    [running.id],
  );
  assert.equal((await rt.waitForTerminal(running.id)).status, 'cancelled');
  await rt.waitForTerminal(theirs.id);
  const m = rt.metrics().queue;
  assert.deepEqual([m.byModel, m.byPrincipal, m.oldestWaitSeconds], [[], [], 0]);
  await rt.close();
});
