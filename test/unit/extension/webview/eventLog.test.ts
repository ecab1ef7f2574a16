// The webview's state machine: snapshot, batched events, dedupe, gap detection, retry reset, text only.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { applyEvents, applySnapshot, initialState, mergeTask } from '../../../../src/extension/webview/eventLog';
import { isPanelState, parseWebviewMessage, type TaskView, type WireEvent } from '../../../../src/extension/webview/protocol';

const task: TaskView = {
  id: 'task_1',
  title: 'hello',
  status: 'running',
  statusMessage: null,
  origin: 'editor',
  model: 'tiny',
  createdAt: 1000,
  updatedAt: 1000,
  attempt: 1,
  outputTokens: 0,
  usage: null,
  error: null,
};

const ev = (seq: number, type: string, data: Record<string, unknown> = {}): WireEvent => ({ seq, type, data });
const delta = (seq: number, text: string) => ev(seq, 'response.output_text.delta', { delta: text });

describe('webview event log', () => {
  it('applies a snapshot then incremental batches, dropping duplicates', () => {
    let state = applySnapshot('task_1', { type: 'snapshot', task, events: [], truncated: false, lastSeq: -1 });
    let r = applyEvents(state, [ev(0, 'response.created'), ev(1, 'response.in_progress'), delta(2, 'Hel')]);
    assert.equal(r.gap, false);
    assert.equal(r.applied, 3);
    state = r.state;
    r = applyEvents(state, [delta(2, 'Hel'), delta(3, 'lo'), delta(3, 'lo')]);
    assert.equal(r.applied, 1);
    assert.equal(r.state.text, 'Hello');
    assert.equal(r.state.lastSeq, 3);
    assert.deepEqual(
      r.state.timeline.map((t) => t.kind),
      ['created', 'running'],
    );
  });

  it('reports a gap instead of applying events past it', () => {
    const state = applyEvents(initialState('task_1'), [ev(0, 'response.created'), delta(1, 'a')]).state;
    const r = applyEvents(state, [delta(3, 'c'), delta(4, 'd')]);
    assert.equal(r.gap, true);
    assert.equal(r.applied, 0);
    assert.equal(r.state.text, 'a');
    assert.equal(r.state.lastSeq, 1);
    // A fresh state must start at sequence 0.
    assert.equal(applyEvents(initialState('task_1'), [delta(5, 'x')]).gap, true);
  });

  it('drops partial output when a retry announces a new response.created', () => {
    const r = applyEvents(initialState('task_1'), [
      ev(0, 'response.created'),
      delta(1, 'partial'),
      ev(2, 'task_runtime:task.status', { task: { status: 'queued' } }),
      ev(3, 'response.created'),
      delta(4, 'fresh'),
    ]);
    assert.equal(r.state.text, 'fresh');
    assert.deepEqual(
      r.state.timeline.map((t) => t.kind),
      ['created', 'queued', 'retry'],
    );
  });

  it('shows one model load as one "loading" entry: the status event and the progress events merge', () => {
    const r = applyEvents(initialState('task_1'), [
      ev(0, 'response.created'),
      ev(1, 'response.queued'),
      ev(2, 'task_runtime:task.status', { task: { status: 'loading', status_message: 'loading model' } }),
      ev(3, 'task_runtime:model.loading', { model: 'tiny', progress: 0 }),
      ev(4, 'task_runtime:model.loading', { model: 'tiny', progress: 0.5 }),
      ev(5, 'task_runtime:model.loading', { model: 'tiny', progress: 1 }),
      ev(6, 'response.in_progress'),
    ]);
    assert.deepEqual(
      r.state.timeline.map((t) => t.kind),
      ['created', 'queued', 'loading', 'running'],
    );
    const loading = r.state.timeline.find((t) => t.kind === 'loading')!;
    assert.equal(loading.seq, 2, 'the entry keeps the sequence where the phase began');
    assert.equal(loading.detail, '100%', 'and shows the latest progress');
  });

  it('a queued task’s moving place updates its "queued" entry', () => {
    const events = [
      ev(0, 'response.created'),
      ev(1, 'response.queued'),
      { ...ev(2, 'task_runtime:task.queue', { position: 3, priority: 0, expected_start_at: null, expected_start_at_ms: null }), at: 5_000 },
      { ...ev(3, 'task_runtime:task.queue', { position: 1, priority: 0, expected_start_at: 17, expected_start_at_ms: 17_000 }), at: 8_000 },
    ];
    const { state } = applyEvents(initialState('task_1'), events);
    const queued = state.timeline.filter((t) => t.kind === 'queued');
    assert.equal(queued.length, 1, 'one entry, its detail updated');
    assert.equal(queued[0].detail, '#1 in queue, about 9 s to start');
  });

  it('records usage and problems from terminal events, ignoring unknown ones', () => {
    const r = applyEvents(initialState('task_1'), [
      ev(0, 'response.created'),
      ev(1, 'acme:unknown', { x: 1 }),
      ev(2, 'error', { error: { code: 'server_error', message: 'boom' } }),
      ev(3, 'response.failed', { response: { usage: { input_tokens: 3, output_tokens: 4, total_tokens: 7 } } }),
    ]);
    assert.equal(r.gap, false);
    assert.deepEqual(r.state.usage, { input_tokens: 3, output_tokens: 4, total_tokens: 7 });
    assert.deepEqual(r.state.problem, { code: 'server_error', message: 'boom' });
    assert.equal(r.state.timeline.at(-1)!.kind, 'failed');
  });

  it('starts a truncated snapshot from the stored text and the given sequence', () => {
    const state = applySnapshot('task_1', {
      type: 'snapshot',
      task: { ...task, status: 'succeeded' },
      events: [],
      text: 'final text',
      truncated: true,
      lastSeq: 41,
    });
    assert.equal(state.text, 'final text');
    assert.equal(state.lastSeq, 41);
    assert.equal(applyEvents(state, [ev(42, 'response.completed', {})]).gap, false);
  });

  it('keeps the newer task view', () => {
    const state = mergeTask({ ...initialState('task_1'), task: { ...task, updatedAt: 5000 } }, { ...task, updatedAt: 4000, status: 'queued' });
    assert.equal(state.task!.status, 'running');
    const newer = mergeTask(state, { ...task, updatedAt: 6000, status: 'succeeded' });
    assert.equal(newer.task!.status, 'succeeded');
  });
});

describe('webview message validation', () => {
  it('accepts well-formed messages and rejects the rest', () => {
    assert.deepEqual(parseWebviewMessage({ type: 'ready', version: 1, lastSeq: -1 }), { type: 'ready', version: 1, lastSeq: -1 });
    assert.deepEqual(parseWebviewMessage({ type: 'action', action: 'cancel' }), { type: 'action', action: 'cancel' });
    assert.equal(parseWebviewMessage({ type: 'action', action: 'rm -rf' }), undefined);
    assert.equal(parseWebviewMessage({ type: 'ready', version: 1, lastSeq: 1.5 }), undefined);
    assert.equal(parseWebviewMessage({ type: 'ready', version: 1, lastSeq: -7 }), undefined);
    assert.equal(parseWebviewMessage('ready'), undefined);
    assert.equal(parseWebviewMessage({ type: 'eval' }), undefined);
  });

  it('recognises saved panel state', () => {
    assert.equal(isPanelState(initialState('task_1')), true);
    assert.equal(isPanelState({ taskId: 1 }), false);
  });
});
