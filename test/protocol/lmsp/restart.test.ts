// SIGKILL during `running`, then a restart on the same data directory: on_restart fail / retry, a cancelling task,
// and event ids that continue without reuse.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  assertContiguous,
  call,
  createTask,
  followEvents,
  LONG_INPUT,
  removeDir,
  startServer,
  TERMINAL_TYPES,
  waitForStatus,
  type SseEvent,
} from './harness';

describe('LMSP restart semantics', () => {
  it('fail → failed/server_restarted, retry → runs again and succeeds, cancelling → cancelled', async () => {
    let server = await startServer({ args: ['--concurrency', '3'] });
    const dataDir = server.dataDir;
    try {
      const failTask = await createTask(server, LONG_INPUT, { on_restart: 'fail' });
      const retryTask = await createTask(server, { ...LONG_INPUT, max_output_tokens: 1500 }, { on_restart: 'retry' });
      const cancelTask = await createTask(server, LONG_INPUT, { on_restart: 'retry' });
      const isDelta = (e: SseEvent) => e.type === 'response.output_text.delta';
      const [seenFail, seenRetry] = await Promise.all([
        followEvents(server, failTask.id, { until: isDelta }),
        followEvents(server, retryTask.id, { until: isDelta }),
        followEvents(server, cancelTask.id, { until: isDelta }),
      ]);
      const cancelled = await call(server, 'POST', `/tasks/${cancelTask.id}/cancel`);
      await server.kill();
      assert.equal(cancelled.status, 200);
      assert.ok(['cancelling', 'cancelled'].includes(cancelled.json.status));
      for (const t of [failTask, retryTask]) {
        const seen = t === failTask ? seenFail.events : seenRetry.events;
        assert.ok(!seen.some((e) => TERMINAL_TYPES.has(e.type)), 'the task was still running when killed');
      }

      server = await startServer({ dataDir });
      const failed = await waitForStatus(server, failTask.id, ['failed', 'succeeded', 'cancelled']);
      assert.equal(failed.status, 'failed');
      assert.equal(failed.error.code, 'server_restarted');
      assert.equal(failed.response, null);

      const wasCancelling = await waitForStatus(server, cancelTask.id, ['cancelled', 'failed', 'succeeded']);
      assert.equal(wasCancelling.status, 'cancelled');

      const retried = await waitForStatus(server, retryTask.id, ['succeeded', 'failed', 'cancelled']);
      assert.equal(retried.status, 'succeeded');

      // Event ids continue across the restart: what was streamed before the kill is a prefix of the history.
      for (const [task, before] of [
        [failTask, seenFail.events],
        [retryTask, seenRetry.events],
      ] as const) {
        const { events } = await followEvents(server, task.id);
        assertContiguous(events);
        assert.deepEqual(events.slice(0, before.length), before, `${task.id}: no id reused`);
        assert.ok(TERMINAL_TYPES.has(events.at(-1)!.type));
      }
      const { events: retryEvents } = await followEvents(server, retryTask.id);
      const created = retryEvents.filter((e) => e.type === 'response.created');
      assert.equal(created.length, 2, 'a fresh response.created starts the second attempt');
      const restartNote = retryEvents.findIndex((e, i) => i >= seenRetry.events.length && e.type === 'task_runtime:task.status');
      assert.ok(restartNote >= 0 && restartNote < retryEvents.indexOf(created[1]), 'a status event announces the new attempt');
      assert.ok(['response.completed', 'response.incomplete'].includes(retryEvents.at(-1)!.type));
      const { events: failEvents } = await followEvents(server, failTask.id);
      assert.equal(failEvents.at(-1)!.type, 'response.failed');
    } finally {
      await server.stop();
      removeDir(dataDir);
    }
  });
});
