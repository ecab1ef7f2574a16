// Cache-aware routing as data (src/backends/remote/routing.ts), on a fake clock: which keys a request has, which
// endpoint an affinity sends it to, and when the affinity is broken (unavailable, overloaded, expired, forgotten).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  AffinityMap,
  AFFINITY_TTL_MS,
  chooseEndpoint,
  MAX_PREFIX_CHUNKS,
  PREFIX_CHUNK_CHARS,
  routingKeys,
  type RoutedMessage,
} from '../../../../src/backends/remote/routing';

interface Ep {
  name: string;
  inFlight: number;
  concurrency: number;
  served: number;
}
const ep = (name: string, inFlight = 0, concurrency = 4, served = 0): Ep => ({ name, inFlight, concurrency, served });

const HISTORY = 'h'.repeat(3000);
const turn1: RoutedMessage[] = [
  { role: 'system', content: 'You are terse.' },
  { role: 'user', content: `Read this: ${HISTORY}` },
];
const turn2: RoutedMessage[] = [...turn1, { role: 'assistant', content: 'Done.' }, { role: 'user', content: 'Again?' }];
const turn3: RoutedMessage[] = [...turn2, { role: 'assistant', content: 'Yes.' }, { role: 'user', content: 'Thanks.' }];

describe('routing keys', () => {
  it("a turn's conversation key is the previous request's whole prompt; the latest turn first", () => {
    const k1 = routingKeys('m', turn1);
    const k2 = routingKeys('m', turn2);
    const k3 = routingKeys('m', turn3);
    assert.deepEqual(k1.turns, []);
    assert.equal(k2.turns[0], k1.whole);
    assert.deepEqual(k3.turns, [k2.whole, k1.whole]);
    assert.notEqual(k2.whole, k1.whole);
  });

  it('leading-text keys every chunk, longest first, shared by prompts with the same beginning; none for short prompts', () => {
    const k1 = routingKeys('m', turn1);
    const k2 = routingKeys('m', turn2);
    assert.equal(k1.prefixes.length, Math.floor(3000 / PREFIX_CHUNK_CHARS));
    assert.deepEqual(k2.prefixes.slice(-k1.prefixes.length), k1.prefixes);
    assert.deepEqual(routingKeys('m', [{ role: 'user', content: 'Hi' }]).prefixes, []);
    // Beyond MAX_PREFIX_CHUNKS, one key per doubling: bounded for long prompts.
    const long = routingKeys('m', [{ role: 'user', content: 'x'.repeat(PREFIX_CHUNK_CHARS * MAX_PREFIX_CHUNKS * 4) }]);
    assert.equal(long.prefixes.length, MAX_PREFIX_CHUNKS + 2);
  });

  it('the model, the roles and the split between messages are part of every key; the cache key is per model', () => {
    const a = routingKeys('m', turn1, 'thread');
    assert.notEqual(routingKeys('other', turn1).whole, a.whole);
    assert.notEqual(routingKeys('other', turn1, 'thread').cacheKey, a.cacheKey);
    assert.notEqual(
      routingKeys('m', [{ role: 'user', content: 'ab' }]).whole,
      routingKeys('m', [
        { role: 'user', content: 'a' },
        { role: 'user', content: 'b' },
      ]).whole,
    );
    assert.notEqual(routingKeys('m', [{ role: 'user', content: 'a' }]).whole, routingKeys('m', [{ role: 'system', content: 'a' }]).whole);
    assert.ok(!JSON.stringify(a).includes('hhhh'), 'no prompt text in the keys');
  });
});

describe('the affinity map', () => {
  it('cache key first, then the conversation, then the longest shared prefix', () => {
    const map = new AffinityMap<string>(() => 0);
    map.remember(routingKeys('m', turn1), 'A');
    assert.deepEqual(map.lookup(routingKeys('m', turn2)), { endpoint: 'A', via: 'conversation' });
    // Another conversation with the same long beginning: the prefix.
    const sibling: RoutedMessage[] = [...turn1.slice(0, 1), { role: 'user', content: `Read this: ${HISTORY} and more` }];
    assert.deepEqual(map.lookup(routingKeys('m', sibling)), { endpoint: 'A', via: 'prefix' });
    map.remember(routingKeys('m', [{ role: 'user', content: 'Hi' }], 'thread'), 'B');
    assert.deepEqual(map.lookup(routingKeys('m', turn2, 'thread')), { endpoint: 'B', via: 'cache_key' });
    assert.equal(map.lookup(routingKeys('m', [{ role: 'user', content: 'Hello' }])), undefined);
    assert.equal(map.lookup(routingKeys('other', turn2)), undefined, 'another model shares nothing');
  });

  it('a key is forgotten AFFINITY_TTL_MS after its last use; a use keeps it', () => {
    let now = 1000;
    const map = new AffinityMap<string>(() => now);
    map.remember(routingKeys('m', turn1), 'A');
    now += AFFINITY_TTL_MS;
    assert.equal(map.lookup(routingKeys('m', turn2))?.endpoint, 'A');
    map.remember(routingKeys('m', turn2), 'A');
    now += AFFINITY_TTL_MS;
    assert.equal(map.lookup(routingKeys('m', turn3))?.endpoint, 'A', 'turn 2 was used since');
    now += 1;
    assert.equal(map.lookup(routingKeys('m', turn3)), undefined);
    assert.equal(map.lookup(routingKeys('m', turn2)), undefined);
  });

  it('bounded: the least recently used keys go first', () => {
    const map = new AffinityMap<string>(() => 0, 3);
    const conv = (i: number) => [{ role: 'user', content: `c${i}` }];
    const next = (i: number) => [...conv(i), { role: 'assistant', content: 'ok' }, { role: 'user', content: 'more' }];
    for (let i = 0; i < 3; i++) map.remember(routingKeys('m', conv(i)), `E${i}`);
    assert.equal(map.lookup(routingKeys('m', next(0)))?.endpoint, 'E0');
    map.remember(routingKeys('m', conv(0)), 'E0'); // used again: now the most recent
    map.remember(routingKeys('m', conv(3)), 'E3');
    assert.equal(map.size, 3);
    assert.equal(map.lookup(routingKeys('m', next(1))), undefined, 'the least recently used is gone');
    assert.equal(map.lookup(routingKeys('m', next(0)))?.endpoint, 'E0');
    assert.equal(map.lookup(routingKeys('m', next(3)))?.endpoint, 'E3');
  });

  it('remembering moves every key of the request to the new endpoint', () => {
    const map = new AffinityMap<string>(() => 0);
    map.remember(routingKeys('m', turn1, 'k'), 'A');
    map.remember(routingKeys('m', turn1, 'k'), 'B');
    assert.equal(map.lookup(routingKeys('m', turn2, 'k'))?.endpoint, 'B');
    assert.equal(map.lookup(routingKeys('m', turn2))?.endpoint, 'B');
  });
});

describe('choosing an endpoint', () => {
  it('without an affinity: the least busy by share, ties to the one that served fewer', () => {
    const a = ep('A', 1, 4, 9);
    const b = ep('B', 1, 2, 0);
    const c = ep('C', 1, 4, 3);
    assert.deepEqual(chooseEndpoint([a, b, c], undefined), { endpoint: c, via: 'least_busy' });
    assert.equal(chooseEndpoint([], undefined), undefined);
  });

  it("a conversation's or cache key's endpoint is kept while it has a free slot, however busy the others are", () => {
    const a = ep('A', 3, 4);
    const b = ep('B', 0, 4);
    assert.deepEqual(chooseEndpoint([a, b], { endpoint: a, via: 'conversation' }), { endpoint: a, via: 'conversation' });
    assert.deepEqual(chooseEndpoint([a, b], { endpoint: a, via: 'cache_key' }), { endpoint: a, via: 'cache_key' });
    // Full: never queued behind its own slots.
    a.inFlight = 4;
    const c = ep('C', 3, 4);
    assert.deepEqual(chooseEndpoint([a, b, c], { endpoint: a, via: 'conversation' }), { endpoint: b, via: 'least_busy', broken: 'overloaded' });
  });

  it('a shared prefix alone also needs the endpoint to be at most AFFINITY_MAX_IMBALANCE busier than the least busy', () => {
    const a = ep('A', 2, 4);
    const b = ep('B', 0, 4);
    assert.deepEqual(chooseEndpoint([a, b], { endpoint: a, via: 'prefix' }), { endpoint: a, via: 'prefix' });
    a.inFlight = 3; // 3 of 4 against 0 of 4
    assert.deepEqual(chooseEndpoint([a, b], { endpoint: a, via: 'prefix' }), { endpoint: b, via: 'least_busy', broken: 'overloaded' });
    b.inFlight = 2;
    assert.equal(chooseEndpoint([a, b], { endpoint: a, via: 'prefix' })?.endpoint, a);
  });

  it('an affine endpoint that is down, tried or does not serve the model (not eligible) is left', () => {
    const a = ep('A');
    const b = ep('B', 3, 4);
    assert.deepEqual(chooseEndpoint([b], { endpoint: a, via: 'conversation' }), { endpoint: b, via: 'least_busy', broken: 'unavailable' });
  });

  it('one slot each: the affine endpoint while free, else the other', () => {
    const a = ep('A', 0, 1);
    const b = ep('B', 0, 1, 0);
    assert.equal(chooseEndpoint([a, b], { endpoint: a, via: 'conversation' })?.endpoint, a);
    a.inFlight = 1;
    assert.equal(chooseEndpoint([a, b], { endpoint: a, via: 'conversation' })?.endpoint, b);
  });
});
