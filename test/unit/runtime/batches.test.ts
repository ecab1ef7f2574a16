// Batch jobs on a real runtime and store with scripted generations (runtime/batches; docs/batches.md): lines run as
// lowest-priority tasks of the batch's principal, at most two per slot of the model unfinished at once; an interactive
// task of the same principal starts before the batch's next line; malformed lines are reported per line and never
// fail the batch; a restart mid-batch runs no finished line again and the interrupted one once; cancel and the
// completion window end the batch with what finished; files are each principal's own; limits are named.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { TaskRuntime } from '../../../src/runtime/runtime';
import { isRuntimeError } from '../../../src/runtime/errors';
import { BATCH_LIMITS, type BatchRecord } from '../../../src/runtime/batches/types';
import { OPENAI_BATCH_ENDPOINTS } from '../../../src/protocols/openai/batchEndpoints';
import { Gate, ScriptedBackend, says } from '../../fixtures/scriptedBackend';
import { ManualClock } from '../../support/clock';
import { waitFor } from '../../support/wait';
import { tempDir } from './helpers';

const P = 'alice';

function open(dir: string, backend: ScriptedBackend, extra: { now?: () => number; maxConcurrentTasks?: number } = {}): Promise<TaskRuntime> {
  return TaskRuntime.open({
    dataDir: dir,
    backend,
    deltaFlushMs: 0,
    batchEndpoints: OPENAI_BATCH_ENDPOINTS,
    limits: { maxConcurrentTasks: extra.maxConcurrentTasks ?? 1 },
    ...(extra.now && { now: extra.now }),
  });
}

/** A /v1/responses line whose prompt names it. */
const line = (id: string, extra: Record<string, unknown> = {}) =>
  JSON.stringify({ custom_id: id, method: 'POST', url: '/v1/responses', body: { model: 'm', input: `line ${id}`, ...extra } });

function upload(rt: TaskRuntime, lines: string[], principal = P) {
  return rt.files.create(principal, 'batch', 'in.jsonl', Buffer.from(lines.join('\n') + '\n'));
}

const FINAL = ['completed', 'cancelled', 'expired', 'failed'];

async function finished(rt: TaskRuntime, id: string): Promise<BatchRecord> {
  await waitFor(() => FINAL.includes(rt.batches.get(id, P)?.status ?? ''), `batch ${id} ends`);
  return rt.batches.get(id, P)!;
}

function jsonl(rt: TaskRuntime, fileId: string | null): any[] {
  if (!fileId) return [];
  return rt.files
    .content(fileId, P)
    .toString('utf8')
    .split('\n')
    .filter((l) => l)
    .map((l) => JSON.parse(l));
}

/** The prompt text of each generation, in start order. */
const prompts = (b: ScriptedBackend) => b.requests.map((r) => r.messages.map((m) => m.content).join(' '));

test('lines run as tasks in order; output and error files in OpenAI format; malformed lines per line', async () => {
  const backend = new ScriptedBackend(says('a', 'b'));
  const rt = await open(tempDir(), backend);
  const file = upload(rt, [
    line('one'),
    '{not json',
    line('two'),
    JSON.stringify({ custom_id: 'one', method: 'POST', url: '/v1/responses', body: { input: 'dup' } }),
    JSON.stringify({ custom_id: 'wrong-url', method: 'POST', url: '/v1/embeddings', body: { input: 'x' } }),
    line('bad-body', { bogus: true }),
    line('streamed', { stream: true }),
    '',
    line('three'),
  ]);
  const created = rt.batches.create({ principal: P, inputFileId: file.id, endpoint: '/v1/responses', completionWindow: '24h' });
  assert.equal(created.status, 'in_progress');
  assert.equal(created.counts.total, 8, 'blank lines are not requests');
  const done = await finished(rt, created.id);
  assert.equal(done.status, 'completed');
  assert.deepEqual(done.counts, { total: 8, completed: 3, failed: 5 });
  assert.ok(done.moments.completed_at && done.moments.finalizing_at);
  assert.deepEqual(prompts(backend), ['line one', 'line two', 'line three']);
  const out = jsonl(rt, done.outputFileId);
  assert.deepEqual(
    out.map((o) => [
      o.custom_id,
      o.response.status_code,
      o.response.body.object,
      o.response.body.status,
      o.response.body.output_text ?? o.response.body.output[0].content[0].text,
    ]),
    [
      ['one', 200, 'response', 'completed', 'ab'],
      ['two', 200, 'response', 'completed', 'ab'],
      ['three', 200, 'response', 'completed', 'ab'],
    ],
  );
  assert.ok(out.every((o) => /^batch_req_/.test(o.id) && o.error === null));
  const err = jsonl(rt, done.errorFileId);
  assert.deepEqual(
    err.map((e) => [e.custom_id, e.error?.code ?? e.response.body.error.code, e.error?.line ?? null, e.response?.body.error.param ?? null]),
    [
      [null, 'invalid_json', 2, null],
      ['one', 'duplicate_custom_id', 4, null],
      ['wrong-url', 'mismatched_url', 5, null],
      ['bad-body', 'invalid_request', null, 'bogus'],
      ['streamed', 'invalid_request', null, 'stream'],
    ],
  );
  assert.equal(done.usage.outputTokens, 6);
  // Its tasks are gone once recorded; the batch's rows of lines too.
  await waitFor(() => rt.listTasks({}).tasks.length === 0, 'item tasks deleted');
  await rt.close();
});

test('at most two lines per slot unfinished (one slot here); an interactive task of the same principal starts before the next line', async () => {
  const gate = new Gate();
  const backend = new ScriptedBackend(gate.script);
  const rt = await open(tempDir(), backend);
  const file = upload(
    rt,
    ['l1', 'l2', 'l3', 'l4'].map((id) => line(id)),
  );
  const batch = rt.batches.create({ principal: P, inputFileId: file.id, endpoint: '/v1/responses', completionWindow: '24h' });
  await gate.started(1);
  await waitFor(() => rt.listTasks({}).tasks.length === 2, 'one running, one queued');
  const items = rt.listTasks({}).tasks;
  assert.ok(
    items.every((t) => t.priority === -10 && t.principal === P),
    'lowest priority, the batch principal',
  );
  const interactive = rt.createTask({ origin: 'lmsp', principal: P, input: { model: 'm', input: 'interactive' } }).task;
  gate.release(1);
  await gate.started(2);
  assert.equal(prompts(backend)[1], 'interactive', 'the interactive task passed the queued line');
  assert.ok(rt.listTasks({}).tasks.filter((t) => t.id !== interactive.id && t.status !== 'succeeded').length <= 2);
  for (let n = 3; n <= 5; n++) {
    gate.release();
    await gate.started(n);
  }
  gate.release();
  const done = await finished(rt, batch.id);
  assert.deepEqual(done.counts, { total: 4, completed: 4, failed: 0 });
  assert.deepEqual(prompts(backend), ['line l1', 'interactive', 'line l2', 'line l3', 'line l4']);
  await rt.close();
});

test('a restart mid-batch runs no finished line again and the interrupted line once', async () => {
  const dir = tempDir();
  const gate = new Gate();
  const first = new ScriptedBackend(gate.script);
  let rt = await open(dir, first);
  const file = upload(
    rt,
    ['a', 'b', 'c', 'd'].map((id) => line(id)),
  );
  const batch = rt.batches.create({ principal: P, inputFileId: file.id, endpoint: '/v1/responses', completionWindow: '24h' });
  await gate.started(1);
  gate.release(1);
  await gate.started(2);
  gate.release(1);
  await gate.started(3); // c runs, d is queued
  await waitFor(() => rt.batches.get(batch.id, P)?.counts.completed === 2, 'a and b recorded');
  await rt.close(); // c is stopped mid-run, d still queued: both unfinished tasks, retried after the restart
  const second = new ScriptedBackend(says('z'));
  rt = await open(dir, second);
  const done = await finished(rt, batch.id);
  assert.deepEqual(done.counts, { total: 4, completed: 4, failed: 0 });
  assert.deepEqual(prompts(second).sort(), ['line c', 'line d'], 'finished lines are not run again; each interrupted one once');
  assert.deepEqual(
    jsonl(rt, done.outputFileId).map((o) => o.custom_id),
    ['a', 'b', 'c', 'd'],
  );
  await rt.close();
});

test('cancel: the running and the queued line are cancelled, the rest never run; output keeps what finished', async () => {
  const gate = new Gate();
  const backend = new ScriptedBackend(gate.script);
  const rt = await open(tempDir(), backend);
  const file = upload(
    rt,
    ['x1', 'x2', 'x3', 'x4'].map((id) => line(id)),
  );
  const batch = rt.batches.create({ principal: P, inputFileId: file.id, endpoint: '/v1/responses', completionWindow: '24h' });
  await gate.started(1);
  gate.release(1);
  await gate.started(2);
  const cancelling = rt.batches.cancel(batch.id, P);
  assert.equal(cancelling.status, 'cancelling');
  const done = await finished(rt, batch.id);
  assert.equal(done.status, 'cancelled');
  assert.equal(backend.runs, 2);
  assert.deepEqual(done.counts, { total: 4, completed: 1, failed: 3 });
  assert.deepEqual(
    jsonl(rt, done.outputFileId).map((o) => o.custom_id),
    ['x1'],
  );
  const err = jsonl(rt, done.errorFileId);
  assert.deepEqual(
    err.map((e) => [e.custom_id, e.error?.code ?? e.response.body.error.code]),
    [
      ['x2', 'task_cancelled'],
      ['x3', 'task_cancelled'], // queued as a task (two per slot): cancelled before it started
      ['x4', 'batch_cancelled'],
    ],
  );
  assert.equal(rt.batches.cancel(batch.id, P).status, 'cancelled', 'a repeat returns it as it is');
  await rt.close();
});

test('past its completion window a batch expires with what finished', async () => {
  const clock = new ManualClock(1_800_000_000_000);
  const gate = new Gate();
  const rt = await open(tempDir(), new ScriptedBackend(gate.script), { now: clock.now });
  const file = upload(
    rt,
    ['e1', 'e2', 'e3'].map((id) => line(id)),
  );
  const batch = rt.batches.create({ principal: P, inputFileId: file.id, endpoint: '/v1/responses', completionWindow: '24h' });
  assert.equal(batch.expiresAt, clock.now() + 24 * 3_600_000);
  await gate.started(1);
  clock.advance(24 * 3_600_000);
  gate.release(1);
  const done = await finished(rt, batch.id);
  assert.equal(done.status, 'expired');
  assert.ok(done.moments.expired_at);
  const err = jsonl(rt, done.errorFileId);
  assert.ok(err.some((e) => e.error?.code === 'batch_expired'));
  await rt.close();
});

test('files and batches are their principal own; bad creates are refused naming the field or limit', async () => {
  const rt = await open(tempDir(), new ScriptedBackend(says('a')));
  const file = upload(rt, [line('only')]);
  assert.equal(rt.files.get(file.id, 'bob'), undefined);
  assert.equal(rt.files.list({ principal: 'bob', limit: 10, order: 'desc' }).files.length, 0);
  assert.throws(
    () => rt.files.content(file.id, 'bob'),
    (e: unknown) => isRuntimeError(e, 'not_found'),
  );
  const create = (over: Partial<Parameters<typeof rt.batches.create>[0]>) =>
    rt.batches.create({ principal: P, inputFileId: file.id, endpoint: '/v1/responses', completionWindow: '24h', ...over });
  assert.throws(
    () => create({ principal: 'bob' }),
    (e: unknown) => isRuntimeError(e, 'not_found') && e.param === 'input_file_id',
  );
  assert.throws(
    () => create({ endpoint: '/v1/completions' }),
    (e: unknown) => isRuntimeError(e, 'invalid_request') && e.param === 'endpoint',
  );
  assert.throws(
    () => create({ completionWindow: '1h' }),
    (e: unknown) => isRuntimeError(e, 'invalid_request') && e.param === 'completion_window',
  );
  const empty = rt.files.create(P, 'batch', 'empty.jsonl', Buffer.from('\n\n'));
  assert.throws(
    () => create({ inputFileId: empty.id }),
    (e: unknown) => isRuntimeError(e, 'invalid_request') && /no request lines/.test(e.message),
  );
  const many = rt.files.create(P, 'batch', 'many.jsonl', Buffer.from('{}\n'.repeat(BATCH_LIMITS.maxLines + 1)));
  assert.throws(
    () => create({ inputFileId: many.id }),
    (e: unknown) => isRuntimeError(e, 'invalid_request') && e.limit?.name === 'max_batch_lines' && e.param === 'input_file_id',
  );
  assert.throws(
    () => rt.files.create(P, 'batch', 'big', Buffer.alloc(BATCH_LIMITS.maxFileBytes + 1)),
    (e: unknown) => isRuntimeError(e, 'payload_too_large') && e.limit?.name === 'max_file_bytes',
  );
  const batch = create({});
  assert.throws(
    () => rt.files.delete(file.id, P),
    (e: unknown) => isRuntimeError(e, 'invalid_request') && /unfinished batch/.test(e.message),
  );
  assert.equal(rt.batches.get(batch.id, 'bob'), undefined);
  assert.throws(
    () => rt.batches.cancel(batch.id, 'bob'),
    (e: unknown) => isRuntimeError(e, 'not_found'),
  );
  await finished(rt, batch.id);
  rt.files.delete(file.id, P);
  assert.equal(rt.files.get(file.id, P), undefined);
  await rt.close();
});

test('bytes written without a record (a crash before the row) are removed at the next open', async () => {
  const dir = tempDir();
  let rt = await open(dir, new ScriptedBackend(says('a')));
  const kept = upload(rt, [line('k')]);
  await rt.close();
  fs.writeFileSync(path.join(dir, 'files', 'file-orphan'), 'left behind');
  fs.writeFileSync(path.join(dir, 'files', `${kept.id}.tmp`), 'half written');
  rt = await open(dir, new ScriptedBackend(says('a')));
  assert.deepEqual(fs.readdirSync(path.join(dir, 'files')), [kept.id]);
  assert.equal(rt.files.content(kept.id, P).toString('utf8'), line('k') + '\n');
  await rt.close();
});
