// The status table of ARCHITECTURE.md "One task, many views" (MCP column) and the outcome each terminal
// runtime state gives tasks/result.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { TASK_STATUSES, type TaskRecord } from '../../../src/runtime/task';
import { mcpStatus, statusMessage, toMcpTask, toolOutcome } from '../../../src/protocols/mcp/mcpTaskView';

function record(over: Partial<TaskRecord>): TaskRecord {
  return {
    id: 'task_x',
    responseId: 'resp_x',
    origin: 'mcp',
    principal: 'p',
    title: 't',
    model: 'm',
    request: { input: 'hi' },
    status: 'running',
    statusMessage: null,
    createdAt: 1_000,
    updatedAt: 2_000,
    onRestart: 'fail',
    attempt: 1,
    ttlMs: 60_000,
    expiresAt: 61_000,
    deadlineAt: null,
    response: null,
    error: null,
    usage: null,
    outputTokens: 7,
    meta: { tool: 'generate' },
    priority: 0,
    nextSeq: 1,
    oldestSeq: 0,
    inputRequests: null,
    ...over,
  };
}

test('every runtime status maps to the MCP status of the architecture table', () => {
  const expected: Record<string, string> = {
    queued: 'working',
    loading: 'working',
    running: 'working',
    input_required: 'input_required',
    cancelling: 'cancelled',
    succeeded: 'completed',
    failed: 'failed',
    cancelled: 'cancelled',
  };
  for (const s of TASK_STATUSES) assert.equal(mcpStatus(s), expected[s], s);
});

test('status messages name the detail', () => {
  assert.equal(statusMessage(record({ status: 'queued' }), { position: 3, priority: 0, expectedStartAt: null, expectedWaitMs: null }), 'queued: 3rd');
  assert.equal(
    statusMessage(record({ status: 'queued' }), { position: 22, priority: 0, expectedStartAt: 12_000, expectedWaitMs: 12_000 }),
    'queued: 22nd, about 12 s',
  );
  assert.equal(statusMessage(record({ status: 'queued' }), null), 'queued: waiting for the model');
  assert.equal(statusMessage(record({ status: 'loading' }), null), 'loading model m …');
  assert.equal(statusMessage(record({ status: 'running' }), null), 'generating: 7 tokens');
  const failed = record({
    status: 'failed',
    error: { type: 't', title: 'x', status: 503, code: 'server_restarted', detail: 'The server restarted.' },
  });
  assert.match(statusMessage(failed, null), /^failed after 7 tokens: server_restarted: The server restarted\. Re-issue/);
});

test('task view: ISO timestamps, ttl always, pollInterval only while unfinished', () => {
  const working = toMcpTask(record({}), null, { pollIntervalMs: 500 });
  assert.deepEqual(working, {
    taskId: 'task_x',
    status: 'working',
    statusMessage: 'generating: 7 tokens',
    createdAt: new Date(1_000).toISOString(),
    lastUpdatedAt: new Date(2_000).toISOString(),
    ttl: 60_000,
    pollInterval: 500,
  });
  const done = toMcpTask(record({ status: 'succeeded', ttlMs: null }), null, { pollIntervalMs: 500 });
  assert.equal(done.ttl, null);
  assert.equal('pollInterval' in done, false);
});

test('outcomes: completed text, failed isError or JSON-RPC error, cancelled isError with partial text', () => {
  const response = { output: [{ type: 'message', content: [{ type: 'output_text', text: 'abc' }] }] };
  const ok = toolOutcome(record({ status: 'succeeded', response }));
  assert.ok(ok && 'result' in ok);
  assert.equal(ok.result.isError, false);
  assert.deepEqual(ok.result.content, [{ type: 'text', text: 'abc' }]);

  const toolFail = toolOutcome(
    record({ status: 'failed', response, error: { type: 't', title: 'x', status: 500, code: 'backend_error', detail: 'boom' } }),
  );
  assert.ok(toolFail && 'result' in toolFail);
  assert.equal(toolFail.result.isError, true);
  assert.equal((toolFail.result.structuredContent as { text: string }).text, 'abc');

  const requestFail = toolOutcome(
    record({ status: 'failed', error: { type: 't', title: 'x', status: 404, code: 'model_not_found', detail: 'no model q' } }),
  );
  assert.ok(requestFail && 'error' in requestFail);
  assert.equal(requestFail.error.code, -32602);
  assert.equal(requestFail.error.message, 'no model q');

  const cancelled = toolOutcome(record({ status: 'cancelled', response, statusMessage: 'cancelling: by client' }));
  assert.ok(cancelled && 'result' in cancelled);
  assert.equal(cancelled.result.isError, true);
  assert.equal((cancelled.result.structuredContent as { status: string }).status, 'cancelled');
  assert.match((cancelled.result.content[0] as { text: string }).text, /^Task was cancelled after 7 tokens \(by client\)\./);

  assert.equal(toolOutcome(record({ status: 'running' })), undefined);
});
