// The change stream (`/task_runtime/changes`) and fair shares: it counts only against its owner's streams, and it
// ends once it has told no change for changeStreamIdleMs, by the door's clock (a ManualClock here, checked at every
// heartbeat), so an abandoned one frees its owner's slot. No sleeps: the test moves the clock and waits for what the
// stream says.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, test } from 'node:test';
import { startListener, type Listener } from '../../../src/protocols/http/listener';
import { LMSP_PREFIX } from '../../../src/protocols/lmsp/lmspConstants';
import { closeDoorDeps, createDoorDeps, type LmspDeps } from '../../../src/protocols/lmsp/deps';
import { createLmspDoor, type LmspDoor } from '../../../src/protocols/lmsp/lmspDoor';
import { TaskRuntime } from '../../../src/runtime/runtime';
import { ScriptedBackend, says } from '../../fixtures/scriptedBackend';
import { ManualClock } from '../../support/clock';

const IDLE_MS = 60_000;
const TOKENS = new Map([
  ['tok-alice-0123456789', 'alice'],
  ['tok-bob-0123456789ab', 'bob'],
]);

let runtime: TaskRuntime;
let deps: LmspDeps;
let door: LmspDoor;
let listener: Listener;
let dataDir: string;
const clock = new ManualClock(1_700_000_000_000);

before(async () => {
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tr-changes-'));
  runtime = await TaskRuntime.open({ dataDir, backend: new ScriptedBackend(says('hi')), deltaFlushMs: 0 });
  deps = createDoorDeps(runtime, { heartbeatMs: 10, changeStreamIdleMs: IDLE_MS, now: clock.now, maxSseStreamsPerPrincipal: 1 });
  door = createLmspDoor(deps);
  listener = await startListener({ port: 0, tokens: TOKENS, doors: [{ prefix: LMSP_PREFIX, handler: door.handle, problemStyle: 'problem+json' }] });
});

after(async () => {
  closeDoorDeps(deps);
  await door.close();
  await listener.close();
  await runtime.close();
  fs.rmSync(dataDir, { recursive: true, force: true });
});

/** An open change stream: what it has said so far, and waits on what it says next. */
async function openChanges(token: string) {
  const res = await fetch(`${listener.url}${LMSP_PREFIX}/task_runtime/changes`, { headers: { authorization: `Bearer ${token}` } });
  let text = '';
  let ended = false;
  const waiters: Array<() => void> = [];
  const reader = res.body!.getReader();
  const pump = (async () => {
    const decoder = new TextDecoder();
    for (;;) {
      const { done, value } = await reader.read().catch(() => ({ done: true, value: undefined }));
      if (done) break;
      text += decoder.decode(value, { stream: true });
      for (const w of waiters.splice(0)) w();
    }
    ended = true;
    for (const w of waiters.splice(0)) w();
  })();
  const until = async (pred: () => boolean) => {
    while (!pred()) await new Promise<void>((r) => waiters.push(r));
  };
  return {
    res,
    get text() {
      return text;
    },
    get ended() {
      return ended;
    },
    until,
    /** Waits for `n` more heartbeats than there are now (each check of the idle clock runs beside one). */
    async beats(n: number) {
      const count = () => text.split(': ping').length - 1;
      const target = count() + n;
      await until(() => count() >= target || ended);
    },
    async close() {
      await reader.cancel().catch(() => {});
      await pump;
    },
  };
}

test('a change stream counts only against its owner, stays open while changes come, and ends after the idle timeout', async () => {
  const alice = await openChanges('tok-alice-0123456789');
  assert.equal(alice.res.status, 200);
  await alice.until(() => alice.text.includes(': subscribed'));

  // Alice's share (1 here) is taken; bob's is not, and no shared slot was used.
  const second = await fetch(`${listener.url}${LMSP_PREFIX}/task_runtime/changes`, { headers: { authorization: 'Bearer tok-alice-0123456789' } });
  assert.equal(second.status, 429);
  const problem = (await second.json()) as { code: string; limit: { name: string; max: number } };
  assert.equal(problem.code, 'limit_exceeded');
  assert.deepEqual([problem.limit.name, problem.limit.max], ['max_streams_per_principal', 1]);
  const bob = await openChanges('tok-bob-0123456789ab');
  assert.equal(bob.res.status, 200);

  // A change resets the idle clock.
  clock.advance(IDLE_MS / 2);
  const { task } = runtime.createTask({ origin: 'lmsp', principal: 'alice', input: { model: 'm', input: 'x' } });
  await alice.until(() => alice.text.includes(task.id));
  clock.advance(IDLE_MS - 1000); // 1.5 × the timeout since the stream opened, but less since the change
  await alice.beats(3);
  assert.equal(alice.ended, false, 'a stream with a recent change stays open');

  // Bob's stream told nothing since it opened: it ends. Then alice's, once the clock passes her last change.
  await bob.until(() => bob.ended);
  assert.match(bob.text, /: idle/);
  clock.advance(1000);
  await alice.until(() => alice.ended);
  assert.match(alice.text, /: idle: reconnect to follow changes/);

  // Her slot is free again.
  const again = await openChanges('tok-alice-0123456789');
  assert.equal(again.res.status, 200);
  await again.close();
  await Promise.all([alice.close(), bob.close()]);
});
