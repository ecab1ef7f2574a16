// The data-directory lock (lock.ts): one writer at a time; a lock whose process is gone is taken over.
import { test } from 'node:test';
import assert from 'node:assert/strict';
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
