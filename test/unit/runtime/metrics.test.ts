// The metrics collector on its own, fed the task changes a runtime tells, with a clock the test moves: timing of
// queue wait, first token and speed; a new attempt's tokens; tasks first seen after a restart; deletion; embeddings
// calls counted by model and outcome with their inputs and tokens.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RuntimeMetrics } from '../../../src/runtime/metrics';
import { newTaskRecord } from '../../../src/runtime/newTask';
import type { TaskRecord } from '../../../src/runtime/task';
const NO_QUEUE = { byModel: [], byPrincipal: [], oldestWaitSeconds: 0 };

function task(): TaskRecord {
  return newTaskRecord({
    origin: 'mcp',
    principal: 'p',
    title: 't',
    input: { model: 'tiny', input: 'x' },
    onRestart: 'retry',
    ttlMs: null,
    deadlineAt: null,
    meta: {},
    now: 0,
  });
}

describe('RuntimeMetrics', () => {
  it('counts embeddings calls by model: succeeded with inputs and tokens, failed alone', () => {
    const m = new RuntimeMetrics(() => 0);
    assert.deepEqual(m.snapshot({} as never, 0, NO_QUEUE).embeddings, []);
    m.embeddingCall('b', { inputs: 3, tokens: 40 });
    m.embeddingCall('a', 'failed');
    m.embeddingCall('b', { inputs: 1, tokens: 7 });
    m.embeddingCall('b', 'failed');
    assert.deepEqual(m.snapshot({} as never, 0, NO_QUEUE).embeddings, [
      { model: 'a', succeeded: 0, failed: 1, inputs: 0, tokens: 0 },
      { model: 'b', succeeded: 2, failed: 1, inputs: 4, tokens: 47 },
    ]);
  });

  it('times a run: queue wait, first token, tokens per second; counts tokens and the outcome', () => {
    let now = 0;
    const m = new RuntimeMetrics(() => now);
    const t = task();
    m.taskCreated(t);
    m.taskChanged(t, false);
    now = 200;
    m.taskChanged({ ...t, status: 'loading' }, false);
    m.taskChanged({ ...t, status: 'running' }, false);
    now = 500;
    m.taskChanged({ ...t, status: 'running', outputTokens: 3 }, false);
    now = 1200;
    m.taskChanged({ ...t, status: 'running', outputTokens: 10 }, false);
    m.taskChanged({ ...t, status: 'succeeded', outputTokens: 10 }, false);
    const s = m.snapshot({} as never, 0, NO_QUEUE);
    assert.deepEqual(s.created, [{ origin: 'mcp', n: 1 }]);
    assert.deepEqual(s.finished, [{ origin: 'mcp', outcome: 'succeeded', n: 1 }]);
    assert.equal(s.outputTokens, 10);
    assert.equal(s.queueWait.count, 1);
    assert.equal(s.queueWait.sum, 0.2);
    assert.equal(s.timeToFirstToken[0].model, 'tiny');
    assert.equal(s.timeToFirstToken[0].h.sum, 0.5);
    assert.equal(s.tokensPerSecond[0].h.sum, 10 / 1.0);
  });

  it('a new attempt starts its clocks again and keeps the tokens already generated counted', () => {
    let now = 0;
    const m = new RuntimeMetrics(() => now);
    const t = task();
    m.taskChanged(t, false);
    m.taskChanged({ ...t, status: 'running', outputTokens: 4 }, false);
    now = 1000;
    m.taskChanged({ ...t, status: 'queued', attempt: 2, outputTokens: 0 }, false);
    now = 1100;
    m.taskChanged({ ...t, status: 'running', attempt: 2 }, false);
    now = 1300;
    m.taskChanged({ ...t, status: 'running', attempt: 2, outputTokens: 2 }, false);
    m.taskChanged({ ...t, status: 'failed', attempt: 2, outputTokens: 2 }, false);
    const s = m.snapshot({} as never, 0, NO_QUEUE);
    assert.equal(s.outputTokens, 6);
    assert.equal(s.queueWait.count, 2);
    assert.equal(s.timeToFirstToken[0].h.count, 2);
    assert.equal(s.timeToFirstToken[0].h.sum, 0 + 0.3);
    assert.deepEqual(s.finished, [{ origin: 'mcp', outcome: 'failed', n: 1 }]);
    assert.equal(s.tokensPerSecond.length, 0);
  });

  it('a task first seen after a restart counts only new tokens; a deleted one is forgotten; a terminal one unseen is not counted', () => {
    const m = new RuntimeMetrics(() => 0);
    const t = { ...task(), status: 'loading' as const, outputTokens: 50 };
    m.taskChanged(t, false);
    m.taskChanged({ ...t, status: 'running', outputTokens: 55 }, false);
    m.taskChanged({ ...t, status: 'cancelling', outputTokens: 55 }, false);
    m.taskChanged(t, true);
    m.taskChanged({ ...task(), status: 'succeeded', outputTokens: 9 }, false);
    const s = m.snapshot({} as never, 0, NO_QUEUE);
    assert.equal(s.outputTokens, 5);
    assert.equal(s.queueWait.count, 0);
    assert.equal(s.timeToFirstToken.length, 0);
    assert.deepEqual(s.finished, []);
  });
});
