// The events panel's timeline for the events a real task stores (real runtime, real tiny model that is not loaded
// yet, so the task goes through a model load): each phase shows once, in order.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { LlamaBackend } from '../../../src/backends/llama/llamaBackend';
import { TaskRuntime } from '../../../src/runtime/runtime';
import { applyEvents, initialState } from '../../../src/extension/webview/eventLog';
import { testModelPath } from '../../fixtures/testModel';
import { prompt, tempDir } from '../runtime/helpers';

// Its own backend: the shared one may have loaded the model already, and this test needs the load.
const backend = new LlamaBackend({ models: [{ id: 'tiny', source: testModelPath() }] });
after(() => backend.dispose());

test('a task that loads the model shows "loading" once in the timeline', async () => {
  const runtime = await TaskRuntime.open({ dataDir: tempDir('tr-timeline-'), backend });
  try {
    const { task } = runtime.createTask({ origin: 'editor', principal: 'editor', input: prompt('timeline', 4) });
    const done = await runtime.waitForTerminal(task.id);
    assert.equal(done.status, 'succeeded');
    const events = runtime.readEvents(task.id).map((e) => ({ seq: e.seq, type: e.type, data: e.data }));
    assert.ok(
      events.some((e) => e.type === 'task_runtime:model.loading'),
      'the runtime reported load progress',
    );
    const { state, gap } = applyEvents(initialState(task.id), events);
    assert.equal(gap, false);
    assert.deepEqual(
      state.timeline.map((t) => t.kind),
      ['created', 'queued', 'loading', 'running', 'succeeded'],
    );
  } finally {
    await runtime.close();
  }
});
