import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { StopText, type Piece } from '../../../../src/backends/llama/stopText';

const p = (text: string, tokens = 1): Piece => ({ text, tokens });
function feed(stop: StopText, texts: string[]) {
  const out: Piece[] = [];
  let stopped = false;
  for (const t of texts) {
    const r = stop.push(p(t));
    out.push(...r.pieces);
    if (r.stopped) {
      stopped = true;
      break;
    }
  }
  if (!stopped) out.push(...stop.flush());
  return { text: out.map((x) => x.text).join(''), tokens: out.reduce((n, x) => n + x.tokens, 0), stopped, out };
}

describe('StopText', () => {
  it('passes everything through without stop strings', () => {
    const r = feed(new StopText([]), ['a', 'b']);
    assert.deepEqual(r, { text: 'ab', tokens: 2, stopped: false, out: [p('a'), p('b')] });
  });

  it('holds back a possible start until decided, and ends at a stop across pieces without delivering it', () => {
    const s = new StopText(['END']);
    assert.deepEqual(s.push(p('ab')).pieces, [p('ab')]);
    assert.deepEqual(s.push(p('cE')).pieces, [], 'cE may begin END');
    assert.ok(!s.empty);
    assert.deepEqual(s.push(p('x')).pieces, [p('cE'), p('x')], 'Ex is no stop: released');
    assert.ok(s.empty);
    const r = s.push(p('zzEN'));
    assert.deepEqual(r.pieces, []);
    const end = s.push(p('Dtail'));
    assert.ok(end.stopped);
    assert.deepEqual(end.pieces, [{ text: 'zz', tokens: 2 }], 'text before the stop, with every held token');
  });

  it('takes the earliest of several stops, and releases held text when the output ends otherwise', () => {
    assert.equal(feed(new StopText(['cd', 'b']), ['abcd']).text, 'a');
    const r = feed(new StopText(['\n\n\n\n']), ['{}', '\n', '\n']);
    assert.deepEqual([r.text, r.tokens, r.stopped], ['{}\n\n', 3, false]);
    assert.equal(feed(new StopText(['\n\n\n\n']), ['{}', '\n\n', '\n\n\n']).text, '{}');
  });

  it('keeps log-probabilities with their pieces', () => {
    const lp = (token: string) => ({ token, logprob: -1, bytes: [...Buffer.from(token)], top_logprobs: [] });
    const s = new StopText(['X']);
    const a = s.push({ text: 'ab', tokens: 2, logprobs: [lp('a'), lp('b')] });
    assert.equal(a.pieces[0]!.logprobs!.length, 2);
    const b = s.push({ text: 'cX', tokens: 2, logprobs: [lp('c'), lp('X')] });
    assert.ok(b.stopped);
    assert.deepEqual(b.pieces, [{ text: 'c', tokens: 2, logprobs: [lp('c'), lp('X')] }]);
  });

  it('after a resume, a stop string begun in the delivered text still ends the output', () => {
    const s = new StopText(['STOP'], 'hello ST');
    const r = s.push(p('OP and more'));
    assert.ok(r.stopped);
    assert.deepEqual(r.pieces, [{ text: '', tokens: 1 }]);
    // A stop wholly inside the delivered text is not found again.
    assert.equal(feed(new StopText(['ab'], 'xab'), ['c']).text, 'c');
  });

  it('names the stop string that ended the output (the earliest; at the same place, the first given); none otherwise', () => {
    const named = (stops: string[], texts: string[], before = '') => {
      const s = new StopText(stops, before);
      feed(s, texts);
      return s.matched;
    };
    assert.equal(named(['cd', 'b'], ['abcd']), 'b');
    assert.equal(named(['cd', 'bcd'], ['abcde']), 'bcd', 'the one that begins first, though both complete in this piece');
    assert.equal(named(['xy', 'xyz'], ['axyz']), 'xy');
    assert.equal(named(['xyz', 'xy'], ['axyz']), 'xyz');
    assert.equal(named(['END'], ['ab', 'E', 'N', 'D', 'more']), 'END', 'across pieces');
    assert.equal(named(['STOP'], ['OP and more'], 'hello ST'), 'STOP', 'begun in the text delivered before a resume');
    assert.equal(named(['END'], ['ab', 'EN']), undefined, 'a prefix held at the end is no match');
    assert.equal(named(['ab'], ['c'], 'xab'), undefined, 'wholly inside the delivered text');
    assert.equal(named([], ['abc']), undefined);
  });
});
