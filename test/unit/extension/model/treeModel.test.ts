// The tree model: its groups cover the runtime's statuses; over a real runtime (real sql.js store, real tiny model),
// grouping, counts, paging and coalesced change notifications naming only what changed.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { LocalTaskSource } from '../../../../src/extension/model/localTaskSource';
import { GROUP_STATUSES, TaskTreeModel, groupOf, type TreeChange, type TaskNode, type MoreNode } from '../../../../src/extension/model/treeModel';
import type { Timers } from '../../../../src/extension/model/coalescer';
import type { TaskRuntime } from '../../../../src/runtime/runtime';
import { TASK_STATUSES } from '../../../../src/runtime/task';
import { waitFor } from '../../../support/wait';
import { longPrompt, openRuntime, prompt } from '../../runtime/helpers';

/** Timers that only fire when the test says so. */
function manualTimers(): Timers & { pending: number } {
  const callbacks = new Map<number, () => void>();
  let next = 1;
  return {
    now: () => 0,
    setTimeout(fn) {
      const id = next++;
      callbacks.set(id, fn);
      return id;
    },
    clearTimeout(h) {
      callbacks.delete(h as number);
    },
    get pending() {
      return callbacks.size;
    },
  };
}

describe('tree groups', () => {
  it('each runtime status sits in exactly one group', () => {
    const grouped = Object.values(GROUP_STATUSES).flat();
    assert.deepEqual([...grouped].sort(), [...TASK_STATUSES].sort());
    assert.equal(groupOf('cancelling'), 'running');
    assert.equal(groupOf('input_required'), 'needsInput');
  });
});

describe('TaskTreeModel over a real runtime', () => {
  let runtime: TaskRuntime;
  let source: LocalTaskSource;
  let model: TaskTreeModel;
  let timers: ReturnType<typeof manualTimers>;
  const changes: TreeChange[] = [];
  let runningId: string;
  const queuedIds: string[] = [];

  before(async () => {
    runtime = await openRuntime(undefined, { limits: { maxConcurrentTasks: 1, maxQueuedTasks: 1000 } });
    source = new LocalTaskSource(runtime, 'editor');
    runningId = runtime.createTask({ origin: 'editor', principal: 'editor', input: longPrompt('keep going') }).task.id;
    await waitFor(() => runtime.getTask(runningId)!.status === 'running', 'the long task to run');
    for (let i = 0; i < 120; i++) {
      queuedIds.push(runtime.createTask({ origin: i % 2 ? 'lmsp' : 'mcp', principal: 'someone', input: prompt(`queued ${i}`) }).task.id);
    }
    timers = manualTimers();
    model = new TaskTreeModel(source, { pageSize: 50, timers });
    model.onDidChange((c) => changes.push(c));
    await model.reload();
  });

  after(async () => {
    model.dispose();
    source.dispose();
    await runtime.close();
  });

  it('groups by status with counts, the editor seeing every principal', () => {
    assert.deepEqual(
      model.rootNodes().map((g) => [g.id, g.count]),
      [
        ['queued', 120],
        ['running', 1],
      ],
    );
    assert.equal(model.activeCount, 1);
    assert.equal(model.total, 121);
  });

  it('pages a large group lazily, newest first, with a "show more" row', async () => {
    const rows = await model.groupChildren('queued');
    assert.equal(rows.length, 51);
    const more = rows[50] as MoreNode;
    assert.equal(more.kind, 'more');
    assert.equal(more.remaining, 70);
    const ids = (rows.slice(0, 50) as TaskNode[]).map((n) => n.id);
    // The runtime's own newest-first order, and only the newest 50 of the 120.
    assert.deepEqual(
      ids,
      runtime.listTasks({ statuses: ['queued'], limit: 50 }).tasks.map((t) => t.id),
    );
    assert.equal(new Set(ids).size, 50);
    await model.loadMore('queued');
    const rows2 = await model.groupChildren('queued');
    assert.equal(rows2.length, 101);
    assert.equal((rows2[100] as MoreNode).remaining, 20);
    // Rows keep their identity across pages, so the view can refresh one row.
    assert.equal(rows2[0], rows[0]);
  });

  it('moves a cancelled task between groups and notifies only the two groups, in one batch', async () => {
    changes.length = 0;
    const victim = ((await model.groupChildren('queued'))[0] as TaskNode).id;
    runtime.cancelTask(victim);
    assert.equal(changes.length, 0, 'nothing is emitted before the coalescing timer fires');
    assert.ok(timers.pending > 0);
    model.flush();
    await waitFor(() => changes.length > 0, 'a change notification');
    assert.equal(changes.length, 1);
    const change = changes[0]!;
    assert.deepEqual(change.groups.map((g) => g.id).sort(), ['cancelled', 'queued']);
    assert.equal(change.root, true, 'the Cancelled group appeared');
    assert.equal(model.groupCount('queued'), 119);
    assert.equal(model.groupCount('cancelled'), 1);
    const queuedRows = (await model.groupChildren('queued')) as TaskNode[];
    assert.ok(!queuedRows.some((n) => n.id === victim));
  });

  it('refreshes a single row when a task changes within its group', async () => {
    changes.length = 0;
    const before = runtime.getTask(runningId)!.outputTokens;
    await waitFor(() => runtime.getTask(runningId)!.outputTokens > before, 'progress of the running task');
    await model.groupChildren('running');
    // Deliver what was pending from before the group was loaded, then watch the loaded row only.
    model.flush();
    await new Promise((r) => setTimeout(r, 20));
    changes.length = 0;
    const progressed = runtime.getTask(runningId)!.outputTokens;
    await waitFor(() => runtime.getTask(runningId)!.outputTokens > progressed, 'more progress');
    model.flush();
    await waitFor(() => changes.length > 0, 'a row notification');
    const change = changes[changes.length - 1]!;
    assert.equal(change.root, false);
    assert.deepEqual(change.groups, []);
    assert.deepEqual(
      change.tasks.map((t) => t.id),
      [runningId],
    );
    assert.ok(change.tasks[0]!.task.outputTokens > progressed - 1);
  });

  it('keeps counts exact for tasks it never loaded', async () => {
    changes.length = 0;
    const loaded = new Set(((await model.groupChildren('queued')) as TaskNode[]).map((n) => n.id));
    const unloaded = queuedIds.find((id) => !loaded.has(id))!; // beyond the loaded pages
    assert.ok(unloaded);
    runtime.cancelTask(unloaded);
    model.flush();
    await waitFor(() => changes.length > 0, 'a change notification');
    assert.equal(model.groupCount('queued'), 118);
    assert.equal(model.groupCount('cancelled'), 2);
    runtime.cancelTask(runningId);
    await waitFor(() => runtime.getTask(runningId)!.status === 'cancelled', 'the long task to stop');
  });
});
