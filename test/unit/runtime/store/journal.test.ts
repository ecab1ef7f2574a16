// Journal frames (journal.ts): the encoding is JSON.stringify's, byte for byte, and the reader gives back what the
// writer wrote.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { JournalWriter, encodeRecord, readJournal, type WriteOp } from '../../../../src/runtime/store/journal';
import { tempDir } from '../helpers';

const insert = (i: number): WriteOp[] => [
  [
    `INSERT INTO idempotency_keys (principal, scope, key, fingerprint, task_id, created_at) VALUES ('p', 's', ?, ?, ?, ?)`,
    [`k${i}`, `f${i}`, `t${i}`, i],
  ],
];

test('journal records are JSON.stringify({ s, o }) byte for byte, and read back as written', () => {
  const dir = tempDir();
  const path = join(dir, 'journal-000000000001.log');
  const records: Array<{ seq: number; ops: WriteOp[] }> = [
    { seq: 1, ops: [] },
    { seq: 2, ops: insert(1) },
    { seq: 3, ops: [['INSERT "q" \\ é ☃ 😀', [1.5, -0, 1e21, null, 'a"b\u2028\u0000', '😀']], ...insert(2), ...insert(3)] },
    // larger than the writer's scratch buffer
    { seq: 4, ops: [['INSERT INTO t VALUES (?)', ['x'.repeat(100_000)]]] },
    { seq: 5, ops: insert(4) },
  ];
  const cache = new Map<string, string>();
  for (const r of records) assert.equal(encodeRecord(r, cache), JSON.stringify({ s: r.seq, o: r.ops }));
  const w = new JournalWriter(path);
  for (const r of records) w.write(r);
  w.sync();
  w.close();
  const read = readJournal(path);
  assert.deepEqual(
    read.records.map((f) => ({ seq: f.seq, ops: f.ops })),
    records.map((r) => ({ seq: r.seq, ops: JSON.parse(JSON.stringify(r.ops)) })),
  );
  assert.equal(read.tornTail, false);
  assert.equal(read.damaged.length, 0);
});

