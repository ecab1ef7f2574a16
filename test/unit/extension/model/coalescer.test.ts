// ChangeCoalescer on a fake clock: a burst of changes becomes one flush, and flushes are at least an interval apart.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ChangeCoalescer, type Timers } from '../../../../src/extension/model/coalescer';

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
