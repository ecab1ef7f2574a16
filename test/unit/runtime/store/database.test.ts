// The facade (database.ts): open, write, checkpoint on size, close. What each part does is tested beside it
// (restore, groupCommit, checkpoint, damageReport, foldWorkerClient); here, what only the whole store does.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { DurableDatabase, type WriteOp } from '../../../../src/runtime/store/database';
import { tempDir } from '../helpers';

const insert = (i: number): WriteOp[] => [
  [
    `INSERT INTO idempotency_keys (principal, scope, key, fingerprint, task_id, created_at) VALUES ('p', 's', ?, ?, ?, ?)`,
    [`k${i}`, `f${i}`, `t${i}`, i],
  ],
];
const count = (db: DurableDatabase) => Number(db.get('SELECT COUNT(*) AS n FROM idempotency_keys')?.n);

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

test('a closed store refuses writes and a second close is a no-op', async () => {
  const dir = tempDir();
  const a = await DurableDatabase.open(dir);
  a.write(insert(1));
  await a.close();
  await a.close();
  assert.throws(() => a.write(insert(2)), /closed/);
  const b = await DurableDatabase.open(dir);
  assert.equal(count(b), 1);
  assert.equal(b.report.replayedBatches, 0, 'the close left an image holding everything');
  await b.close();
});
