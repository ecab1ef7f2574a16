// Restart recovery directly: tasks left in every unfinished status under every on_restart policy, written to a real
// store, closed without finishing, reopened, and resolved by recoverTasks. No model: the backend only answers
// whether it can resume.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { problem } from '../../../src/runtime/problems';
import { recoverTasks } from '../../../src/runtime/recovery';
import { EVENT } from '../../../src/runtime/responseEvents';
import type { RestartPolicy, TaskRecord } from '../../../src/runtime/task';
import { ScriptedBackend, says } from '../../fixtures/scriptedBackend';
import { openParts, types, type Parts } from '../../fixtures/runtimeParts';

/** A task that got as far as `stage` in its first attempt, delivering `text` when it ran. */
function leave(
  parts: Parts,
  onRestart: RestartPolicy,
  stage: 'queued' | 'loading' | 'running' | 'input' | 'cancelling',
  text = 'so far',
): TaskRecord {
  const { transitions } = parts;
  const t = parts.add({ onRestart });
  if (stage === 'queued') return t;
  transitions.startLoading(t.id);
  if (stage === 'loading') return t;
  transitions.startRunning(t.id, { messageId: `msg_${t.id}` });
  transitions.progress(t.id, {
    messageId: `msg_${t.id}`,
    tokens: 2,
    output: [{ kind: 'text', delta: text }],
    snapshot: { statePath: '/nowhere/state.bin', text, outputTokens: 2, contextTokens: 5 } as never,
  });
  if (stage === 'input') {
    transitions.awaitInput(t.id, [], { round: 1, requests: { 'a.1': { method: 'elicitation/create' } }, responses: {} });
  } else if (stage === 'cancelling') {
    transitions.requestCancel(t.id);
  }
  return t;
}

async function restart(parts: Parts, resume: boolean) {
  // Closed with its tasks unfinished, as after a kill: the store keeps them as they were.
  await parts.close();
  const again = await openParts(parts.dir, parts.clock);
  const outcome = recoverTasks(again.store, again.transitions, new ScriptedBackend(says(), { resume }));
  return { again, outcome, get: (t: TaskRecord) => again.store.getTask(t.id)! };
}

test('on_restart "fail": every unfinished task fails with server_restarted, keeping its text; cancelling ones end cancelled; queued "retry" ones wait', async () => {
  const parts = await openParts();
  const queuedFail = leave(parts, 'fail', 'queued');
  const queued = leave(parts, 'retry', 'queued');
  const running = leave(parts, 'fail', 'running', 'partial text');
  const waiting = leave(parts, 'fail', 'input');
  const stopping = leave(parts, 'retry', 'cancelling', 'kept');
  const { again, outcome, get } = await restart(parts, false);

  assert.deepEqual(
    { failed: outcome.failed, cancelled: outcome.cancelled, requeued: outcome.requeued, retried: outcome.retried },
    { failed: 3, cancelled: 1, requeued: 1, retried: 0 },
  );
  assert.equal(get(queued).status, 'queued');
  assert.deepEqual(types(again.events(queued.id)), [EVENT.created, EVENT.queued], 'a queued task is left as it was');
  for (const t of [queuedFail, running, waiting]) {
    assert.equal(get(t).status, 'failed');
    assert.equal(get(t).error?.code, 'server_restarted');
  }
  assert.equal(get(running).response?.['output_text'], 'partial text');
  assert.match(get(waiting).error?.detail ?? '', /waited for input/);
  assert.equal(get(stopping).status, 'cancelled');
  assert.equal(get(stopping).response?.['output_text'], 'kept');
  await again.close();
});

test('on_restart "retry": a started task runs again as a new attempt; one waiting for input keeps its questions', async () => {
  const parts = await openParts();
  const running = leave(parts, 'retry', 'running');
  const loading = leave(parts, 'retry', 'loading');
  const waiting = leave(parts, 'retry', 'input');
  const { again, outcome, get } = await restart(parts, false);
  assert.equal(outcome.retried, 2);
  assert.equal(outcome.waitingForInput, 1);
  for (const t of [running, loading]) {
    const r = get(t);
    assert.deepEqual([r.status, r.attempt, r.statusMessage, r.outputTokens], ['queued', 2, 'restarted: attempt 2', 0]);
    assert.deepEqual(types(again.events(t.id)).slice(-3), [EVENT.taskStatus, EVENT.created, EVENT.queued]);
    assert.equal(again.store.snapshotOf(t.id), null);
  }
  assert.equal(get(waiting).status, 'input_required');
  assert.deepEqual(Object.keys(get(waiting).inputRequests ?? {}), ['a.1']);
  assert.equal(outcome.resumePoints.size, 0);
  await again.close();
});

test('on_restart "resume": a task with delivered output continues its item from a resume point; without output, or a backend that cannot, it retries', async () => {
  const parts = await openParts();
  const running = leave(parts, 'resume', 'running', 'abc');
  const loading = leave(parts, 'resume', 'loading');
  const { again, outcome, get } = await restart(parts, true);
  assert.equal(outcome.resumed, 1);
  assert.equal(outcome.retried, 1);
  const r = get(running);
  assert.deepEqual([r.status, r.attempt, r.statusMessage], ['queued', 1, 'resuming after restart']);
  const point = outcome.resumePoints.get(running.id);
  assert.equal(point?.text, 'abc');
  assert.equal(point?.outputTokens, 2);
  assert.equal(point?.messageId, `msg_${running.id}`);
  assert.equal(point?.snapshot?.text, 'abc');
  assert.equal(get(loading).attempt, 2);
  await again.close();

  // The same task on a backend that cannot resume it runs again from the start.
  const other = await openParts();
  const t = leave(other, 'resume', 'running');
  const { again: again2, outcome: outcome2, get: get2 } = await restart(other, false);
  assert.equal(outcome2.resumed, 0);
  assert.equal(outcome2.retried, 1);
  assert.equal(get2(t).attempt, 2);
  await again2.close();
});

test('terminal tasks are left alone, and a second recovery changes nothing', async () => {
  const parts = await openParts();
  const done = parts.add();
  parts.transitions.fail(done.id, problem('model_error', 'x'));
  const running = leave(parts, 'retry', 'running');
  const { again, get } = await restart(parts, false);
  const before = again.events(done.id).length;
  assert.equal(get(done).status, 'failed');
  const second = recoverTasks(again.store, again.transitions, new ScriptedBackend(says()));
  // The retried task is queued now: a second pass only counts it as waiting its turn.
  assert.deepEqual({ retried: second.retried, requeued: second.requeued, failed: second.failed }, { retried: 0, requeued: 1, failed: 0 });
  assert.equal(get(running).attempt, 2);
  assert.equal(again.events(done.id).length, before);
  await again.close();
});
