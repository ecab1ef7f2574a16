// Large answers go out in slices, each after the socket took the one before (bodyWriter.ts): a reader that does not
// read holds a slice of them in the server's buffers, not the whole body; one that reads gets every byte, surrogate
// pairs whole.
import assert from 'node:assert/strict';
import * as http from 'node:http';
import * as net from 'node:net';
import { after, before, describe, it } from 'node:test';
import { endWithText, SLICE_BYTES, SLICED_BODY_BYTES } from '../../../../src/protocols/http/bodyWriter';

describe('endWithText', () => {
  let server: http.Server;
  let port: number;
  let text = '';
  let lastRes: http.ServerResponse | undefined;
  before(async () => {
    server = http.createServer((_req, res) => {
      lastRes = res;
      res.setHeader('Content-Type', 'application/json');
      endWithText(res, text);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as net.AddressInfo).port;
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it('a reader that reads gets the whole body, pairs whole, with its length', async () => {
    text = JSON.stringify({ s: '😀'.repeat(SLICE_BYTES) + 'x'.repeat(3 * SLICED_BODY_BYTES) });
    const res = await fetch(`http://127.0.0.1:${port}/`);
    assert.equal(res.headers.get('content-length'), String(Buffer.byteLength(text)));
    assert.equal(await res.text(), text);
  });

  it('a reader that reads nothing leaves at most a few slices buffered, not the body', async () => {
    text = 'y'.repeat(64 * 1024 * 1024);
    const socket = net.connect(port, '127.0.0.1', () => socket.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n'));
    socket.on('error', () => {});
    await new Promise<void>((resolve) =>
      socket.once('data', () => {
        socket.pause();
        resolve();
      }),
    );
    // The server stops at the first slice the socket did not take: wait until it waits for a drain.
    await new Promise<void>((resolve, reject) => {
      let turns = 0;
      const check = () => {
        if (lastRes && lastRes.listenerCount('drain') > 0) resolve();
        else if (++turns > 500_000) reject(new Error(`never waited for the reader: ${lastRes?.writableLength} bytes buffered`));
        else setImmediate(check);
      };
      check();
    });
    assert.ok(lastRes!.writableLength <= 2 * SLICE_BYTES, `${lastRes!.writableLength} bytes buffered`);
    socket.destroy();
  });
});
