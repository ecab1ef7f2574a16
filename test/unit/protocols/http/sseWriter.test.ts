// An SSE stream counts as open until its socket has taken everything written (sse.ts): the close listeners, which
// give back the stream slot, wait for a reader that has not read the end yet, and run once it reads or goes away.
import assert from 'node:assert/strict';
import * as http from 'node:http';
import * as net from 'node:net';
import { after, before, describe, it } from 'node:test';
import { SseWriter } from '../../../../src/protocols/http/sse';

describe('SseWriter: released when the socket took the stream', () => {
  let server: http.Server;
  let port: number;
  let onRequest: (res: http.ServerResponse) => void = () => {};
  before(async () => {
    server = http.createServer((_req, res) => onRequest(res));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as net.AddressInfo).port;
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  /** A client that reads the response head, then nothing. */
  const stalledClient = () =>
    new Promise<net.Socket>((resolve) => {
      const socket = net.connect(port, '127.0.0.1', () => socket.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n'));
      socket.once('data', () => {
        socket.pause();
        resolve(socket);
      });
      socket.on('error', () => {});
    });

  it('a stream ended with 32 MiB unread stays open until the reader goes away', async () => {
    const writer = new Promise<SseWriter>((resolve) => (onRequest = (res) => resolve(new SseWriter(res, { heartbeatMs: 0 }))));
    const socket = await stalledClient();
    const w = await writer;
    let released = false;
    w.onClose(() => (released = true));
    // One frame larger than any socket buffer: the writer's cap lets a single large event out.
    w.send({ data: 'x'.repeat(32 * 1024 * 1024) });
    w.close();
    assert.equal(w.isClosed, true, 'no more writes');
    assert.equal(released, false, 'still open: the reader has not taken the end');
    const gone = new Promise<void>((resolve) => w.onClose(resolve));
    socket.destroy();
    await gone;
    assert.equal(released, true);
  });

  it('a stream whose reader took everything is released as it ends', async () => {
    const writer = new Promise<SseWriter>((resolve) => (onRequest = (res) => resolve(new SseWriter(res, { heartbeatMs: 0 }))));
    const body = new Promise<string>((resolve) => {
      http.get({ port, host: '127.0.0.1', path: '/' }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve(text));
      });
    });
    const w = await writer;
    const released = new Promise<void>((resolve) => w.onClose(resolve));
    w.send({ event: 'e', data: 'hello' });
    w.close();
    await released;
    assert.equal(await body, 'event: e\ndata: hello\n\n');
  });
});
