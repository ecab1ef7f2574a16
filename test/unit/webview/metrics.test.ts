// The events panel's timings and speeds, computed by its reducer (eventLog.ts) and metrics.ts from an event stream
// with the store's times: a recorded stream with known times (exact figures), a retried and a resumed task (one
// set of figures per attempt), tool calls and reasoning items, and the events a real task on the real tiny model
// stores (figures consistent with its usage, and the same picture when the panel is rebuilt from stored events).
import assert from 'node:assert/strict';
import { after, describe, it, test } from 'node:test';
import { LlamaBackend } from '../../../src/backends/llama/llamaBackend';
import { TaskRuntime } from '../../../src/runtime/runtime';
import { applyEvents, initialState } from '../../../src/extension/webview/eventLog';
import { attemptMetrics, speedSeries, tokensAt } from '../../../webview-ui/src/metrics';
import type { WireEvent } from '../../../src/extension/webview/protocol';
import { testModelPath } from '../../fixtures/testModel';
import { prompt, tempDir } from '../runtime/helpers';

const T0 = 1_700_000_000_000;
let seq = 0;
const ev = (ms: number, type: string, data: Record<string, unknown> = {}): WireEvent => ({ seq: seq++, type, data, at: T0 + ms });
const status = (ms: number, s: string, attempt = 1) => ev(ms, 'task_runtime:task.status', { task: { status: s, attempt } });
const delta = (ms: number, text: string) => ev(ms, 'response.output_text.delta', { delta: text });
const completed = (ms: number, input: number, output: number, cached?: number) =>
  ev(ms, 'response.completed', {
    response: {
      status: 'completed',
      usage: {
        input_tokens: input,
        output_tokens: output,
        total_tokens: input + output,
        ...(cached !== undefined ? { input_tokens_details: { cached_tokens: cached } } : {}),
      },
      output: [],
    },
  });

/** created 0, queued 0, loading 100, running 1300, first token 1600, 10 deltas of 8 chars every 100 ms, done 2600. */
function recorded(): WireEvent[] {
  seq = 0;
  const events = [
    ev(0, 'response.created'),
    ev(0, 'response.queued'),
    status(100, 'loading'),
    ev(400, 'task_runtime:model.loading', { progress: 0.5 }),
    ev(1300, 'response.in_progress'),
  ];
  for (let i = 0; i < 10; i++) events.push(delta(1600 + i * 100, 'abcdefgh'));
  events.push(ev(2500, 'response.output_text.done', { text: 'abcdefgh'.repeat(10) }), completed(2600, 600, 40, 200));
  return events;
}

describe('webview metrics from a recorded stream', () => {
  it('gives each phase its duration and the first token its own timeline entry', () => {
    const { state, gap } = applyEvents(initialState('task_1'), recorded());
    assert.equal(gap, false);
    assert.deepEqual(
      state.timeline.map((t) => t.kind),
      ['created', 'queued', 'loading', 'running', 'first_token', 'succeeded'],
    );
    assert.deepEqual(
      state.timeline.map((t) => (t.at ?? 0) - T0),
      [0, 0, 100, 1300, 1600, 2600],
    );
    const [a] = state.attempts!;
    const m = attemptMetrics(a!, T0 + 99_999, false);
    assert.equal(m.queuedMs, 100);
    assert.equal(m.loadingMs, 1200);
    assert.equal(m.firstTokenMs, 300);
    assert.equal(m.runningMs, 1300);
    assert.equal(m.totalMs, 2600);
    assert.equal(state.usage?.cached_tokens, 200);
    assert.equal(m.cachedTokens, 200);
  });

  it('computes generation speed from the token total and prompt speed from the uncached input', () => {
    const { state } = applyEvents(initialState('task_1'), recorded());
    const m = attemptMetrics(state.attempts![0]!, T0 + 99_999, false);
    // 40 tokens over 80 chars: 2 chars/token; the first delta's 4 tokens arrive at t=0, 36 more over 900 ms.
    assert.equal(m.exact, false);
    assert.equal(m.charsPerToken, 2);
    assert.equal(m.tokens, 40);
    assert.ok(Math.abs(m.generationTps! - 40) < 1e-9, `generation ${m.generationTps}`);
    // (600 - 200 cached) prompt tokens in the 300 ms to the first token.
    assert.ok(Math.abs(m.promptTps! - 400 / 0.3) < 1e-6, `prompt ${m.promptTps}`);
    assert.equal(m.liveTps, undefined, 'no live figure for a finished attempt');
  });

  it('charts tokens/s in bars that add up to the tokens generated', () => {
    const { state } = applyEvents(initialState('task_1'), recorded());
    const a = state.attempts![0]!;
    const series = speedSeries(a, T0 + 99_999, false);
    assert.ok(series.length >= 3 && series.length <= 60, `bars: ${series.length}`);
    const width = series.length > 1 ? series[1]![0] - series[0]![0] : 0.9;
    const lastWidth = 0.9 - series[series.length - 1]![0];
    const total = series.reduce((sum, [, v], i) => sum + v * (i === series.length - 1 ? lastWidth : width), 0);
    assert.ok(Math.abs(total - 40) < 1e-6, `the bars hold ${total} tokens`);
    assert.ok(series.every(([, v]) => v >= 0));
  });

  it('shows a live moving-window speed while the attempt runs and lets it fall when tokens stop', () => {
    const events = recorded().slice(0, 12); // up to the delta at 2200 ms: still running
    const { state } = applyEvents(initialState('task_1'), events);
    const a = state.attempts![0]!;
    // Live, with the task's current count (7 deltas = 56 chars, the task says 28 tokens: 2 chars/token).
    const live = attemptMetrics(a, T0 + 2200, true, 28);
    assert.equal(live.tokens, 28);
    assert.ok(live.liveTps! > 30 && live.liveTps! < 60, `live ${live.liveTps}`);
    const stalled = attemptMetrics(a, T0 + 2200 + 5000, true, 28);
    assert.equal(stalled.liveTps, 0);
    assert.equal(stalled.runningMs, 2200 + 5000 - 1300);
  });

  it('counts exact tokens when the deltas carry per-token log-probabilities', () => {
    seq = 0;
    const lp = (n: number) => Array.from({ length: n }, () => ({ token: 'x', logprob: -1, top_logprobs: [] }));
    const events = [
      ev(0, 'response.created'),
      ev(10, 'response.in_progress'),
      ev(110, 'response.output_text.delta', { delta: 'aaaa', logprobs: lp(1) }),
      ev(210, 'response.output_text.delta', { delta: 'bbbbbbbb', logprobs: lp(5) }),
      ev(310, 'response.output_text.delta', { delta: 'c', logprobs: lp(5) }),
    ];
    const a = applyEvents(initialState('t'), events).state.attempts![0]!;
    assert.equal(a.tokens, 11);
    const m = attemptMetrics(a, T0 + 310, true, 3);
    assert.equal(m.exact, true);
    assert.equal(m.tokens, 11, 'the exact count wins over the task row');
    assert.equal(tokensAt(a, 100, 1), 6);
    assert.ok(Math.abs(m.generationTps! - 50) < 1e-9, `(11 - 1) tokens in 200 ms: ${m.generationTps}`);
  });
});

describe('webview metrics per attempt', () => {
  it('keeps one set of figures per attempt when a task is retried from the start', () => {
    seq = 0;
    const events = [
      ev(0, 'response.created'),
      ev(0, 'response.queued'),
      ev(50, 'response.in_progress'),
      delta(150, 'lost'),
      status(1000, 'queued', 2),
      ev(1000, 'response.created'),
      ev(1000, 'response.queued'),
      ev(1500, 'response.in_progress'),
      delta(1700, 'fresh'),
      completed(1900, 10, 2),
    ];
    const state = applyEvents(initialState('t'), events).state;
    assert.equal(state.text, 'fresh');
    assert.deepEqual(
      state.attempts!.map((a) => [a.attempt, a.how]),
      [
        [1, 'created'],
        [2, 'retry'],
      ],
    );
    const [first, second] = state.attempts!.map((a) => attemptMetrics(a, T0 + 5000, false));
    assert.equal(first!.firstTokenMs, 100);
    assert.equal(first!.runningMs, 950, 'the first attempt ends when the second begins');
    assert.equal(second!.queuedMs, 500);
    assert.equal(second!.firstTokenMs, 200);
    assert.equal(second!.tokens, 2);
    assert.deepEqual(
      state.timeline.map((t) => t.kind),
      ['created', 'queued', 'running', 'first_token', 'queued', 'retry', 'queued', 'running', 'first_token', 'succeeded'],
    );
  });

  it('marks a resumed attempt and keeps its text', () => {
    seq = 0;
    const events = [
      ev(0, 'response.created'),
      ev(20, 'response.in_progress'),
      delta(120, 'first half '),
      status(2000, 'queued', 2),
      status(2100, 'loading', 2),
      status(3100, 'running', 2),
      delta(3300, 'second half'),
      completed(3400, 10, 6),
    ];
    const state = applyEvents(initialState('t'), events).state;
    assert.equal(state.text, 'first half second half');
    const resumed = state.attempts![1]!;
    assert.equal(resumed.how, 'resume');
    const m = attemptMetrics(resumed, T0 + 9999, false);
    assert.equal(m.queuedMs, 100);
    assert.equal(m.loadingMs, 1000);
    assert.equal(m.firstTokenMs, 200);
    assert.ok(state.timeline.some((t) => t.kind === 'resume'));
  });
});

describe('webview output items', () => {
  it('shows each function call (streamed arguments) and reasoning item on its own', () => {
    seq = 0;
    const events = [
      ev(0, 'response.created'),
      ev(10, 'response.in_progress'),
      ev(20, 'response.output_item.added', { output_index: 0, item: { id: 'rs_1', type: 'reasoning', content: [] } }),
      ev(30, 'response.reasoning_text.delta', { item_id: 'rs_1', output_index: 0, delta: 'think' }),
      ev(40, 'response.output_item.added', {
        output_index: 1,
        item: { id: 'fc_1', type: 'function_call', call_id: 'call_1', name: 'get_weather', arguments: '' },
      }),
      ev(50, 'response.function_call_arguments.delta', { item_id: 'fc_1', output_index: 1, delta: '{"city":' }),
      ev(60, 'response.function_call_arguments.delta', { item_id: 'fc_1', output_index: 1, delta: '"Seoul"}' }),
      ev(70, 'response.completed', {
        response: {
          status: 'completed',
          usage: { input_tokens: 5, output_tokens: 6, total_tokens: 11 },
          output: [{ id: 'fc_1', type: 'function_call', call_id: 'call_1', name: 'get_weather', arguments: '{"city":"Seoul"}' }],
        },
      }),
    ];
    const state = applyEvents(initialState('t'), events).state;
    assert.deepEqual(
      state.outputItems!.map((i) => [i.kind, i.name ?? '', i.callId ?? '', i.text, i.done]),
      [
        ['reasoning', '', '', 'think', false],
        ['function_call', 'get_weather', 'call_1', '{"city":"Seoul"}', true],
      ],
    );
    // Tool arguments and reasoning are generated tokens too: the first token came with the reasoning.
    assert.equal(attemptMetrics(state.attempts![0]!, T0 + 100, false).firstTokenMs, 20);
  });
});

// Its own backend, so the task loads the model (a loading phase with a duration).
const backend = new LlamaBackend({ models: [{ id: 'tiny', source: testModelPath() }] });
after(() => backend.dispose());

test('a real task on the tiny model: its stored events give consistent timings and the same picture when replayed', async () => {
  const runtime = await TaskRuntime.open({ dataDir: tempDir('tr-metrics-'), backend });
  try {
    const { task } = runtime.createTask({ origin: 'editor', principal: 'editor', input: prompt('metrics', 24) });
    const done = await runtime.waitForTerminal(task.id);
    assert.equal(done.status, 'succeeded');
    const events: WireEvent[] = runtime.readEvents(task.id).map((e) => ({ seq: e.seq, type: e.type, data: e.data, at: e.createdAt }));
    const { state } = applyEvents(initialState(task.id), events);
    const a = state.attempts![0]!;
    const m = attemptMetrics(a, Date.now(), false);
    for (const key of ['queuedMs', 'loadingMs', 'firstTokenMs', 'runningMs', 'totalMs'] as const) {
      assert.ok(m[key] !== undefined && m[key]! >= 0, `${key}: ${m[key]}`);
    }
    assert.ok(m.loadingMs! > 0, 'the model load took time');
    assert.equal(m.tokens, done.usage!.output_tokens, 'the token figure is the usage count');
    assert.ok(m.totalMs! <= done.updatedAt - done.createdAt + 1);
    if (done.usage!.output_tokens > 1) assert.ok(m.generationTps! > 0, 'a generation speed');
    // A reopened panel (the same stored events, applied in two batches) shows the same figures.
    const half = Math.floor(events.length / 2);
    const again = applyEvents(applyEvents(initialState(task.id), events.slice(0, half)).state, events.slice(half)).state;
    assert.deepEqual(again.attempts, state.attempts);
    assert.deepEqual(speedSeries(again.attempts![0]!, 0, false), speedSeries(a, 0, false));
  } finally {
    await runtime.close();
  }
});

test("speculative decoding's drafted and accepted tokens reach the task's usage (usage.task_runtime.speculative) and the panel", async () => {
  const speculating = new LlamaBackend({ models: [{ id: 'tiny', source: testModelPath() }], promptLookup: 'on', threads: 1 });
  const runtime = await TaskRuntime.open({ dataDir: tempDir('tr-metrics-spec-'), backend: speculating });
  try {
    // Greedy output of the random model falls into a loop within a few tokens: lookup drafts it.
    const { task } = runtime.createTask({ origin: 'editor', principal: 'editor', input: { ...prompt('loop', 80), temperature: 0 } });
    const done = await runtime.waitForTerminal(task.id);
    assert.equal(done.status, 'succeeded');
    const spec = done.usage!.task_runtime?.speculative;
    assert.ok(spec && spec.accepted > 0 && spec.accepted <= spec.drafted, JSON.stringify(done.usage));
    const events: WireEvent[] = runtime.readEvents(task.id).map((e) => ({ seq: e.seq, type: e.type, data: e.data, at: e.createdAt }));
    const { state } = applyEvents(initialState(task.id), events);
    assert.deepEqual(state.usage?.speculative, spec);
  } finally {
    await runtime.close();
    await speculating.dispose();
  }
});
