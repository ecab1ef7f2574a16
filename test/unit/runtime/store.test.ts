import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { join } from 'node:path';
import { DurableDatabase } from '../../../src/runtime/store/database';
import { DataDirLock } from '../../../src/runtime/store/lock';
import { readJournal } from '../../../src/runtime/store/journal';
import { isRuntimeError } from '../../../src/runtime/errors';
import { tempDir } from './helpers';

const insert = (i: number) =>
  [
    [
      `INSERT INTO idempotency_keys (principal, scope, key, fingerprint, task_id, created_at) VALUES ('p', 's', ?, ?, ?, ?)`,
      [`k${i}`, `f${i}`, `t${i}`, i],
    ],
  ] as Array<[string, Array<string | number | null>]>;

const count = (db: DurableDatabase) => Number(db.get('SELECT COUNT(*) AS n FROM idempotency_keys')?.n);

test('acknowledged writes survive a reopen without a clean close (journal replay)', async () => {
  const dir = tempDir();
  const a = await DurableDatabase.open(dir);
  for (let i = 0; i < 50; i++) a.write(insert(i));
  // No close: the second open reads what the first left on disk, as after a crash.
  const b = await DurableDatabase.open(dir);
  assert.equal(count(b), 50);
  assert.equal(b.report.replayedBatches, 50);
  assert.equal(b.commitSeq, 50);
  await b.close();
});

test('a torn record at the end of the journal is dropped; everything before it stays', async () => {
  const dir = tempDir();
  const a = await DurableDatabase.open(dir);
  for (let i = 0; i < 10; i++) a.write(insert(i));
  const journal = fs.readdirSync(dir).filter((n) => n.startsWith('journal-')).sort().pop()!;
  const path = join(dir, journal);
  // Half of one more record: a header promising 100 bytes and a few bytes of payload.
  const torn = Buffer.alloc(12);
  torn.writeUInt32LE(100, 0);
  fs.appendFileSync(path, torn);
  const b = await DurableDatabase.open(dir);
  assert.equal(count(b), 10);
  assert.equal(b.report.tornTail, true);
  // Writing after the recovery continues cleanly and survives another reopen.
  b.write(insert(10));
  const c = await DurableDatabase.open(dir);
  assert.equal(count(c), 11);
  await c.close();
});

test('a corrupt record in the middle of the journal stops replay there and keeps a copy', async () => {
  const dir = tempDir();
  const a = await DurableDatabase.open(dir);
  for (let i = 0; i < 10; i++) a.write(insert(i));
  const journal = fs.readdirSync(dir).filter((n) => n.startsWith('journal-')).sort().pop()!;
  const path = join(dir, journal);
  const bytes = fs.readFileSync(path);
  bytes[Math.floor(readJournal(path).goodBytes / 2)] ^= 0xff;
  fs.writeFileSync(path, bytes);
  const b = await DurableDatabase.open(dir);
  const n = count(b);
  assert.ok(n >= 3 && n < 10, `replayed a prefix (${n})`);
  await b.close();
});

test('a truncated newest checkpoint is set aside and the older one plus the journals rebuild everything', async () => {
  const dir = tempDir();
  const a = await DurableDatabase.open(dir);
  for (let i = 0; i < 20; i++) a.write(insert(i));
  await a.checkpoint();
  for (let i = 20; i < 40; i++) a.write(insert(i));
  await a.checkpoint();
  for (let i = 40; i < 45; i++) a.write(insert(i));
  const checkpoints = fs.readdirSync(dir).filter((n) => /^checkpoint-\d+\.sqlite$/.test(n)).sort();
  assert.ok(checkpoints.length >= 2);
  const newest = join(dir, checkpoints[checkpoints.length - 1]);
  fs.truncateSync(newest, Math.floor(fs.statSync(newest).size / 3));
  const b = await DurableDatabase.open(dir);
  assert.equal(count(b), 45);
  assert.equal(b.report.quarantined.length, 1);
  assert.ok(fs.readdirSync(dir).some((n) => n.includes('.corrupt-')));
  await b.close();
});

test('a failing statement changes nothing and the store keeps working', async () => {
  const dir = tempDir();
  const a = await DurableDatabase.open(dir);
  a.write(insert(1));
  assert.throws(() => a.write([...insert(2), ['INSERT INTO no_such_table VALUES (1)', []]]));
  assert.equal(count(a), 1);
  a.write(insert(3));
  await a.close();
  const b = await DurableDatabase.open(dir);
  assert.equal(count(b), 2);
  await b.close();
});

test('checkpoints let old journals go and a clean close leaves a journal-free image', async () => {
  const dir = tempDir();
  const a = await DurableDatabase.open(dir, { checkpointBytes: 4096 });
  for (let i = 0; i < 400; i++) a.write(insert(i));
  await a.close();
  const journals = fs.readdirSync(dir).filter((n) => n.startsWith('journal-'));
  assert.ok(journals.length <= 3, `journals pruned (${journals.join(', ')})`);
  const b = await DurableDatabase.open(dir);
  assert.equal(count(b), 400);
  assert.equal(b.report.replayedBatches, 0);
  await b.close();
});

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
    JSON.stringify({ pid: 2 ** 22 + 12345, host: require('node:os').hostname(), token: 'x', startedAt: 0, heartbeatAt: Date.now() }),
  );
  const third = DataDirLock.acquire(dir);
  third.release();
});
