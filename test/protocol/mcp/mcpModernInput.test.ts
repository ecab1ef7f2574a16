// Client input on MCP 2026-07-28, driven by the raw client (modernClient.ts) against an in-process listener with the
// conformance fixture tools and their backend (as the conformance test entry point serves them): a task that asks its client
// (input_required, tasks/get inputRequests, tasks/update with partial answers, cancel while waiting), a task that
// ends with a protocol-level error (failed + JSON-RPC error in both eras and LMSP), and MRTR rounds before a task
// exists (InputRequiredResult, sealed requestState).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { RawSession, startInProcess, TOKENS, type InProcessServer } from './harness';
import { until } from '../../support/wait';
import { ModernClient, TASKS_EXT } from './modernClient';

const ELICIT = { elicitation: {}, extensions: { [TASKS_EXT]: {} } };

describe('MCP 2026-07-28: a task asking its client for input, protocol errors, MRTR', () => {
  let server: InProcessServer;
  let alice: ModernClient;
  let bob: ModernClient;
  /** Declares elicitation, as a client that can answer must. */
  const meta = { 'io.modelcontextprotocol/clientCapabilities': ELICIT };

  before(async () => {
    server = await startInProcess({ fixtures: true, door: { pollIntervalMs: 100 } });
    alice = new ModernClient(server.mcpUrl, TOKENS.alice);
    bob = new ModernClient(server.mcpUrl, TOKENS.bob);
  });
  after(async () => server?.close());

  async function get(taskId: string, client = alice): Promise<any> {
    const r = await client.request('tasks/get', { taskId }, { meta });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    return r.body.result;
  }

  async function update(taskId: string, inputResponses: Record<string, unknown>) {
    return alice.request('tasks/update', { taskId, inputResponses }, { meta });
  }

  const inputRequired = (taskId: string, keys: number) =>
    until(async () => {
      const t = await get(taskId);
      assert.ok(['working', 'input_required'].includes(t.status), `unexpected ${t.status}`);
      return t.status === 'input_required' && Object.keys(t.inputRequests).length === keys ? t : undefined;
    }, `${taskId} input_required`);

  const terminal = (taskId: string) =>
    until(async () => {
      const t = await get(taskId);
      return ['completed', 'failed', 'cancelled'].includes(t.status) ? t : undefined;
    }, `${taskId} to end`);

  test('confirm_delete: input_required with the elicitation; bad answers refused, unknown keys ignored; the answer resumes it', async () => {
    const created = await alice.result('tools/call', { name: 'confirm_delete', arguments: { filename: 'notes.txt' } });
    assert.equal(created.resultType, 'task');
    assert.equal('inputRequests' in created, false);
    const parked = await inputRequired(created.taskId, 1);
    const [key] = Object.keys(parked.inputRequests);
    assert.match(key, /^confirm\.\d+$/);
    const req = parked.inputRequests[key];
    assert.equal(req.method, 'elicitation/create');
    assert.match(req.params.message, /Delete notes\.txt\?/);
    assert.deepEqual(req.params.requestedSchema.required, ['confirm']);
    assert.equal(parked.resultType, 'complete');
    assert.equal('requestState' in parked, false);
    assert.ok(Number.isInteger(parked.pollIntervalMs));
    assert.match(parked.statusMessage, /waiting for input/);

    // A client that did not declare elicitation is not sent the request (MRTR rule); the status is the same.
    const noCaps = await alice.result('tasks/get', { taskId: created.taskId });
    assert.equal(noCaps.status, 'input_required');
    assert.deepEqual(noCaps.inputRequests, {});
    // Another principal cannot see or answer it.
    const foreign = await bob.request(
      'tasks/update',
      { taskId: created.taskId, inputResponses: { [key]: { action: 'accept', content: { confirm: true } } } },
      { meta },
    );
    assert.equal(foreign.body.error.code, -32602);

    const bad = await update(created.taskId, { [key]: { action: 'maybe' } });
    assert.equal(bad.status, 400);
    assert.equal(bad.body.error.code, -32602);
    assert.match(bad.body.error.message, /action/);
    const ignored = await update(created.taskId, { 'unknown-key': { ignored: true } });
    assert.equal(ignored.status, 200);
    assert.equal(ignored.body.result.resultType, 'complete');
    assert.equal((await get(created.taskId)).status, 'input_required', 'neither changed anything');

    const ack = await update(created.taskId, { [key]: { action: 'accept', content: { confirm: true } } });
    assert.equal(ack.status, 200);
    const { _meta, ...rest } = ack.body.result;
    assert.ok(_meta);
    assert.deepEqual(rest, { resultType: 'complete' }, 'the ack carries no task fields');
    // Durable before the ack: the next tasks/get no longer asks.
    assert.notEqual((await get(created.taskId)).status, 'input_required');
    const done = await terminal(created.taskId);
    assert.equal(done.status, 'completed');
    assert.equal(done.result.isError, false);
    assert.equal(done.result.content[0].text, 'Deleted notes.txt.');
    assert.equal('inputRequests' in done, false);
  });

  test('multi_input: two requests at once; a partial update keeps it input_required with only the other key', async () => {
    const created = await alice.result('tools/call', { name: 'multi_input', arguments: {} });
    const parked = await inputRequired(created.taskId, 2);
    const [first, second] = Object.keys(parked.inputRequests).sort();
    assert.match(first, /^first\.\d+$/);
    assert.match(second, /^second\.\d+$/);
    await update(created.taskId, { [first]: { action: 'accept', content: { name: 'one' } } });
    const partial = await get(created.taskId);
    assert.equal(partial.status, 'input_required');
    assert.deepEqual(Object.keys(partial.inputRequests), [second]);
    assert.match(partial.statusMessage, /1 of 2 requests still open/);
    // The LMSP door shows a task waiting for input as running.
    const lmsp = await fetch(`${server.url}/lmsp/v1/tasks/${created.taskId}`, { headers: { authorization: `Bearer ${TOKENS.alice}` } });
    assert.equal(((await lmsp.json()) as { status: string }).status, 'running');
    await update(created.taskId, { [second]: { action: 'decline' } });
    const done = await terminal(created.taskId);
    assert.equal(done.status, 'completed');
    assert.equal(done.result.content[0].text, 'Received first="one", second=decline.');
  });

  test('tasks/cancel while input_required: acknowledged, the task ends cancelled', async () => {
    const created = await alice.result('tools/call', { name: 'confirm_delete', arguments: { filename: 'keep.txt' } });
    await inputRequired(created.taskId, 1);
    const ack = await alice.request('tasks/cancel', { taskId: created.taskId }, { meta });
    assert.equal(ack.body.result.resultType, 'complete');
    const done = await terminal(created.taskId);
    assert.equal(done.status, 'cancelled');
    assert.equal(server.runtime.getTask(created.taskId)?.status, 'cancelled');
  });

  test('protocol_error_job: failed with the JSON-RPC error inlined (no result); legacy tasks/result gives that error; LMSP a failed task with its problem', async () => {
    const created = await alice.result('tools/call', { name: 'protocol_error_job', arguments: {} });
    const done = await terminal(created.taskId);
    assert.equal(done.status, 'failed');
    assert.deepEqual(done.error, { code: -32603, message: 'protocol_error_job: internal failure (conformance fixture)' });
    assert.equal('result' in done, false);
    assert.match(done.statusMessage, /request_error/);

    const legacy = new RawSession(server.mcpUrl, TOKENS.alice);
    await legacy.initialize();
    assert.equal((await legacy.call('tasks/get', { taskId: created.taskId })).result.status, 'failed');
    const result = await legacy.call('tasks/result', { taskId: created.taskId });
    assert.equal(result.error.code, -32603);
    // (The 2025-11-25 SDK transport prefixes every error message with "MCP error <code>: ", as for all its errors.)
    assert.match(result.error.message, /protocol_error_job: internal failure \(conformance fixture\)$/);
    assert.deepEqual(result.error.data._meta, { 'io.modelcontextprotocol/related-task': { taskId: created.taskId } });

    const lmsp = (await (
      await fetch(`${server.url}/lmsp/v1/tasks/${created.taskId}`, { headers: { authorization: `Bearer ${TOKENS.alice}` } })
    ).json()) as {
      status: string;
      error: Record<string, unknown>;
    };
    assert.equal(lmsp.status, 'failed');
    assert.equal(lmsp.error['code'], 'request_error');
    assert.equal(lmsp.error['detail'], 'protocol_error_job: internal failure (conformance fixture)');
    assert.equal('requestError' in lmsp.error, false, 'LMSP shows its own problem form');
  });

  test('failing_job stays a tool error: completed with isError (not failed)', async () => {
    const created = await alice.result('tools/call', { name: 'failing_job', arguments: {} });
    const done = await terminal(created.taskId);
    assert.equal(done.status, 'completed');
    assert.equal(done.result.isError, true);
  });

  test('test_tool_with_task: an MRTR round before the task; the requestState is sealed, bound to the caller, tamper-checked', async () => {
    const call = (client: ModernClient, extra: Record<string, unknown> = {}) =>
      client.request('tools/call', { name: 'test_tool_with_task', arguments: {}, ...extra }, { meta });
    const before = server.runtime.countTasks('alice').total;
    const r1 = (await call(alice)).body.result;
    assert.equal(r1.resultType, 'input_required');
    assert.equal('taskId' in r1, false);
    assert.equal(r1.inputRequests.user_name.method, 'elicitation/create');
    assert.equal(typeof r1.requestState, 'string');
    assert.equal(server.runtime.countTasks('alice').total, before, 'no task before the input is in');

    const answer = { user_name: { action: 'accept', content: { name: 'Alice' } } };
    const tampered = await call(alice, { inputResponses: answer, requestState: `${r1.requestState}x` });
    assert.equal(tampered.status, 400);
    assert.equal(tampered.body.error.code, -32602);
    assert.match(tampered.body.error.message, /requestState/);
    const stolen = await call(bob, { inputResponses: answer, requestState: r1.requestState });
    assert.equal(stolen.body.error.code, -32602, 'a state is bound to the principal it was issued to');
    const noState = (await call(alice, { inputResponses: answer })).body.result;
    assert.equal(noState.resultType, 'input_required', 'this tool takes answers only with its state');

    const r2 = (await call(alice, { inputResponses: answer, requestState: r1.requestState })).body.result;
    assert.equal(r2.resultType, 'task');
    assert.equal('requestState' in r2, false);
    assert.equal('inputRequests' in r2, false);
    const done = await terminal(r2.taskId);
    assert.equal(done.status, 'completed');
    assert.match(done.result.content[0].text, /Hello, Alice!/);
  });

  test('MRTR multi-round: each round has its own state; answers are carried to the end', async () => {
    const call = async (extra: Record<string, unknown> = {}) =>
      (await alice.request('tools/call', { name: 'test_input_required_result_multi_round', arguments: {}, ...extra }, { meta })).body.result;
    const r1 = await call();
    assert.deepEqual(Object.keys(r1.inputRequests), ['step1']);
    const r2 = await call({ inputResponses: { step1: { action: 'accept', content: { name: 'Ann' } } }, requestState: r1.requestState });
    assert.deepEqual(Object.keys(r2.inputRequests), ['step2']);
    assert.notEqual(r2.requestState, r1.requestState);
    const r3 = await call({ inputResponses: { step2: { action: 'accept', content: { color: 'green' } } }, requestState: r2.requestState });
    assert.equal(r3.resultType, 'complete');
    assert.equal(r3.content[0].text, 'Ann likes green');
  });
});
