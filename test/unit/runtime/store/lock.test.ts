// The data-directory lock (lock.ts): one writer at a time; a lock whose process is gone is taken over.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import * as fs from 'node:fs';
import * as os from 'node:os';
import { join } from 'node:path';
import { isRuntimeError } from '../../../../src/runtime/errors';
import { DataDirLock, isLockStale, readLockOwner } from '../../../../src/runtime/store/lock';
import { tempDir } from '../helpers';

test('one writer per data directory: a second lock fails clearly; a dead owner is taken over', async () => {
  const dir = tempDir();
  const first = DataDirLock.acquire(dir);
  assert.throws(
    () => DataDirLock.acquire(dir),
    (e: unknown) => isRuntimeError(e, 'store_locked') && /in use by process/.test((e as Error).message),
  );
  first.release();
  const second = DataDirLock.acquire(dir);
  second.release();
  // A lock left by a process that no longer exists.
  fs.writeFileSync(
    join(dir, 'owner.lock'),
    JSON.stringify({ pid: 2 ** 22 + 12345, host: os.hostname(), token: 'x', startedAt: 0, heartbeatAt: Date.now() }),
  );
  const third = DataDirLock.acquire(dir);
  third.release();
});

test('a live owner on this host is not stale; the same owner with a dead pid is', () => {
  const dir = tempDir();
  const lock = DataDirLock.acquire(dir);
  const owner = readLockOwner(dir);
  assert.ok(owner);
  assert.equal(owner.pid, process.pid);
  assert.equal(isLockStale(owner), false);
  assert.equal(isLockStale({ ...owner, pid: 2 ** 22 + 12345 }), true);
  // Another host's owner is judged by its heartbeat alone.
  assert.equal(isLockStale({ ...owner, host: `${owner.host}-elsewhere`, pid: 2 ** 22 + 12345 }), false);
  lock.release();
});

test('a restart right after its owner is SIGKILLed waits for it to go, then takes the lock', async () => {
  const dir = tempDir();
  // The owner: another process that takes the lock and says so.
  const owner = spawn(
    process.execPath,
    [
      '-e',
      `require(${JSON.stringify(require.resolve('../../../../src/runtime/store/lock'))}).DataDirLock.acquire(process.argv[1]); console.log('locked'); setInterval(() => {}, 1e6);`,
      dir,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  try {
    await once(owner.stdout!, 'data');
    assert.equal(readLockOwner(dir)?.pid, owner.pid);
    let looks = 0;
    const lock = await DataDirLock.acquireWaiting(dir, () => {}, {
      maxMs: 60_000,
      // The first refusal is the moment of the SIGKILL: the owner still exists (until the kernel has torn it down and
      // its parent reaped it), and the lock must be waited for, not refused. Later looks come at once.
      sleep: async () => {
        if (looks++ === 0) owner.kill('SIGKILL');
        await new Promise((resolve) => setImmediate(resolve));
      },
    });
    assert.ok(looks >= 1, 'it was refused while the owner lived, and waited');
    assert.equal(readLockOwner(dir)?.pid, process.pid);
    lock.release();
  } finally {
    owner.kill('SIGKILL');
  }
});

test('a live owner on this host is waited for up to the bound, then refused naming the wait', async () => {
  const dir = tempDir();
  const held = DataDirLock.acquire(dir);
  let clock = 1_000_000;
  const sleeps: number[] = [];
  await assert.rejects(
    DataDirLock.acquireWaiting(dir, () => {}, {
      maxMs: 5_000,
      pollMs: 100,
      now: () => clock,
      sleep: async (ms) => {
        sleeps.push(ms);
        clock += ms;
      },
    }),
    (e: unknown) => isRuntimeError(e, 'store_locked') && /in use by process \d+ .*; waited 5 s for it to exit\.$/.test((e as Error).message),
  );
  assert.equal(sleeps.length, 50);
  assert.equal(
    sleeps.reduce((a, b) => a + b, 0),
    5_000,
  );
  held.release();
});

test("another host's owner with a fresh heartbeat is refused at once: only its heartbeat can tell it is gone", async () => {
  const dir = tempDir();
  fs.writeFileSync(
    join(dir, 'owner.lock'),
    JSON.stringify({ pid: process.pid, host: `${os.hostname()}-elsewhere`, token: 'x', startedAt: 0, heartbeatAt: Date.now() }),
  );
  let slept = false;
  await assert.rejects(
    DataDirLock.acquireWaiting(dir, () => {}, {
      maxMs: 5_000,
      sleep: async () => {
        slept = true;
      },
    }),
    (e: unknown) => isRuntimeError(e, 'store_locked'),
  );
  assert.equal(slept, false);
});
