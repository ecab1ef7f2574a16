// How a runtime task looks on the 2026-07-28 wire (tasks extension): status by runtime state, outcome inlined by
// status, and the era difference that matters — a tool result with isError is `completed` here (legacy: `failed`),
// `failed` carries only JSON-RPC errors.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { McpContext } from '../../../src/protocols/mcp/context';
import { modernTask } from '../../../src/protocols/mcp/modern/modernTasks';
import { mcpStatus } from '../../../src/protocols/mcp/mcpTaskView';
import { TASK_STATUSES, type TaskRecord } from '../../../src/runtime/task';

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
    ttlMs: 60_000.4,
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

const ctx = {
  runtime: { queueInfo: () => ({ position: 2, priority: 0, expectedStartAt: null, expectedWaitMs: null }) },
  view: { pollIntervalMs: 333.7 },
} as unknown as McpContext;
const restart = { type: 't', title: 'x', status: 503, code: 'server_restarted', detail: 'The server restarted.' };
const badModel = { type: 't', title: 'x', status: 400, code: 'model_not_found', detail: 'No model "nope".' };
const response = { output: [{ type: 'message', content: [{ type: 'output_text', text: 'hello' }] }] };

test('modern status for every runtime state; integer ttlMs and pollIntervalMs (the latter only while unfinished)', () => {
  const expected: Record<string, string> = {
    queued: 'working',
    loading: 'working',
    running: 'working',
    input_required: 'input_required',
    cancelling: 'cancelled',
    succeeded: 'completed',
    failed: 'completed',
    cancelled: 'cancelled',
  };
  for (const s of TASK_STATUSES) {
    const t = modernTask(ctx, record({ status: s, error: s === 'failed' ? restart : null, response: s === 'succeeded' ? response : null }), true);
    assert.equal(t.status, expected[s], s);
    assert.equal(t.ttlMs, 60_000);
    assert.equal(t.pollIntervalMs, t.status === 'working' || t.status === 'input_required' ? 334 : undefined, s);
    for (const legacy of ['ttl', 'pollInterval']) assert.equal(legacy in t, false);
  }
  assert.equal(modernTask(ctx, record({ status: 'queued' }), true).statusMessage, 'queued: 2nd');
  assert.deepEqual(modernTask(ctx, record({ status: 'input_required' }), true).inputRequests, {});
  assert.equal(modernTask(ctx, record({ ttlMs: null }), true).ttlMs, null);
});

test('outcome inlined by status: result on completed (isError too), error only on failed, nothing otherwise', () => {
  const ok = modernTask(ctx, record({ status: 'succeeded', response }), true);
  assert.equal(ok.result?.['isError'], false);
  assert.equal(ok.result?.['resultType'], 'complete', 'inlined as the tools/call would have answered it');
  assert.deepEqual((ok.result?.['content'] as unknown[])[0], { type: 'text', text: 'hello' });
  assert.equal(ok.error, undefined);

  const toolError = modernTask(ctx, record({ status: 'failed', error: restart }), true);
  assert.equal(mcpStatus('failed'), 'failed', 'the legacy era calls this one failed');
  assert.equal(toolError.status, 'completed');
  assert.equal(toolError.result?.['isError'], true);
  assert.match(toolError.statusMessage, /server_restarted/);

  const rpcError = modernTask(ctx, record({ status: 'failed', error: badModel }), true);
  assert.equal(rpcError.status, 'failed');
  assert.equal(rpcError.result, undefined);
  assert.equal(rpcError.error?.code, -32602);
  assert.equal(rpcError.error?.message, 'No model "nope".');

  const cancelled = modernTask(ctx, record({ status: 'cancelled' }), true);
  assert.deepEqual([cancelled.result, cancelled.error], [undefined, undefined]);
  const created = modernTask(ctx, record({ status: 'succeeded', response }), false);
  assert.equal(created.result, undefined, 'CreateTaskResult never inlines');
});

test('input_required inlines every open request by key, only those the requesting client can answer', () => {
  const inputRequests = {
    'confirm.1': { method: 'elicitation/create', params: { message: 'sure?', requestedSchema: { type: 'object', properties: {} } } },
    'q.1': { method: 'sampling/createMessage', params: { messages: [], maxTokens: 5 } },
  };
  const t = record({ status: 'input_required', inputRequests });
  assert.deepEqual(modernTask(ctx, t, true).inputRequests, inputRequests);
  const elicitOnly = { version: '2026-07-28', capabilities: { elicitation: {} } };
  assert.deepEqual(Object.keys(modernTask(ctx, t, true, elicitOnly).inputRequests ?? {}), ['confirm.1']);
  assert.deepEqual(modernTask(ctx, t, true, { version: '2026-07-28', capabilities: {} }).inputRequests, {});
  assert.equal(modernTask(ctx, t, false).inputRequests, undefined, 'CreateTaskResult never inlines');
});

test('a protocol-level error from the backend (request_error) is `failed` with exactly that JSON-RPC error', () => {
  const requestError = { code: -32603, message: 'internal failure', data: { where: 'fixture' } };
  const problem = { type: 't', title: 'Request failed', status: 502, code: 'request_error', detail: 'internal failure', requestError };
  const t = modernTask(ctx, record({ status: 'failed', error: problem }), true);
  assert.equal(t.status, 'failed');
  assert.deepEqual(t.error, requestError);
  assert.equal(t.result, undefined);
});
