// Tokens/s per task (tree rows) and across tasks (overview chart) from task changes, with a passed-in clock.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BUCKET_MS, HISTORY_MS, Throughput, WINDOW_MS } from '../../../../src/extension/model/throughput';

describe('throughput', () => {
  it('gives a running task its moving-window rate and nothing once it is idle or finished', () => {
    const tp = new Throughput();
    const t0 = 1_000_000;
    tp.record('task_a', 'running', 0, t0);
    assert.equal(tp.rate('task_a', t0), undefined, 'one sample is no rate');
    for (let i = 1; i <= 10; i++) tp.record('task_a', 'running', i * 20, t0 + i * 1000); // 20 tok/s
    const r = tp.rate('task_a', t0 + 10_000)!;
    assert.ok(Math.abs(r - 20) < 1e-9, `rate ${r}`);
    assert.ok(tp.rate('task_a', t0 + 10_000 + WINDOW_MS * 4) === 0, 'stalled');
    tp.record('task_a', 'succeeded', 220, t0 + 11_000);
    assert.equal(tp.rate('task_a', t0 + 11_000), undefined);
  });

  it('sums tokens across tasks per bucket, counting growth only (a retry back to 0 adds nothing)', () => {
    const tp = new Throughput();
    const t0 = BUCKET_MS * 1000;
    tp.record('a', 'running', 100, t0); // first sight: its earlier tokens are not counted
    tp.record('b', 'running', 0, t0);
    tp.record('a', 'running', 150, t0 + 1000);
    tp.record('b', 'running', 25, t0 + 2000);
    tp.record('a', 'queued', 0, t0 + 3000); // retry
    tp.record('a', 'running', 10, t0 + 4000);
    const series = tp.series(t0 + BUCKET_MS);
    assert.equal(series.length, HISTORY_MS / BUCKET_MS);
    assert.equal(series[series.length - 1], ((50 + 25 + 10) / BUCKET_MS) * 1000);
    assert.ok(series.slice(0, -1).every((v) => v === 0));
    assert.deepEqual(
      tp
        .running(t0 + 4000)
        .map((r) => r.id)
        .sort(),
      ['a', 'b'],
    );
    // Old buckets fall out of the window.
    assert.ok(tp.series(t0 + HISTORY_MS + 2 * BUCKET_MS).every((v) => v === 0));
  });
});
