// The task source's status lists come from the runtime: the counts and what Cancel offers cover its statuses.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { emptyCounts } from '../../../../src/extension/model/taskSource';
import { CANCELLABLE_STATUSES, TASK_STATUSES, TERMINAL_STATUSES, canTransition } from '../../../../src/runtime/task';

describe('status lists come from the runtime', () => {
  it('counts and cancellable statuses cover exactly the runtime statuses', () => {
    assert.deepEqual(Object.keys(emptyCounts()), [...TASK_STATUSES]);
    // What Cancel offers: every unfinished status that is not already stopping; each can move towards cancelled.
    // Every other unfinished status is already on its way to `cancelled` and can go nowhere else.
    for (const s of TASK_STATUSES.filter((x) => !CANCELLABLE_STATUSES.includes(x) && !TERMINAL_STATUSES.includes(x))) {
      assert.ok(
        TASK_STATUSES.every((to) => canTransition(s, to) === (to === 'cancelled')),
        s,
      );
    }
    for (const s of CANCELLABLE_STATUSES) assert.ok(canTransition(s, 'cancelled') || canTransition(s, 'cancelling'), s);
    assert.ok(CANCELLABLE_STATUSES.every((s) => !TERMINAL_STATUSES.includes(s)));
  });
});
