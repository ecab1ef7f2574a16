// A finished task's event history larger than the SSE writer's cap on unread bytes (8 MiB) replays to its end:
// the replay is written with backpressure, so only a reader that stops reading is cut off, never a long history.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startEndpoint, type Endpoint } from '../../../src/protocols/endpoint';
import { TaskRuntime } from '../../../src/runtime/runtime';
import { ScriptedBackend, type Script } from '../../fixtures/scriptedBackend';
import { taskReaches } from '../../support/wait';

const TOKEN = 'tok-big-replay-0123456789';
const PIECE = 'x'.repeat(64 * 1024);
const PIECES = 200; // 12.5 MiB of text, and its events

/** A model that writes PIECES pieces, each its own delta event. */
const writesALot: Script = async (_req, o) => {
  for (let i = 0; i < PIECES; i++) o.onText(PIECE, 1);
  return { finishReason: 'stop', inputTokens: 1, outputTokens: PIECES };
};

describe('replaying a large event history', () => {
  let dataDir: string;
  let runtime: TaskRuntime;
  let endpoint: Endpoint;

  before(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tr-big-replay-'));
    // Two 12.5 MiB histories: more than the default stored-bytes share (its events count).
    runtime = await TaskRuntime.open({
      dataDir,
      backend: new ScriptedBackend(writesALot),
      deltaFlushMs: 0,
      limits: { maxStoredBytesPerPrincipal: 1024 * 1024 * 1024 },
    });
    endpoint = await startEndpoint(runtime, { port: 0, tokens: new Map([[TOKEN, 'alice']]), lmsp: { maxSseStreamsPerPrincipal: 2 } });
  });
  after(async () => {
    await endpoint?.close();
    await runtime?.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('streams every event of a 12 MiB history to the terminal one, also from a cursor', async () => {
    const { task } = runtime.createTask({ origin: 'lmsp', principal: 'alice', input: { model: 'm', input: 'go' } });
    await taskReaches(runtime, task.id, (t) => t.status === 'succeeded', 'the task to succeed');
    for (const after of [undefined, 3]) {
      const url = `${endpoint.lmspUrl}/tasks/${task.id}/events${after === undefined ? '' : `?after=${after}`}`;
      const res = await fetch(url, { headers: { authorization: `Bearer ${TOKEN}` } });
      assert.equal(res.status, 200);
      const text = await res.text();
      assert.ok(text.length > 8 * 1024 * 1024, `only ${text.length} bytes arrived`);
      assert.match(text, /event: response\.completed/, 'the terminal event arrived');
      // The terminal event carries the whole answer: every piece, in one message.
      const completed = text.slice(text.lastIndexOf('event: response.completed'));
      assert.equal(completed.split(PIECE).length - 1, PIECES, 'the whole answer arrived');
    }
  });

  it('a finished replay holds its stream slot until its socket took everything; a reader that reads nothing keeps it', async () => {
    const { task } = runtime.createTask({ origin: 'lmsp', principal: 'alice', input: { model: 'm', input: 'go' } });
    await taskReaches(runtime, task.id, (t) => t.status === 'succeeded', 'the task to succeed');
    const url = new URL(`${endpoint.lmspUrl}/tasks/${task.id}/events`);
    // Two readers that read only the response head, then nothing: the 12 MiB replay waits in their sockets.
    const stalled = await Promise.all([0, 1].map(() => stalledReader(url)));
    try {
      const third = await fetch(url, { headers: { authorization: `Bearer ${TOKEN}` } });
      assert.equal(third.status, 429, 'both slots are held while the replays wait on their readers');
      await third.body?.cancel();
    } finally {
      for (const s of stalled) s.destroy();
    }
    // Gone readers give their slots back.
    await waitFor(async () => {
      const res = await fetch(url, { headers: { authorization: `Bearer ${TOKEN}` } });
      await res.body?.cancel();
      return res.status === 200;
    });
  });
});

/** A raw connection that sends the request, reads until the response head, then pauses for good. */
function stalledReader(url: URL): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(url.port), url.hostname, () => {
      socket.write(`GET ${url.pathname} HTTP/1.1\r\nHost: ${url.host}\r\nAuthorization: Bearer ${TOKEN}\r\n\r\n`);
    });
    let head = '';
    socket.on('data', (chunk: Buffer) => {
      head += chunk.toString('latin1');
      if (!head.includes('\r\n\r\n')) return;
      socket.pause();
      socket.removeAllListeners('data');
      if (!head.startsWith('HTTP/1.1 200')) reject(new Error(`replay refused: ${head.slice(0, 80)}`));
      else resolve(socket);
    });
    socket.on('error', () => {});
  });
}

/** Polls `check` on each turn of the event loop's I/O (each call is a real request), a bounded number of times. */
async function waitFor(check: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 200; i++) if (await check()) return;
  assert.fail('the slots never came back');
}
