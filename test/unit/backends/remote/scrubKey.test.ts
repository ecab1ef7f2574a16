// The engine key in every spelling an engine might echo it in is scrubbed from what clients and logs see.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { engineText } from '../../../../src/backends/remote/chatStream';
import { KeyTextScrubber, MIN_RUN, scrubKey } from '../../../../src/backends/remote/scrubKey';
import { keySpellings } from '../../../support/hostile';

const KEY = 'sk-live_4f9QZ2m+/x7Lp0Ra8vWc=Tq3';

test('the key as is, URL-encoded, JSON-escaped, in base64 (both alphabets, also as Basic auth) and cut short is replaced', () => {
  const spellings = keySpellings(KEY);
  for (const s of spellings) {
    const out = scrubKey(`invalid api key "${s}" (check your Authorization header)`, KEY);
    assert.ok(out.includes('[key]'), `${s} → ${out}`);
    assert.ok(!out.includes(s), `${s} still in ${out}`);
    assert.match(out, /^invalid api key "\[key\]" \(check your Authorization header\)$/, s);
  }
});

test('the key in hex, lower or upper case, whole or cut short, is replaced too', () => {
  const hex = Buffer.from(KEY, 'utf8').toString('hex');
  for (const s of [hex, hex.toUpperCase(), hex.slice(6, 30), hex.toUpperCase().slice(0, 16)]) {
    const out = scrubKey(`echo: ${s} end`, KEY);
    assert.equal(out, 'echo: [key] end', s);
  }
});

test('text without the key is unchanged, and so is everything with no key configured', () => {
  const text = 'upstream 401: Unauthorized (model llama-3.1-8b, slot 2)';
  assert.equal(scrubKey(text, KEY), text);
  assert.equal(scrubKey(`with ${KEY}`, undefined), `with ${KEY}`);
  // Short runs that the key happens to share with ordinary words are kept.
  assert.equal(scrubKey('sk-live is a prefix', KEY), 'sk-live is a prefix');
});

test('engineText scrubs before it cuts and strips control characters', () => {
  const body = `${'x'.repeat(290)} ${Buffer.from(KEY).toString('base64')}\n${KEY}`;
  const out = engineText(body, KEY);
  assert.ok(!out.includes(KEY.slice(0, 8)), out);
  assert.ok(!out.includes(Buffer.from(KEY).toString('base64').slice(0, 8)), out);
  assert.ok(out.length <= 301, String(out.length));
});

test('streamed text: a key split across pieces is caught from the second piece on, per channel', () => {
  const s = new KeyTextScrubber(KEY);
  const pieces = ['answer: ', KEY.slice(0, 5), KEY.slice(5, 20), KEY.slice(20), ' end'];
  const out = pieces.map((p) => s.scrub(p).text).join('');
  // The first five characters went out before the rest showed they were the key (fewer than MIN_RUN).
  assert.equal(out, `answer: ${KEY.slice(0, 5)}[key][key] end`);
  assert.ok(5 < MIN_RUN);
  // Another channel has its own tail: the end of the answer's stream does not join a reasoning piece.
  const r = new KeyTextScrubber(KEY);
  assert.equal(r.scrub(KEY.slice(0, 6), 'a').text, KEY.slice(0, 6));
  assert.deepEqual(r.scrub(KEY.slice(6, 12), 'b'), { text: KEY.slice(6, 12), replaced: false });
  assert.deepEqual(r.scrub(KEY.slice(12), 'a'), { text: '[key]', replaced: true });
  // Plain text passes piece for piece, unchanged.
  const plain = new KeyTextScrubber(KEY);
  for (const p of ['Hello', ', ', 'world', ' — sk-live is a prefix']) assert.deepEqual(plain.scrub(p), { text: p, replaced: false });
});
