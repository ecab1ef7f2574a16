// The MCP status mapping is one table for both eras (mcpTaskView.ts MCP_STATUS): every runtime status has an MCP
// status; a task the runtime considers ended or stopping is terminal to MCP, one it still runs is not; and the
// 2026-07-28 view (modernTask) shows the same status as 2025-11-25 for every unfinished task.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isMcpTerminal, mcpStatus } from '../../../../src/protocols/mcp/mcpTaskView';
import { modernTask } from '../../../../src/protocols/mcp/modern/modernTasks';
import type { McpContext } from '../../../../src/protocols/mcp/context';
import { CANCELLABLE_STATUSES, isCancellable, isTerminal, TASK_STATUSES, type TaskRecord, type TaskStatus } from '../../../../src/runtime/task';

function record(status: TaskStatus): TaskRecord {
  return {
    id: 'task_1',
    principal: 'alice',
    title: 't',
    model: 'm',
    request: { model: 'm', input: 'hi' },
    status,
    statusMessage: null,
    createdAt: 1,
    updatedAt: 2,
    ttlMs: null,
    outputTokens: 0,
    inputRequests: status === 'input_required' ? {} : null,
  } as unknown as TaskRecord;
}

const ctx = {
  runtime: { queueInfo: () => ({ position: 1, priority: 0, expectedStartAt: null, expectedWaitMs: null }) },
  view: { pollIntervalMs: 500 },
} as unknown as McpContext;

test('every runtime status maps; MCP-terminal exactly when the runtime stops or has stopped it', () => {
  for (const s of TASK_STATUSES) {
    const m = mcpStatus(s);
    assert.ok(['working', 'input_required', 'completed', 'failed', 'cancelled'].includes(m), `${s} → ${m}`);
    assert.equal(isMcpTerminal(m), !isCancellable(s), s);
    assert.equal(isTerminal(s) || s === 'cancelling', !isCancellable(s), s);
  }
});

test('the 2026-07-28 view agrees with 2025-11-25 on every status a cancel acts on, and on cancelling', () => {
  for (const s of [...CANCELLABLE_STATUSES, 'cancelling' as const]) {
    assert.equal(modernTask(ctx, record(s), false).status, mcpStatus(s), s);
  }
});
