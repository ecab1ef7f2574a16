// Journal frames (journal.ts): the encoding is JSON.stringify's, byte for byte, and the reader gives back what the
// writer wrote.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
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

test('a new journal grows by zeros written ahead in doubling steps from 64 KiB to 4 MiB, and reads back cleanly at every size', () => {
  // The first write of a generation writes ahead 64 KiB, not 4 MiB (issue #23 item 7): each growth doubles up to
  // 4 MiB. What a kill leaves at any moment is the file as it stands: the records written, then zeros.
  const dir = tempDir();
  const path = join(dir, 'journal-000000000001.log');
  const w = new JournalWriter(path);
  const KiB = 1024;
  const sizes: number[] = [];
  const big = 'x'.repeat(20 * KiB);
  for (let seq = 1; fs.statSync(path).size < 12 * 1024 * KiB; seq++) {
    w.write({ seq, ops: [['INSERT INTO t VALUES (?)', [big]]] });
    const size = fs.statSync(path).size;
    if (size !== sizes[sizes.length - 1]) {
      sizes.push(size);
      const read = readJournal(path);
      assert.equal(read.records.length, seq);
      assert.equal(read.goodBytes, w.bytes);
      assert.equal(read.tornTail, false, `a clean end at ${size} bytes`);
      assert.deepEqual(read.damaged, []);
    }
  }
  w.close();
  const steps = sizes.map((s, i) => (s - (sizes[i - 1] ?? 0)) / KiB);
  assert.deepEqual(steps.slice(0, 8), [64, 128, 256, 512, 1024, 2048, 4096, 4096]);
});
