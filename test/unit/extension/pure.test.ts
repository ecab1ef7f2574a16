// Pure helpers of the editor layer: coalescing, settings validation, row text (SSE parsing: test/unit/protocols/http/sseParser.test.ts).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ChangeCoalescer, type Timers } from '../../../src/extension/model/coalescer';
import { formatDuration, plainLocalize, taskDescription, taskTitle, taskTooltipMarkdown } from '../../../src/extension/model/format';
import { readSettings, restartNeeded, DEFAULT_SETTINGS } from '../../../src/extension/model/settings';
import { GROUP_STATUSES, groupOf } from '../../../src/extension/model/treeModel';
import { emptyCounts, type TaskInfo } from '../../../src/extension/model/taskSource';
import { CANCELLABLE_STATUSES, TASK_STATUSES, TERMINAL_STATUSES, canTransition } from '../../../src/runtime/task';

function fakeClock(): Timers & { advance(ms: number): void } {
  let now = 0;
  let timers: Array<{ at: number; fn: () => void; id: number }> = [];
  let next = 1;
  return {
    now: () => now,
    setTimeout(fn, ms) {
      const id = next++;
      timers.push({ at: now + ms, fn, id });
      return id;
    },
    clearTimeout(h) {
      timers = timers.filter((t) => t.id !== h);
    },
    advance(ms) {
      const end = now + ms;
      for (;;) {
        timers.sort((a, b) => a.at - b.at);
        const t = timers[0];
        if (!t || t.at > end) break;
        timers.shift();
        now = t.at;
        t.fn();
      }
      now = end;
    },
  };
}

describe('ChangeCoalescer', () => {
  it('batches a burst and flushes at most once per interval', () => {
    const clock = fakeClock();
    const flushes: Array<{ at: number; keys: string[] }> = [];
    const c = new ChangeCoalescer<string>((keys) => flushes.push({ at: clock.now(), keys: [...keys] }), 250, 16, clock);
    c.add('a');
    c.add('b');
    c.add('a');
    clock.advance(16);
    assert.deepEqual(flushes, [{ at: 16, keys: ['a', 'b'] }]);
    // 100 changes over the next second produce at most 4 flushes.
    for (let i = 0; i < 100; i++) {
      c.add(`k${i % 7}`);
      clock.advance(10);
    }
    clock.advance(300);
    const later = flushes.slice(1);
    assert.ok(later.length <= 5, `flushes: ${later.length}`);
    for (let i = 1; i < flushes.length; i++) assert.ok(flushes[i]!.at - flushes[i - 1]!.at >= 250);
    assert.equal(new Set(later.flatMap((f) => f.keys)).size, 7);
    c.dispose();
  });
});

describe('settings', () => {
  it('validates values and falls back to defaults with messages', () => {
    const values: Record<string, unknown> = { 'server.port': 70000, threads: 2, defaultRestartPolicy: 'sometimes', model: 'weights.bin', 'ttl.defaultMinutes': 100, 'ttl.maxMinutes': 50 };
    const { settings, problems } = readSettings((k) => values[k], plainLocalize);
    assert.equal(settings.port, 0);
    assert.equal(settings.threads, 2);
    assert.equal(settings.defaultRestartPolicy, 'fail');
    assert.equal(settings.model, '');
    assert.equal(settings.defaultTtlMinutes, 50);
    assert.equal(problems.length, 4);
    assert.match(problems[0]!, /taskRuntime\./);
    const ok = readSettings((k) => ({ model: 'hf:owner/repo:Q4_K_M', 'notifications.onCompletion': 'failures' })[k], plainLocalize);
    assert.deepEqual(ok.problems, []);
    assert.equal(ok.settings.model, 'hf:owner/repo:Q4_K_M');
    assert.equal(ok.settings.notifyOnCompletion, 'failures');
    assert.equal(restartNeeded(DEFAULT_SETTINGS, { ...DEFAULT_SETTINGS, notifyOnCompletion: 'never' }), false);
    assert.equal(restartNeeded(DEFAULT_SETTINGS, { ...DEFAULT_SETTINGS, port: 1234 }), true);
  });

  it('takes a sampling temperature from 0 to 2, else the model default with a message', () => {
    assert.equal(readSettings((k) => ({ temperature: 0 })[k], plainLocalize).settings.temperature, 0);
    assert.equal(readSettings(() => undefined, plainLocalize).settings.temperature, null);
    const bad = readSettings((k) => ({ temperature: 7 })[k], plainLocalize);
    assert.equal(bad.settings.temperature, null);
    assert.match(bad.problems[0]!, /taskRuntime\.temperature/);
    assert.equal(restartNeeded(DEFAULT_SETTINGS, { ...DEFAULT_SETTINGS, temperature: 0.2 }), false, 'applies without a restart');
  });
});

describe('row text', () => {
  const base: TaskInfo = {
    id: 'task_abc',
    responseId: 'resp_abc',
    status: 'running',
    origin: 'mcp',
    title: 'Summarise   the\nfollowing very long document about the history of distributed task queues and retries',
    model: 'tiny',
    statusMessage: null,
    createdAt: 0,
    updatedAt: 0,
    onRestart: 'fail',
    attempt: 1,
    outputTokens: 42,
    usage: null,
    error: null,
    response: null,
  };
  it('titles, durations, descriptions and escaped tooltips', () => {
    assert.equal(taskTitle(base), 'Summarise the following very long document about the…');
    assert.equal(taskTitle({ id: 'task_x', title: '  ' }), 'task_x');
    assert.equal(formatDuration(59_999), '59s');
    assert.equal(formatDuration(125_000), '2m 5s');
    assert.equal(formatDuration(2 * 3600_000 + 4 * 60_000), '2h 4m');
    assert.equal(taskDescription(base, 65_000, plainLocalize), 'MCP · tiny · 1m 5s · 42 tok');
    assert.equal(taskDescription({ ...base, status: 'succeeded', updatedAt: 3000, origin: undefined }, 99_000, plainLocalize), 'unknown origin · tiny · took 3s · 42 tok');
    const md = taskTooltipMarkdown({ ...base, title: '**bold** <img>' }, 0, plainLocalize);
    assert.ok(md.includes('\\*\\*bold\\*\\* \\<img\\>'));
    assert.equal(groupOf('cancelling'), 'running');
    assert.equal(groupOf('input_required'), 'needsInput');
  });
});

describe('status lists come from the runtime', () => {
  it('counts, cancellable statuses and tree groups cover exactly the runtime statuses', () => {
    assert.deepEqual(Object.keys(emptyCounts()), [...TASK_STATUSES]);
    // What Cancel offers: every unfinished status that is not already stopping; each can move towards cancelled.
    assert.deepEqual(CANCELLABLE_STATUSES, ['queued', 'loading', 'running', 'input_required']);
    for (const s of CANCELLABLE_STATUSES) assert.ok(canTransition(s, 'cancelled') || canTransition(s, 'cancelling'), s);
    assert.ok(CANCELLABLE_STATUSES.every((s) => !TERMINAL_STATUSES.includes(s)));
    // Each status sits in exactly one tree group.
    const grouped = Object.values(GROUP_STATUSES).flat();
    assert.deepEqual([...grouped].sort(), [...TASK_STATUSES].sort());
  });
});
