// DeltaBatcher on fake timers (node:test mock.timers, Date and setTimeout): when text is written, with what, and
// how the window follows the cost of a write. No model, no store, no real time.
import { afterEach, beforeEach, describe, it, mock } from 'node:test';
import assert from 'node:assert/strict';
import type { GenerationSnapshot } from '../../../src/runtime/backend';
import { DeltaBatcher, MAX_DELTA_WINDOW_MS } from '../../../src/runtime/deltaBatcher';
import type { OutputItem, OutputStep } from '../../../src/runtime/outputItems';

interface Write {
  at: number;
  text: string;
  snapshot?: GenerationSnapshot;
}

function batcher(opts: { minWindowMs?: number; writeCostMs?: number; failAt?: number } = {}) {
  const writes: Write[] = [];
  const errors: Error[] = [];
  // Time spent inside writes: the batcher's clock runs ahead of the timers' by that much, as a slow disk would make it.
  let spent = 0;
  const b = new DeltaBatcher({
    minWindowMs: opts.minWindowMs ?? 16,
    now: () => Date.now() + spent,
    write: (steps, snapshot) => {
      if (opts.failAt !== undefined && writes.length === opts.failAt) throw new Error('disk full');
      const text = steps.map((s) => (s.kind === 'text' || s.kind === 'delta' ? s.delta : `<${s.kind} ${s.index}>`)).join('');
      writes.push({ at: Date.now(), text, snapshot });
      spent += opts.writeCostMs ?? 0;
    },
    onError: (e) => errors.push(e),
  });
  // Answer text pieces, as most tests add them.
  const add = (text: string) => b.add([{ kind: 'text', delta: text }]);
  return {
    b: { add, addSteps: (steps: OutputStep[]) => b.add(steps), flush: (s?: GenerationSnapshot) => b.flush(s), close: () => b.close() },
    writes,
    errors,
  };
}

const snap = (n: number): GenerationSnapshot => ({ statePath: `/snap/${n}`, text: 'x'.repeat(n), outputTokens: n });

describe('DeltaBatcher', () => {
  beforeEach(() => mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 1_000_000 }));
  afterEach(() => mock.timers.reset());

  it('writes the first piece at once, then holds pieces until the window since the last write has passed', () => {
    const { b, writes } = batcher();
    b.add('a');
    assert.deepEqual(
      writes.map((w) => w.text),
      ['a'],
      'first text goes out at once',
    );
    mock.timers.tick(5);
    b.add('b');
    mock.timers.tick(5);
    b.add('c');
    assert.equal(writes.length, 1, 'held inside the window');
    mock.timers.tick(10);
    assert.equal(writes.length, 1, 'held until 16 ms after the first held piece');
    mock.timers.tick(1);
    assert.deepEqual(
      writes.map((w) => w.text),
      ['a', 'bc'],
    );
    assert.equal(writes[1].at - writes[0].at, 5 + 16);
  });

  it('writes at once when a piece arrives after the window has passed', () => {
    const { b, writes } = batcher();
    b.add('a');
    mock.timers.tick(16);
    b.add('b');
    assert.deepEqual(
      writes.map((w) => w.text),
      ['a', 'b'],
    );
  });

  it('flush writes what is pending now, with the snapshot that covers it; with nothing pending it writes nothing', () => {
    const { b, writes } = batcher();
    b.flush();
    assert.equal(writes.length, 0);
    b.add('a');
    b.add('b');
    b.flush(snap(2));
    assert.deepEqual(writes, [
      { at: 1_000_000, text: 'a', snapshot: undefined },
      { at: 1_000_000, text: 'b', snapshot: snap(2) },
    ]);
    b.flush(snap(3));
    assert.deepEqual(writes[2], { at: 1_000_000, text: '', snapshot: snap(3) }, 'a snapshot alone is written too');
    mock.timers.tick(1000);
    assert.equal(writes.length, 3, 'the flush cancelled the pending timer');
  });

  it('slow writes widen the window to 20× the write time, up to the maximum', () => {
    const slow = batcher({ writeCostMs: 3 });
    // Writes of 3 ms: the averaged write time climbs towards 3 ms, the window towards 60 ms.
    for (let i = 0; i < 30; i++) {
      slow.b.add('x');
      mock.timers.tick(200);
    }
    const before = slow.writes.length;
    slow.b.add('y');
    assert.equal(slow.writes.length, before + 1, 'the window has passed: written at once');
    slow.b.add('z');
    mock.timers.tick(55);
    assert.equal(slow.writes.length, before + 1, 'still inside a window of about 60 ms');
    mock.timers.tick(10);
    assert.equal(slow.writes.length, before + 2);

    mock.timers.reset();
    mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 0 });
    const verySlow = batcher({ writeCostMs: 50 });
    for (let i = 0; i < 30; i++) {
      verySlow.b.add('x');
      mock.timers.tick(1000);
    }
    const n = verySlow.writes.length;
    verySlow.b.add('y');
    verySlow.b.add('z');
    mock.timers.tick(MAX_DELTA_WINDOW_MS - 1);
    assert.equal(verySlow.writes.length, n + 1);
    mock.timers.tick(1);
    assert.equal(verySlow.writes.length, n + 2, `at most ${MAX_DELTA_WINDOW_MS} ms however slow the writes`);
  });

  it('fast writes keep the minimum window', () => {
    const { b, writes } = batcher({ minWindowMs: 16 });
    for (let i = 0; i < 20; i++) {
      b.add('x');
      mock.timers.tick(16);
    }
    assert.equal(writes.length, 20, 'every piece 16 ms apart is written at once');
  });

  it('a failed write is reported once and nothing is written after it', () => {
    const { b, writes, errors } = batcher({ failAt: 1 });
    b.add('a');
    b.add('b');
    mock.timers.tick(16);
    assert.deepEqual(
      writes.map((w) => w.text),
      ['a'],
    );
    assert.deepEqual(
      errors.map((e) => e.message),
      ['disk full'],
    );
    b.add('c');
    b.flush(snap(1));
    mock.timers.tick(1000);
    assert.equal(writes.length, 1);
    assert.equal(errors.length, 1);
  });

  it('close stops the timer', () => {
    const { b, writes } = batcher();
    b.add('a');
    b.add('b');
    b.close();
    mock.timers.tick(1000);
    assert.deepEqual(
      writes.map((w) => w.text),
      ['a'],
    );
  });
  it('joins deltas of the same target and keeps an item opened or closed in its place', () => {
    const { b, writes } = batcher();
    const call: OutputItem = { type: 'function_call', id: 'fc_1', callId: 'call_1', name: 'f', arguments: '', done: false };
    b.add('a');
    b.add('b');
    b.addSteps([
      { kind: 'open', index: 1, item: call },
      { kind: 'delta', index: 1, item: call, delta: '{"x"' },
    ]);
    b.addSteps([
      { kind: 'delta', index: 1, item: call, delta: ':1}' },
      { kind: 'close', index: 1, item: { ...call, done: true } },
    ]);
    b.add('c');
    b.add('d');
    b.flush();
    assert.deepEqual(
      writes.map((w) => w.text),
      ['a', 'b<open 1>{"x":1}<close 1>cd'],
    );
  });
});
