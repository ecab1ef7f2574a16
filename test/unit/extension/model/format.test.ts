// Row text of the Tasks view: titles, durations, descriptions and escaped tooltips.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { formatDuration, plainLocalize, taskDescription, taskTitle, taskTooltipMarkdown } from '../../../../src/extension/model/format';
import type { TaskInfo } from '../../../../src/extension/model/taskSource';

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
    assert.equal(
      taskDescription({ ...base, status: 'succeeded', updatedAt: 3000, origin: undefined }, 99_000, plainLocalize),
      'unknown origin · tiny · took 3s · 42 tok',
    );
    const md = taskTooltipMarkdown({ ...base, title: '**bold** <img>' }, 0, plainLocalize);
    assert.ok(md.includes('\\*\\*bold\\*\\* \\<img\\>'));
  });

  it('a queued task shows its place in the queue and, once run times are known, when it starts', () => {
    const queued: TaskInfo = { ...base, status: 'queued', outputTokens: 0, priority: 3, queue: { position: 3, expectedStartAt: null } };
    assert.equal(taskDescription(queued, 5_000, plainLocalize), 'MCP · tiny · waiting 5s · #3 in queue');
    assert.equal(
      taskDescription({ ...queued, queue: { position: 1, expectedStartAt: 17_000 } }, 5_000, plainLocalize),
      'MCP · tiny · waiting 5s · #1 in queue, starts in about 12s',
    );
    assert.equal(
      taskDescription({ ...queued, queue: { position: 1, expectedStartAt: 5_500 } }, 5_000, plainLocalize),
      'MCP · tiny · waiting 5s · #1 in queue, starting soon',
    );
    assert.equal(taskDescription({ ...queued, queue: undefined }, 5_000, plainLocalize), 'MCP · tiny · waiting 5s');
    const md = taskTooltipMarkdown(queued, 5_000, plainLocalize);
    assert.match(md, /Queue: \\#3 in queue/);
    assert.match(md, /Priority: 3/);
  });
});
