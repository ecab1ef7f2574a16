// TaskTransitions directly, over a real store: each lifecycle operation's status change, patch and events, what it
// refuses, and that listeners hear only of durable batches, in order.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { problem } from '../../../src/runtime/problems';
import { EVENT, TERMINAL_EVENT_TYPES } from '../../../src/runtime/responseEvents';
import type { TaskEvent, TaskRecord } from '../../../src/runtime/task';
import { openParts, types } from '../../fixtures/runtimeParts';

const OPENED = [EVENT.taskStatus, EVENT.inProgress, EVENT.outputItemAdded, EVENT.contentPartAdded];

function listen(parts: Awaited<ReturnType<typeof openParts>>, id: string) {
  const heard: TaskEvent[] = [];
  const changes: TaskRecord[] = [];
  parts.bus.listen(id, (e) => heard.push(e));
  parts.bus.onTaskChange((t) => changes.push(t));
  return { heard, changes };
}

test('one run: create → loading → running → progress → succeeded, one gap-free sequence, every event told once', async () => {
  const parts = await openParts();
  const { transitions } = parts;
  const task = parts.add();
  const { heard, changes } = listen(parts, task.id);
  assert.deepEqual(types(parts.events(task.id)), [EVENT.created, EVENT.queued]);

  assert.equal(transitions.startLoading(task.id)?.status, 'loading');
  transitions.loadProgress(task.id, 'm', 0.5);
  assert.equal(parts.store.getTask(task.id)?.statusMessage, 'loading model 50%');
  const running = transitions.startRunning(task.id, { messageId: 'msg_1' });
  assert.equal(running?.status, 'running');
  assert.equal(running?.statusMessage, 'generating');
  transitions.progress(task.id, { messageId: 'msg_1', tokens: 2, output: [{ kind: 'text', delta: 'Hel' }] });
  transitions.progress(task.id, { messageId: 'msg_1', tokens: 3, output: [{ kind: 'text', delta: 'lo' }] });
  assert.equal(parts.store.getTask(task.id)?.statusMessage, 'generating: 3 tokens');
  assert.deepEqual(transitions.delivered(parts.store.getTask(task.id)!), { text: 'Hello', messageId: 'msg_1' });

  const done = transitions.succeed(
    task.id,
    { finishReason: 'stop', inputTokens: 4, outputTokens: 3 },
    { text: 'Hello', messageId: 'msg_1', tokens: 3 },
  );
  assert.equal(done?.status, 'succeeded');
  assert.equal(done?.statusMessage, 'completed: 3 tokens');
  assert.deepEqual(done?.usage, { input_tokens: 4, output_tokens: 3, total_tokens: 7 });
  assert.equal(done?.response?.['output_text'], 'Hello');
  assert.equal(done?.response?.['status'], 'completed');

  const stored = parts.events(task.id);
  assert.deepEqual(
    stored.map((e) => e.seq),
    stored.map((_, i) => i),
  );
  assert.deepEqual(types(stored), [
    EVENT.created,
    EVENT.queued,
    EVENT.taskStatus,
    EVENT.modelLoading,
    ...OPENED.slice(1),
    EVENT.outputTextDelta,
    EVENT.outputTextDelta,
    EVENT.outputTextDone,
    EVENT.contentPartDone,
    EVENT.outputItemDone,
    EVENT.completed,
  ]);
  assert.equal(stored.filter((e) => TERMINAL_EVENT_TYPES.has(e.type)).length, 1);
  // Listeners heard every event after the create, in order, and a change per operation.
  assert.deepEqual(
    heard.map((e) => e.seq),
    stored.slice(2).map((e) => e.seq),
  );
  assert.deepEqual(
    changes.map((t) => t.status),
    ['loading', 'loading', 'running', 'running', 'running', 'succeeded'],
  );
  await parts.close();
});

test('a loaded model: startRunning from queued writes loading and running in one batch', async () => {
  const parts = await openParts();
  const task = parts.add();
  const before = parts.db.stats.batches;
  const running = parts.transitions.startRunning(task.id, { messageId: 'msg_1', fromQueued: true });
  assert.equal(running?.status, 'running');
  assert.equal(parts.db.stats.batches, before + 1);
  assert.deepEqual(types(parts.events(task.id)).slice(2), OPENED);
  await parts.close();
});

test('operations the table or `from` does not allow write nothing and return undefined', async () => {
  const parts = await openParts();
  const { transitions } = parts;
  const task = parts.add();
  const result = { finishReason: 'stop' as const, inputTokens: 1, outputTokens: 1 };
  assert.equal(transitions.startRunning(task.id, { messageId: 'msg_1' }), undefined, 'running needs loading first');
  assert.equal(transitions.succeed(task.id, result, { text: '', messageId: 'msg_1' }), undefined, 'queued cannot succeed');
  assert.equal(transitions.inputReceived(task.id, []), undefined);
  assert.equal(transitions.startLoading('task_nope'), undefined);
  assert.equal(parts.store.getTask(task.id)?.nextSeq, 2);
  assert.equal(transitions.fail(task.id, problem('model_error', 'boom'))?.status, 'failed');
  // Terminal: nothing moves it, progress is ignored, and it cannot go back to the queue.
  assert.equal(transitions.cancelled(task.id), undefined);
  assert.equal(transitions.progress(task.id, { messageId: 'msg_1', tokens: 5, output: [{ kind: 'text', delta: 'late' }] }), undefined);
  assert.throws(() => transitions.newAttempt(parts.store.getTask(task.id)!, () => 'again'), /terminal tasks are final/);
  assert.throws(() => transitions.requeue(parts.store.getTask(task.id)!, 'again'), /terminal tasks are final/);
  assert.deepEqual(types(parts.events(task.id)), [EVENT.created, EVENT.queued, EVENT.error, EVENT.failed]);
  await parts.close();
});

test('fail and cancel keep what the attempt delivered in the partial response', async () => {
  const parts = await openParts();
  const { transitions } = parts;
  const a = parts.add();
  transitions.startRunning(a.id, { messageId: 'msg_a', fromQueued: true });
  transitions.progress(a.id, { messageId: 'msg_a', tokens: 1, output: [{ kind: 'text', delta: 'part' }] });
  const failed = transitions.fail(a.id, problem('model_error', 'it broke'), { text: 'part', messageId: 'msg_a', tokens: 1 });
  assert.equal(failed?.error?.code, 'model_error');
  assert.equal(failed?.statusMessage, 'failed: it broke');
  assert.equal(failed?.response?.['output_text'], 'part');
  assert.deepEqual(parts.events(a.id).at(-2)?.data, { code: 'model_error', message: 'it broke', param: null });

  const b = parts.add();
  transitions.startRunning(b.id, { messageId: 'msg_b', fromQueued: true });
  transitions.progress(b.id, { messageId: 'msg_b', tokens: 2, output: [{ kind: 'text', delta: 'half' }] });
  assert.equal(transitions.requestCancel(b.id, 'x'.repeat(300))?.statusMessage, `cancelling: ${'x'.repeat(200)}`);
  const cancelled = transitions.cancelled(b.id, transitions.delivered(parts.store.getTask(b.id)!));
  assert.equal(cancelled?.status, 'cancelled');
  assert.equal(cancelled?.outputTokens, 2, 'no tokens given: the stored count stays');
  assert.equal(cancelled?.response?.['output_text'], 'half');
  assert.equal(parts.events(b.id).at(-1)?.type, EVENT.cancelled);
  await parts.close();
});

test('newAttempt clears the attempt and opens a new response; requeue keeps the attempt and its text', async () => {
  const parts = await openParts();
  const { transitions } = parts;
  const task = parts.add();
  transitions.startRunning(task.id, { messageId: 'msg_1', fromQueued: true });
  transitions.progress(task.id, { messageId: 'msg_1', tokens: 4, output: [{ kind: 'text', delta: 'first' }] });

  const kept = transitions.requeue(parts.store.getTask(task.id)!, 'waiting for the backend');
  assert.equal(kept.status, 'queued');
  assert.equal(kept.attempt, 1);
  assert.equal(kept.outputTokens, 4);
  assert.deepEqual(transitions.delivered(kept), { text: 'first', messageId: 'msg_1' });

  const again = transitions.newAttempt(kept, (n) => `restarted: attempt ${n}`);
  assert.equal(again.attempt, 2);
  assert.equal(again.statusMessage, 'restarted: attempt 2');
  assert.equal(again.outputTokens, 0);
  assert.equal(again.response, null);
  assert.deepEqual(types(parts.events(task.id)).slice(-3), [EVENT.taskStatus, EVENT.created, EVENT.queued]);
  // What clients got from attempt 1 no longer counts.
  assert.deepEqual(transitions.delivered(again), { text: '', messageId: undefined });
  // The new attempt runs like the first.
  assert.equal(transitions.startRunning(task.id, { messageId: 'msg_2', fromQueued: true })?.attempt, 2);
  await parts.close();
});

test('a resumed run continues its output item: no new item is opened', async () => {
  const parts = await openParts();
  const { transitions } = parts;
  const task = parts.add();
  transitions.startRunning(task.id, { messageId: 'msg_1', fromQueued: true });
  transitions.progress(task.id, { messageId: 'msg_1', tokens: 3, output: [{ kind: 'text', delta: 'abc' }] });
  transitions.requeue(parts.store.getTask(task.id)!, 'resuming after restart');
  const before = parts.events(task.id).length;
  const resumed = transitions.startRunning(task.id, { messageId: 'msg_1', resumedTokens: 3, fromQueued: true });
  assert.equal(resumed?.statusMessage, 'resuming after 3 tokens');
  assert.deepEqual(types(parts.events(task.id).slice(before)), [EVENT.taskStatus, EVENT.taskStatus]);
  await parts.close();
});

test('input: awaitInput parks with the round, recordAnswers keeps waiting, inputReceived runs again', async () => {
  const parts = await openParts();
  const { transitions } = parts;
  const task = parts.add();
  transitions.startRunning(task.id, { messageId: 'msg_1', fromQueued: true });
  transitions.progress(task.id, { messageId: 'msg_1', tokens: 2, output: [{ kind: 'text', delta: 'so far' }] });
  const request = { method: 'elicitation/create', params: { message: 'Name?' } };
  const round = { round: 1, requests: { 'a.1': request, 'b.1': request }, responses: {}, message: 'two names' };
  const parked = transitions.awaitInput(task.id, [], round);
  assert.equal(parked?.status, 'input_required');
  assert.deepEqual(Object.keys(parked?.inputRequests ?? {}), ['a.1', 'b.1']);
  assert.equal(transitions.awaitInput(task.id, [], round), undefined, 'only from running');

  const partly = transitions.recordAnswers(task.id, [{ ...round, responses: { 'a.1': { action: 'accept' } } }]);
  assert.equal(partly?.status, 'input_required');
  assert.deepEqual(Object.keys(partly?.inputRequests ?? {}), ['b.1']);
  assert.deepEqual(Object.keys(parts.store.getTask(task.id)?.inputRequests ?? {}), ['b.1'], 'stored as told');

  const all = [{ ...round, responses: { 'a.1': { action: 'accept' }, 'b.1': { action: 'decline' } } }];
  const back = transitions.inputReceived(task.id, all);
  assert.equal(back?.status, 'running');
  assert.equal(back?.statusMessage, 'generating: 2 tokens');
  assert.equal(back?.inputRequests, null);
  assert.deepEqual(parts.store.inputRoundsOf(task.id), all);
  await parts.close();
});

test('a deferred operation is told only once durable, and replays stop before it until then', async () => {
  const parts = await openParts();
  const { transitions } = parts;
  const task = parts.add();
  const { heard } = listen(parts, task.id);
  let failed = false;
  const running = transitions.startRunning(task.id, { messageId: 'msg_1', fromQueued: true, defer: { onFailed: () => (failed = true) } });
  assert.equal(running?.status, 'running', 'applied at once');
  assert.equal(transitions.unsyncedFrom(task.id), 2);
  assert.equal(heard.length, 0, 'not told before the sync');
  parts.db.settle();
  assert.equal(transitions.unsyncedFrom(task.id), undefined);
  assert.deepEqual(types(heard), OPENED);
  assert.equal(failed, false);
  await parts.close();
});

test('a deferred create is told once durable; a plain one at once', async () => {
  const parts = await openParts();
  const changes: string[] = [];
  parts.bus.onTaskChange((t) => changes.push(t.id));
  const plain = parts.add();
  assert.deepEqual(changes, [plain.id]);
  const later = parts.record({ origin: 'mcp', onRestart: 'retry' });
  let durable = false;
  parts.transitions.create(later, 99, { defer: { onDurable: () => (durable = true), onFailed: () => assert.fail('no failure') } });
  assert.equal(parts.transitions.unsyncedFrom(later.id), 0);
  assert.deepEqual(changes, [plain.id]);
  parts.db.settle();
  assert.ok(durable);
  assert.deepEqual(changes, [plain.id, later.id]);
  assert.deepEqual(types(parts.events(later.id)), [EVENT.created, EVENT.queued]);
  await parts.close();
});

test('log-probabilities: delta events carry them without bytes, delivered() reads them back, the final part has them all', async () => {
  const parts = await openParts();
  const { transitions } = parts;
  const task = parts.add();
  transitions.startRunning(task.id, { messageId: 'msg_1', fromQueued: true });
  const lp = (token: string, logprob: number) => ({
    token,
    logprob,
    bytes: [...Buffer.from(token)],
    top_logprobs: [{ token, logprob, bytes: [...Buffer.from(token)] }],
  });
  transitions.progress(task.id, {
    messageId: 'msg_1',
    tokens: 2,
    output: [{ kind: 'text', delta: 'hé', logprobs: [lp('h', -0.5), lp('é', -1.25)] }],
  });
  transitions.progress(task.id, { messageId: 'msg_1', tokens: 3, output: [{ kind: 'text', delta: 'y', logprobs: [lp('y', -2)] }] });
  const deltas = parts.events(task.id).filter((e) => e.type === EVENT.outputTextDelta);
  assert.deepEqual(deltas[0].data.logprobs, [
    { token: 'h', logprob: -0.5, top_logprobs: [{ token: 'h', logprob: -0.5 }] },
    { token: 'é', logprob: -1.25, top_logprobs: [{ token: 'é', logprob: -1.25 }] },
  ]);
  const delivered = transitions.delivered(parts.store.getTask(task.id)!);
  assert.deepEqual(delivered.logprobs, [lp('h', -0.5), lp('é', -1.25), lp('y', -2)], 'bytes rebuilt from the token text');
  const done = transitions.succeed(task.id, { finishReason: 'stop', inputTokens: 1, outputTokens: 3 }, { ...delivered, messageId: 'msg_1' });
  const content = (done?.response?.['output'] as Array<{ content: Array<{ logprobs: unknown[] }> }>)[0].content[0];
  assert.equal(content.logprobs.length, 3);
  const textDone = parts.events(task.id).find((e) => e.type === EVENT.outputTextDone);
  assert.deepEqual(textDone?.data.logprobs, delivered.logprobs);
  await parts.close();
});
