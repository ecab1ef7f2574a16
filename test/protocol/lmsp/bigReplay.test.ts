// A finished task's event history larger than the SSE writer's cap on unread bytes (8 MiB) replays to its end:
// the replay is written with backpressure, so only a reader that stops reading is cut off, never a long history.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
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
    runtime = await TaskRuntime.open({ dataDir, backend: new ScriptedBackend(writesALot), deltaFlushMs: 0 });
    endpoint = await startEndpoint(runtime, { port: 0, tokens: new Map([[TOKEN, 'alice']]) });
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
});
