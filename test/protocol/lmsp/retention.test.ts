// Limits that need their own server: 410 after the event history is purged, 429 when the queue is full.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { until } from '../../support/wait';
import { call, createTask, followEvents, LONG_INPUT, removeDir, startRunningTask, startServer, waitForStatus } from './harness';

describe('LMSP retention and queue limits', () => {
  it('410 event_history_expired once history is purged; the task itself stays readable', async () => {
    const server = await startServer({ limits: { eventHistorySeconds: 1 }, env: { TASK_RUNTIME_SWEEP_MS: '200' } });
    try {
      const t = await createTask(server, { max_output_tokens: 4 });
      await waitForStatus(server, t.id, ['succeeded']);
      // The server's own clock and sweep decide when; poll until its answer changes.
      const r = await until(
        async () => {
          const got = await call(server, 'GET', `/tasks/${t.id}/events`);
          return got.status !== 200 && got;
        },
        'the event history to be purged',
        { intervalMs: 100 },
      );
      assert.equal(r.status, 410);
      assert.equal(r.json.code, 'event_history_expired');
      assert.match(String(r.headers['content-type']), /^application\/problem\+json/);
      const resumed = await call(server, 'GET', `/tasks/${t.id}/events`, { headers: { 'last-event-id': '1' } });
      assert.equal(resumed.status, 410);
      const sse = await followEvents(server, t.id);
      assert.equal(sse.failedStatus, 410);
      assert.equal(sse.events.length, 0);
      const task = await call(server, 'GET', `/tasks/${t.id}`);
      assert.equal(task.status, 200);
      assert.equal(task.json.status, 'succeeded');
    } finally {
      assert.equal(await server.stop(), 0);
      removeDir(server.dataDir);
    }
  });

  it('429 queue_full with Retry-After when the queue is full', async () => {
    const server = await startServer({ limits: { maxQueuedTasks: 1, maxConcurrentTasks: 1 } });
    try {
      const { task: running } = await startRunningTask(server);
      const queued = await createTask(server, LONG_INPUT);
      const r = await call(server, 'POST', '/tasks', { body: { type: 'response', input: { model: server.model, input: 'x' } } });
      assert.equal(r.status, 429);
      assert.equal(r.json.code, 'queue_full');
      assert.match(String(r.headers['retry-after']), /^\d+$/);
      for (const id of [queued.id, running.id]) await call(server, 'POST', `/tasks/${id}/cancel`);
      await waitForStatus(server, running.id, ['cancelled', 'succeeded']);
      assert.equal((await call(server, 'GET', `/tasks/${queued.id}`)).json.status, 'cancelled');
    } finally {
      assert.equal(await server.stop(), 0);
      removeDir(server.dataDir);
    }
  });
});
