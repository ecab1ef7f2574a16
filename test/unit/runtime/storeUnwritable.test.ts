// A failed journal append stops writes: the store refuses with store_unwritable — even a batch the file system
// would take again — until a probe (zero what the failed append left, sync) succeeds, on the next write or on the
// maintenance timer. The fault is real: RLIMIT_FSIZE on this test process (see test/fixtures/fileFaults.ts).
import { test, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { join } from 'node:path';
import { DurableDatabase } from '../../../src/runtime/store/database';
import { readJournal } from '../../../src/runtime/store/journal';
import { isRuntimeError } from '../../../src/runtime/errors';
import { fileSizeLimitUnavailable, limitFileSize, requireFault, skipOutsideCi } from '../../fixtures/fileFaults';
import { tempDir } from './helpers';
import { waitFor } from '../../support/wait';

const unavailable = fileSizeLimitUnavailable();
const skip = skipOutsideCi(unavailable);

afterEach(() => {
  if (!unavailable) limitFileSize(process.pid, 'unlimited');
});

const insert = (i: number, pad = 0) =>
  [
    [
      `INSERT INTO idempotency_keys (principal, scope, key, fingerprint, task_id, created_at) VALUES ('p', 's', ?, ?, ?, ?)`,
      [`k${i}`, 'f'.repeat(pad + 1), `t${i}`, i],
    ],
  ] as Array<[string, Array<string | number | null>]>;

const count = (db: DurableDatabase) => Number(db.get('SELECT COUNT(*) AS n FROM idempotency_keys')?.n);
const newestJournal = (dir: string) =>
  join(
    dir,
    fs
      .readdirSync(dir)
      .filter((n) => /^journal-\d+\.log$/.test(n))
      .sort()
      .pop()!,
  );
const refused = (e: unknown) => isRuntimeError(e, 'store_unwritable');

test('after a failed append the store refuses writes until a probe write and sync succeed', { skip }, async () => {
  requireFault(unavailable, 'limiting the file size with prlimit');
  const dir = tempDir();
  const logs: string[] = [];
  const db = await DurableDatabase.open(dir, { log: (m) => logs.push(m) });
  try {
    for (let i = 0; i < 5; i++) db.write(insert(i));
    const path = newestJournal(dir);
    const good = db.journalBytes;

    // The file system takes 300 more bytes of any file: a 2 KB batch is cut short and fails with EFBIG.
    limitFileSize(process.pid, good + 300);
    assert.throws(() => db.write(insert(5, 2000)), refused);
    assert.equal(db.writeError && (db.writeError as NodeJS.ErrnoException).code, 'EFBIG', 'the store marked itself unwritable');
    assert.ok(logs.some((l) => /journal write failed \(EFBIG\)/.test(l)));

    // A small batch would fit under the limit, but the bytes the failed append left cannot be cleaned yet: refused,
    // nothing applied, and no new journal generation is started either.
    assert.throws(() => db.write(insert(6)), refused);
    assert.equal(count(db), 5);
    await assert.rejects(db.checkpoint(), refused);
    assert.equal(newestJournal(dir), path);

    // Space comes back: the next write probes first, then goes through.
    limitFileSize(process.pid, 'unlimited');
    db.write(insert(7));
    assert.equal(db.writeError, undefined);
    assert.ok(logs.some((l) => /probe write and sync succeeded after EFBIG/.test(l)));
    assert.equal(count(db), 6);

    // On disk: exactly the acknowledged records, then zeros (nothing of the refused batch is left to surface).
    const read = readJournal(path);
    assert.deepEqual(
      read.records.map((r) => r.seq),
      [1, 2, 3, 4, 5, 6],
    );
    assert.equal(read.torn, undefined);
    assert.deepEqual(read.damaged, []);
    const reopened = await DurableDatabase.open(dir);
    assert.equal(count(reopened), 6);
    assert.deepEqual(reopened.report.torn, []);
    assert.deepEqual(reopened.report.quarantined, []);
    await reopened.close();
  } finally {
    limitFileSize(process.pid, 'unlimited');
  }
});

test('the maintenance timer probes too: writes are accepted again without waiting for a write', { skip }, async () => {
  requireFault(unavailable, 'limiting the file size with prlimit');
  const dir = tempDir();
  const db = await DurableDatabase.open(dir, { checkpointIntervalMs: 50 });
  try {
    db.write(insert(0));
    limitFileSize(process.pid, 0);
    assert.throws(() => db.write(insert(1)), refused);
    assert.ok(db.writeError);
    limitFileSize(process.pid, 'unlimited');
    await waitFor(() => db.writeError === undefined, 'the timer probe to succeed');
    db.write(insert(2));
    assert.equal(count(db), 2);
  } finally {
    limitFileSize(process.pid, 'unlimited');
    await db.close();
  }
});
