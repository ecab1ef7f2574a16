// A task asking its client for input (runtime side of MCP input_required), with the real store: the backend calls
// requestInput, the task is input_required with its requests durable, provideInput answers (partly, then fully),
// and the backend continues with the answers. Also: cancel while waiting, a restart while waiting (per on_restart),
// replay of answered rounds on a new attempt, deadlines, concurrency, and a backend's protocol-level error.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  RequestError,
  type GenerateOptions,
  type GenerateRequest,
  type GenerateResult,
  type ModelBackend,
  type ModelInfo,
} from '../../../src/runtime/backend';
import { isRuntimeError } from '../../../src/runtime/errors';
import { TaskRuntime } from '../../../src/runtime/runtime';
import type { InputRequest, InputResponse, RestartPolicy, TaskEvent } from '../../../src/runtime/task';
import { taskReaches } from '../../support/wait';
import { tempDir } from './helpers';

type Script = (request: GenerateRequest, options: GenerateOptions) => Promise<GenerateResult>;

class ScriptedBackend implements ModelBackend {
  readonly name = 'scripted';
  supportsResume(): boolean {
    return false;
  }
  runs = 0;
  constructor(private readonly script: Script) {}
  listModels(): ModelInfo[] {
    return [{ id: 'm', source: 'scripted', state: 'loaded', maxContextLength: null, demo: false }];
  }
  resolveModel(model: string | undefined): string | undefined {
    return model === undefined || model === 'm' ? 'm' : undefined;
  }
  isLoaded(): boolean {
    return true;
  }
  async load(): Promise<void> {}
  generate(request: GenerateRequest, options: GenerateOptions): Promise<GenerateResult> {
    this.runs++;
    return this.script(request, options);
  }
  async dispose(): Promise<void> {}
}

const ask = (message: string): InputRequest => ({
  method: 'elicitation/create',
  params: { message, requestedSchema: { type: 'object', properties: { v: { type: 'string' } }, required: ['v'] } },
});
const accept = (v: string): InputResponse => ({ action: 'accept', content: { v } });
const said = (r: InputResponse | undefined) => String((r?.['content'] as { v?: string } | undefined)?.v ?? r?.['action']);

/** Asks `first` and `second` at once, then `third` alone; writes text before, between and after. */
const twoRounds: Script = async (_req, o) => {
  o.onText('before ', 1);
  const a = await o.requestInput!({ first: ask('First?'), second: ask('Second?') }, { message: 'two values' });
  o.onText(`got ${said(a.first)}+${said(a.second)} `, 1);
  const b = await o.requestInput!({ first: ask('Again?') });
  o.onText(`then ${said(b.first)}`, 1);
  return { finishReason: 'stop', inputTokens: 1, outputTokens: 3 };
};

async function open(dataDir: string, backend: ModelBackend, extra: Partial<Parameters<typeof TaskRuntime.open>[0]> = {}) {
  return TaskRuntime.open({ dataDir, backend, deltaFlushMs: 0, ...extra });
}

function create(rt: TaskRuntime, onRestart: RestartPolicy = 'fail', deadlineMs?: number) {
  return rt.createTask({ origin: 'mcp', principal: 'alice', onRestart, deadlineMs, input: { model: 'm', input: 'hi' } }).task;
}

const text = (events: TaskEvent[]) =>
  events
    .filter((e) => e.type === 'response.output_text.delta')
    .map((e) => e.data.delta)
    .join('');

const waiting = (rt: TaskRuntime, id: string, keys: string[]) =>
  taskReaches(
    rt,
    id,
    (t) => t.status === 'input_required' && JSON.stringify(Object.keys(t.inputRequests ?? {}).sort()) === JSON.stringify(keys),
    `${id} waiting for ${keys}`,
  );

test('running → input_required with the requests, partial answers keep it waiting, the last one resumes the run', async () => {
  const dataDir = tempDir();
  const rt = await open(dataDir, new ScriptedBackend(twoRounds));
  const task = create(rt);
  const parked = await waiting(rt, task.id, ['first.1', 'second.1']);
  assert.deepEqual(parked.inputRequests, { 'first.1': ask('First?'), 'second.1': ask('Second?') });
  assert.match(parked.statusMessage ?? '', /^waiting for input \(2 requests\): two values$/);
  // The text before the question is durable before the task says it waits; the status event is in the same batch.
  const events = rt.readEvents(task.id);
  assert.equal(text(events), 'before ');
  const last = events[events.length - 1];
  assert.equal(last.type, 'task_runtime:task.status');
  assert.equal((last.data.task as { status: string }).status, 'running', 'LMSP shows input_required as running');
  assert.equal(rt.getTask(task.id)?.status, 'input_required');

  // Another principal does not see it; an answer that is not an object is refused and nothing is recorded.
  assert.throws(
    () => rt.provideInput(task.id, { 'first.1': accept('x') }, 'bob'),
    (e) => isRuntimeError(e, 'task_not_found'),
  );
  assert.throws(
    () => rt.provideInput(task.id, { 'first.1': 12 }, 'alice'),
    (e) => isRuntimeError(e, 'invalid_request'),
  );
  assert.deepEqual(Object.keys(rt.getTask(task.id)!.inputRequests!), ['first.1', 'second.1']);

  // Unknown keys are ignored; a partial answer keeps the task input_required with only the open key.
  const partial = rt.provideInput(task.id, { 'first.1': accept('A'), 'nope.1': accept('ignored') }, 'alice');
  assert.equal(partial.status, 'input_required');
  assert.deepEqual(Object.keys(partial.inputRequests!), ['second.1']);
  assert.match(partial.statusMessage ?? '', /1 of 2 requests still open/);
  // Already answered: ignored, the answer stays what it was.
  rt.provideInput(task.id, { 'first.1': accept('changed') }, 'alice');

  const resumed = rt.provideInput(task.id, { 'second.1': accept('B') }, 'alice');
  assert.equal(resumed.status, 'running');
  assert.equal(resumed.inputRequests, null);
  // Second round: the same name gets a new key (keys are never reused in a task's life).
  await waiting(rt, task.id, ['first.2']);
  rt.provideInput(task.id, { 'first.2': accept('C') }, 'alice');
  const done = await rt.waitForTerminal(task.id);
  assert.equal(done.status, 'succeeded');
  assert.equal(text(rt.readEvents(task.id)), 'before got A+B then C');
  assert.equal(rt.provideInput(task.id, { 'first.2': accept('late') }, 'alice').status, 'succeeded', 'a finished task ignores answers');
  await rt.close();
});

test('cancel from input_required: the waiting backend call is aborted and the task ends cancelled with its text', async () => {
  let aborted = false;
  const backend = new ScriptedBackend(async (_req, o) => {
    o.onText('partial', 1);
    try {
      await o.requestInput!({ q: ask('Anything?') });
    } catch (e) {
      aborted = (e as Error).name === 'AbortError';
      throw e;
    }
    return { finishReason: 'stop', inputTokens: 1, outputTokens: 1 };
  });
  const rt = await open(tempDir(), backend);
  const task = create(rt);
  await waiting(rt, task.id, ['q.1']);
  assert.equal(rt.cancelTask(task.id, 'alice', 'no answer').status, 'cancelling');
  const done = await rt.waitForTerminal(task.id);
  assert.equal(done.status, 'cancelled');
  assert.equal(done.inputRequests, null);
  assert.equal(aborted, true);
  assert.equal((done.response as { output: Array<{ content: Array<{ text: string }> }> }).output[0].content[0].text, 'partial');
  await rt.close();
});

test('restart while waiting, on_restart "retry": still input_required with the same requests; answering runs a new attempt that replays the answered rounds', async () => {
  const dataDir = tempDir();
  const first = new ScriptedBackend(twoRounds);
  let rt = await open(dataDir, first);
  const task = create(rt, 'retry');
  await waiting(rt, task.id, ['first.1', 'second.1']);
  rt.provideInput(task.id, { 'first.1': accept('A'), 'second.1': accept('B') }, 'alice');
  const before = await waiting(rt, task.id, ['first.2']);
  await rt.close();

  const second = new ScriptedBackend(twoRounds);
  rt = await open(dataDir, second);
  assert.equal(rt.recovery.waitingForInput, 1);
  const after = rt.getTask(task.id)!;
  assert.equal(after.status, 'input_required');
  assert.deepEqual(after.inputRequests, before.inputRequests, 'the pending request survives the restart as it was');
  assert.equal(after.attempt, 1);
  assert.equal(second.runs, 0, 'nothing runs until the client answers');

  rt.provideInput(task.id, { 'first.2': accept('C') }, 'alice');
  const done = await rt.waitForTerminal(task.id);
  assert.equal(done.status, 'succeeded');
  assert.equal(done.attempt, 2);
  assert.equal(second.runs, 1);
  // The new attempt got rounds 1 and 2 from the store, without asking again (no round 3).
  const events = rt.readEvents(task.id);
  const attempt2 = events.slice(events.map((e) => e.type).lastIndexOf('response.created'));
  assert.equal(text(attempt2), 'before got A+B then C');
  assert.ok(
    !attempt2.some(
      (e) => e.type === 'task_runtime:task.status' && /waiting for input/.test(String((e.data.task as { status_message: string }).status_message)),
    ),
  );
  await rt.close();
});

test('restart while waiting, on_restart "fail": the task fails with server_restarted', async () => {
  const dataDir = tempDir();
  let rt = await open(dataDir, new ScriptedBackend(twoRounds));
  const task = create(rt, 'fail');
  await waiting(rt, task.id, ['first.1', 'second.1']);
  await rt.close();
  rt = await open(dataDir, new ScriptedBackend(twoRounds));
  const t = rt.getTask(task.id)!;
  assert.equal(t.status, 'failed');
  assert.equal(t.error?.code, 'server_restarted');
  assert.match(t.error?.detail ?? '', /waited for input/);
  assert.equal(t.inputRequests, null);
  await rt.close();
});

test('a task waiting for input after a restart can be cancelled (nothing runs it) and its deadline still applies', async () => {
  const dataDir = tempDir();
  let rt = await open(dataDir, new ScriptedBackend(twoRounds));
  const cancelled = create(rt, 'retry');
  const late = create(rt, 'retry', 60_000);
  await waiting(rt, cancelled.id, ['first.1', 'second.1']);
  await waiting(rt, late.id, ['first.1', 'second.1']);
  await rt.close();

  // Reopened with a clock past the deadline: the parked task fails when its deadline timer fires.
  rt = await open(dataDir, new ScriptedBackend(twoRounds), { now: () => Date.now() + 120_000 });
  rt.cancelTask(cancelled.id, 'alice');
  // Nothing runs it, so the stop is finished at once.
  assert.equal(rt.getTask(cancelled.id)?.status, 'cancelled');
  assert.equal((rt.getTask(cancelled.id)!.response as { output: Array<{ content: Array<{ text: string }> }> }).output[0].content[0].text, 'before ');
  const failed = await rt.waitForTerminal(late.id);
  assert.equal(failed.status, 'failed');
  assert.equal(failed.error?.code, 'deadline_exceeded');
  await rt.close();
});

test('a task waiting for input holds no concurrency slot: the next task runs meanwhile', async () => {
  const backend = new ScriptedBackend(async (req, o) => {
    if (req.messages[0].content === 'ask') await o.requestInput!({ q: ask('?') });
    o.onText('ok', 1);
    return { finishReason: 'stop', inputTokens: 1, outputTokens: 1 };
  });
  const rt = await open(tempDir(), backend, { limits: { maxConcurrentTasks: 1 } });
  const asker = rt.createTask({ origin: 'mcp', principal: 'alice', input: { model: 'm', input: 'ask' } }).task;
  await waiting(rt, asker.id, ['q.1']);
  const other = rt.createTask({ origin: 'mcp', principal: 'alice', input: { model: 'm', input: 'other' } }).task;
  assert.equal((await rt.waitForTerminal(other.id)).status, 'succeeded');
  rt.provideInput(asker.id, { 'q.1': accept('x') }, 'alice');
  assert.equal((await rt.waitForTerminal(asker.id)).status, 'succeeded');
  await rt.close();
});

test('a backend RequestError fails the task with request_error and keeps the protocol-level error, across a restart', async () => {
  const dataDir = tempDir();
  let rt = await open(dataDir, new ScriptedBackend(async () => Promise.reject(new RequestError(-32603, 'boom at /home/alice/x', { retry: false }))));
  const task = create(rt);
  const done = await rt.waitForTerminal(task.id);
  assert.equal(done.status, 'failed');
  assert.equal(done.error?.code, 'request_error');
  assert.equal(done.error?.detail, 'boom at <path>');
  assert.deepEqual(done.error?.requestError, { code: -32603, message: 'boom at <path>', data: { retry: false } });
  await rt.close();
  rt = await open(dataDir, new ScriptedBackend(async () => assert.fail('not run again')));
  assert.deepEqual(rt.getTask(task.id)?.error?.requestError, { code: -32603, message: 'boom at <path>', data: { retry: false } });
  await rt.close();
});

test('requestInput refuses malformed requests (a backend programming error fails the task)', async () => {
  const rt = await open(
    tempDir(),
    new ScriptedBackend(async (_req, o) => {
      await o.requestInput!({ 'bad.name': ask('?') });
      return { finishReason: 'stop', inputTokens: 1, outputTokens: 0 };
    }),
  );
  const done = await rt.waitForTerminal(create(rt).id);
  assert.equal(done.status, 'failed');
  assert.match(done.error?.detail ?? '', /input request name "bad\.name"/);
  await rt.close();
});
