// The listener against clients that hold connections without a token: they cannot take every slot from clients
// that have one, and a request whose headers never finish is cut at the configured header timeout, not at Node's
// 30 s check interval.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import * as net from 'node:net';
import { startListener, type Listener } from '../../../../src/protocols/http/listener';
import { LARGE_BODY_BYTES, REFUSAL_BURST, REFUSAL_REFILL_MS } from '../../../../src/protocols/http/refusalBudget';
import type { DoorHandler } from '../../../../src/protocols/http/types';
import { rawSocket, socketClosed } from '../../../support/hostile';

const TOKEN = 'tok-listener-test';
const ok: DoorHandler = async (_req, res) => {
  res.writeHead(200, { 'content-type': 'text/plain' });
  res.end('ok');
};

describe('listener connection slots and timeouts', () => {
  let listener: Listener;
  const held: net.Socket[] = [];

  before(async () => {
    listener = await startListener({
      port: 0,
      tokens: new Map([[TOKEN, 'p']]),
      doors: [{ prefix: '/x', handler: ok, problemStyle: 'problem+json' }],
      limits: { maxConnections: 8, headersTimeoutMs: 400, requestTimeoutMs: 5_000 },
    });
  });
  after(async () => {
    for (const s of held) s.destroy();
    await listener.close();
  });

  test('sockets without a token holding every slot do not keep an authenticated client out', async () => {
    // Eight sockets that say nothing, and eight that start a request and never finish it.
    for (let i = 0; i < 8; i++) held.push(await rawSocket(listener.port, ''));
    for (let i = 0; i < 8; i++) held.push(await rawSocket(listener.port, 'GET /x HTTP/1.1\r\nHost: 127.0.0.1\r\n'));
    const res = await fetch(`${listener.url}/x`, { headers: { authorization: `Bearer ${TOKEN}` } });
    assert.equal(res.status, 200);
    assert.equal(await res.text(), 'ok');
  });

  test('a request whose headers never finish is closed at the configured header timeout', async () => {
    const started = Date.now();
    const s = await rawSocket(listener.port, 'GET /x HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ');
    held.push(s);
    await socketClosed(s);
    // Node checks every connectionsCheckingInterval; its default (30 s) would close it after 30 s at the earliest.
    assert.ok(Date.now() - started < 15_000, `closed after ${Date.now() - started} ms`);
  });
  test('a request trickled a byte at a time from its first byte is cut at the header timeout too', { timeout: 60_000 }, async () => {
    const text = 'GET /x HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ' + 'a'.repeat(10_000);
    const s = await rawSocket(listener.port, text[0]);
    held.push(s);
    // A byte every 100 ms: the socket is never idle, and the headers never end. Without a deadline of its own the
    // listener keeps it until its idle timeout (120 s), and this test times out.
    let sent = 0;
    const trickle = setInterval(() => {
      if (!s.destroyed) s.write(text[++sent]);
    }, 100);
    try {
      await socketClosed(s);
    } finally {
      clearInterval(trickle);
    }
    assert.ok(sent > 0, 'the client was still sending when the server closed it');
  });
  test('a trickling client that never ends its side is closed after the 408, not kept half-open', { timeout: 20_000 }, async () => {
    // The answer's FIN alone does not end a socket whose client keeps it half-open and keeps sending: the server kept
    // it until the client stopped (99 s measured). It is cut once the 408 is flushed.
    const text = 'GET /x HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ' + 'a'.repeat(10_000);
    const s = net.connect({ port: listener.port, host: '127.0.0.1', allowHalfOpen: true });
    held.push(s);
    s.on('error', () => undefined);
    let answer = '';
    s.on('data', (d: Buffer) => (answer += String(d)));
    s.resume();
    let sent = 0;
    const trickle = setInterval(() => {
      if (!s.destroyed && s.writable) s.write(text[sent++]);
    }, 50);
    try {
      await socketClosed(s);
    } finally {
      clearInterval(trickle);
    }
    assert.match(answer, /^HTTP\/1\.1 408 /);
  });
});

describe('listener: one principal cannot take every slot', () => {
  let listener: Listener;
  const held: net.Socket[] = [];
  /** Requests on /hold stay open until released. */
  const waiting: Array<() => void> = [];
  const hold: DoorHandler = (_req, res) =>
    new Promise<void>((resolve) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('held');
      waiting.push(() => {
        res.end();
        resolve();
      });
    });

  /** Six slots, three per principal. */
  const start = () =>
    startListener({
      port: 0,
      tokens: new Map([
        ['tok-a', 'alice'],
        ['tok-b', 'bob'],
      ]),
      doors: [
        { prefix: '/x', handler: ok, problemStyle: 'problem+json' },
        { prefix: '/hold', handler: hold, problemStyle: 'problem+json' },
      ],
      limits: { maxConnections: 6, maxConnectionsPerPrincipal: 3 },
    });

  before(async () => {
    listener = await start();
  });
  after(async () => {
    for (const r of waiting.splice(0)) r();
    for (const s of held) s.destroy();
    await listener.close();
  });

  /** A keep-alive connection that made one request with `token` and read its answer's head. */
  const connection = async (token: string, path = '/x') => {
    const s = await rawSocket(listener.port, `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${listener.port}\r\nAuthorization: Bearer ${token}\r\n\r\n`);
    held.push(s);
    const head = await new Promise<string>((resolve) => {
      let text = '';
      s.on('data', (d: Buffer) => {
        text += String(d);
        if (text.includes('\r\n\r\n')) resolve(text);
      });
    });
    return { socket: s, head };
  };

  test("a principal's connections past its share are answered 429 and closed; another principal still gets in", async () => {
    const busy = [];
    for (let i = 0; i < 3; i++) busy.push(await connection('tok-a', '/hold'));
    for (const b of busy) assert.match(b.head, /^HTTP\/1\.1 200 /);
    const fourth = await connection('tok-a');
    assert.match(fourth.head, /^HTTP\/1\.1 429 /);
    assert.match(fourth.head, /max_connections_per_principal/);
    await socketClosed(fourth.socket);
    const bob = await fetch(`${listener.url}/x`, { headers: { authorization: 'Bearer tok-b' } });
    assert.equal(bob.status, 200);
    await bob.text();
    // A socket alice closes gives her share back.
    busy[0]!.socket.destroy();
    await socketClosed(busy[0]!.socket);
    const again = await connection('tok-a');
    assert.match(again.head, /^HTTP\/1\.1 200 /);
    again.socket.destroy();
    for (const r of waiting.splice(0)) r();
  });

  test('with every slot taken, a new client evicts the authenticated connection idle longest, not one at work', async () => {
    for (const s of held.splice(0)) s.destroy();
    await listener.close();
    listener = await start();
    // Bob: two idle keep-alive connections; alice: three with requests under way; one more socket fills the six.
    const idleOnes = [await connection('tok-b'), await connection('tok-b')];
    const working = [];
    for (let i = 0; i < 3; i++) working.push(await connection('tok-a', '/hold'));
    const filler = await connection('tok-b');
    const res = await fetch(`${listener.url}/x`, { headers: { authorization: 'Bearer tok-b' } });
    assert.equal(res.status, 200);
    await res.text();
    await socketClosed(idleOnes[0]!.socket);
    for (const w of working) assert.equal(w.socket.destroyed, false, 'connections at work are kept');
    void filler;
  });
});

describe('listener: large requests refused again and again', () => {
  let listener: Listener;
  let now = 1_000_000;
  let bodiesRead = 0;
  /** Refuses every body (as a door refuses an oversized prompt), after reading it. */
  const refuse: DoorHandler = async (req, res) => {
    for await (const chunk of req) void chunk;
    bodiesRead++;
    res.writeHead(400, { 'content-type': 'application/json' });
    res.end('{"error":"too big"}');
  };
  before(async () => {
    listener = await startListener({
      port: 0,
      tokens: new Map([
        ['tok-m', 'mallory'],
        ['tok-b', 'bob'],
      ]),
      doors: [{ prefix: '/x', handler: refuse, problemStyle: 'problem+json' }],
      now: () => now,
    });
  });
  after(async () => listener.close());

  const post = (token: string, bytes: number) =>
    fetch(`${listener.url}/x`, { method: 'POST', headers: { authorization: `Bearer ${token}` }, body: 'x'.repeat(bytes) }).then(async (r) => ({
      status: r.status,
      retryAfter: r.headers.get('retry-after'),
      body: await r.text(),
    }));

  test('after REFUSAL_BURST refusals a large body is refused unread with 429; small ones and other principals pass', async () => {
    for (let i = 0; i < REFUSAL_BURST; i++) assert.equal((await post('tok-m', LARGE_BODY_BYTES)).status, 400);
    assert.equal(bodiesRead, REFUSAL_BURST);
    const held = await post('tok-m', LARGE_BODY_BYTES);
    assert.equal(held.status, 429);
    assert.equal(held.retryAfter, String(REFUSAL_REFILL_MS / 1000));
    assert.match(held.body, /refused_large_requests/);
    assert.equal(bodiesRead, REFUSAL_BURST, 'the door never read it');
    // A small request of the same principal, and a large one of another, still reach the door.
    assert.equal((await post('tok-m', 100)).status, 400);
    assert.equal((await post('tok-b', LARGE_BODY_BYTES)).status, 400);
    assert.equal(bodiesRead, REFUSAL_BURST + 2);
    // The budget comes back with time.
    now += REFUSAL_REFILL_MS;
    assert.equal((await post('tok-m', LARGE_BODY_BYTES)).status, 400);
    assert.equal((await post('tok-m', LARGE_BODY_BYTES)).status, 429);
  });
});
