import { test } from 'node:test';
import assert from 'node:assert/strict';
import { TASK_STATUSES, canTransition, isTerminal, type TaskStatus } from '../../../src/runtime/task';

// LMSP ch.7 §7.2, exactly, plus MCP's input_required (entered from and left to running).
const LEGAL: Array<[TaskStatus, TaskStatus]> = [
  ['queued', 'loading'],
  ['queued', 'cancelled'],
  ['queued', 'failed'],
  ['loading', 'running'],
  ['loading', 'cancelling'],
  ['loading', 'failed'],
  ['running', 'succeeded'],
  ['running', 'failed'],
  ['running', 'cancelling'],
  ['running', 'input_required'],
  ['input_required', 'running'],
  ['input_required', 'succeeded'],
  ['input_required', 'failed'],
  ['input_required', 'cancelling'],
  ['cancelling', 'cancelled'],
];

test('every pair of statuses follows the transition table', () => {
  for (const from of TASK_STATUSES) {
    for (const to of TASK_STATUSES) {
      const expected = LEGAL.some(([f, t]) => f === from && t === to);
      assert.equal(canTransition(from, to), expected, `${from} → ${to}`);
    }
  }
});

test('terminal statuses are final', () => {
  for (const s of TASK_STATUSES) {
    if (!isTerminal(s)) continue;
    for (const to of TASK_STATUSES) assert.equal(canTransition(s, to), false, `${s} → ${to}`);
  }
  assert.deepEqual(
    TASK_STATUSES.filter((s) => isTerminal(s)),
    ['succeeded', 'failed', 'cancelled'],
  );
});
