// The store at open (restore.ts): journal replay after the newest usable image, a torn tail dropped, damage set
// aside with a copy and a report that names the loss exactly, a damaged image replaced by the older one. Real
// stores in temp dirs; the damage is made by editing their files.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { join } from 'node:path';
import { DurableDatabase, damageSummary } from '../../../../src/runtime/store/database';
import { tempDir } from '../helpers';
import { count, insert, twoImages } from './support';

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
  const journal = fs
    .readdirSync(dir)
    .filter((n) => n.startsWith('journal-'))
    .sort()
    .pop()!;
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

/** Frames of a journal file, located by walking its [u32 length][u32 crc] headers (independent of the reader). */
function frames(path: string): Array<{ seq: number; offset: number; bytes: number }> {
  const buf = fs.readFileSync(path);
  const out: Array<{ seq: number; offset: number; bytes: number }> = [];
  for (let off = 0; off + 8 <= buf.length;) {
    const len = buf.readUInt32LE(off);
    if (len === 0) break;
    out.push({ seq: JSON.parse(buf.subarray(off + 8, off + 8 + len).toString('utf8')).s, offset: off, bytes: 8 + len });
    off += 8 + len;
  }
  return out;
}

const newestJournal = (dir: string) =>
  join(
    dir,
    fs
      .readdirSync(dir)
      .filter((n) => /^journal-\d+\.log$/.test(n))
      .sort()
      .pop()!,
  );

test('damage in the middle of the newest journal: replay stops there, a copy is kept, the report names the loss', async () => {
  const dir = tempDir();
  const a = await DurableDatabase.open(dir);
  for (let i = 0; i < 10; i++) a.write(insert(i));
  const path = newestJournal(dir);
  const all = frames(path);
  assert.equal(all.length, 10);
  // One flipped byte inside the payload of the 5th record; the five after it are intact.
  const hit = all[4];
  const bytes = fs.readFileSync(path);
  bytes[hit.offset + 8 + Math.floor((hit.bytes - 8) / 2)] ^= 0xff;
  fs.writeFileSync(path, bytes);
  const logs: string[] = [];
  const b = await DurableDatabase.open(dir, { log: (m) => logs.push(m) });
  assert.equal(count(b), 4, 'the four batches before the damage are replayed');
  assert.equal(b.report.tornTail, false, 'valid frames follow the damage: not a torn tail');

  // A copy of the file exactly as it was found.
  assert.equal(b.report.quarantined.length, 1);
  const copy = join(dir, b.report.quarantined[0]);
  assert.ok(fs.existsSync(copy), 'the quarantined copy exists');
  assert.deepEqual(fs.readFileSync(copy), bytes);

  // The report names what was skipped: the damaged record, and the five valid ones after it, with their offsets.
  assert.equal(b.report.journalDamage.length, 1);
  const d = b.report.journalDamage[0];
  assert.equal(d.kind, 'damaged');
  assert.equal(d.copy, b.report.quarantined[0]);
  assert.deepEqual(d.damagedRanges, [{ offset: hit.offset, bytes: hit.bytes }]);
  assert.equal(d.lostBatches, 1);
  assert.deepEqual(d.missingSeqs, [hit.seq, hit.seq]);
  assert.equal(d.skippedBatches, 5);
  assert.deepEqual(d.skippedSeqs, [all[5].seq, all[9].seq]);
  assert.deepEqual(d.skippedBytes, { from: all[5].offset, to: all[9].offset + all[9].bytes });
  assert.equal(b.report.unrecoveredBatches, 6);
  // ...and so does the log, in one line.
  const line = logs.find((l) => l.includes('is damaged'));
  assert.ok(line, logs.join('\n'));
  assert.match(line!, new RegExp(`offset ${hit.offset} \\(${hit.bytes} bytes\\)`));
  assert.match(line!, /5 valid batches after it not replayed/);
  assert.match(line!, new RegExp(`bytes ${all[5].offset}–${all[9].offset + all[9].bytes}`));
  assert.match(damageSummary(b.report) ?? '', /6 acknowledged write batches could not be restored/);

  // The store goes on from the last replayed batch, and the next start finds nothing wrong.
  b.write(insert(100));
  const c = await DurableDatabase.open(dir);
  assert.equal(count(c), 5);
  assert.deepEqual(c.report.journalDamage, []);
  assert.deepEqual(c.report.quarantined, []);
  await c.close();
});

test('bad bytes at the end of the newest journal with nothing valid after them are a torn tail: dropped and located', async () => {
  const dir = tempDir();
  const a = await DurableDatabase.open(dir);
  for (let i = 0; i < 10; i++) a.write(insert(i));
  const path = newestJournal(dir);
  const last = frames(path)[9];
  const bytes = fs.readFileSync(path);
  bytes[last.offset + last.bytes - 3] ^= 0xff;
  fs.writeFileSync(path, bytes);
  const b = await DurableDatabase.open(dir);
  assert.equal(count(b), 9);
  assert.equal(b.report.tornTail, true);
  assert.deepEqual(b.report.torn, [{ journal: path.split('/').pop(), offset: last.offset, bytes: last.bytes }]);
  assert.deepEqual(b.report.quarantined, []);
  assert.equal(damageSummary(b.report), undefined);
  await b.close();
});

test('unreadable bytes between two records with the sequence intact: everything is replayed, a copy is kept', async () => {
  const dir = tempDir();
  const a = await DurableDatabase.open(dir);
  for (let i = 0; i < 10; i++) a.write(insert(i));
  const path = newestJournal(dir);
  const bytes = fs.readFileSync(path);
  const cut = frames(path)[6].offset;
  const junk = Buffer.from('not a record, but no batch is missing either');
  fs.writeFileSync(path, Buffer.concat([bytes.subarray(0, cut), junk, bytes.subarray(cut)]));
  const b = await DurableDatabase.open(dir);
  assert.equal(count(b), 10, 'frames after the junk continue the sequence, so they are replayed');
  assert.equal(b.report.quarantined.length, 1);
  assert.ok(fs.existsSync(join(dir, b.report.quarantined[0])));
  assert.deepEqual(b.report.journalDamage[0].damagedRanges, [{ offset: cut, bytes: junk.length }]);
  assert.equal(b.report.journalDamage[0].lostBatches, 0);
  assert.equal(b.report.journalDamage[0].skippedBatches, 0);
  assert.equal(b.report.unrecoveredBatches, 0);
  assert.match(damageSummary(b.report) ?? '', /everything acknowledged was restored/);
  await b.close();
});

test('damage in an older journal that replay needs: later journals are set aside and reported too', async () => {
  const dir = tempDir();
  await twoImages(dir); // left open, as a kill leaves it
  // The newest checkpoint is unreadable, so batches 21–45 come from two journals; the first of them is damaged.
  const checkpoints = fs
    .readdirSync(dir)
    .filter((n) => /^checkpoint-\d+\.sqlite$/.test(n))
    .sort();
  fs.truncateSync(join(dir, checkpoints[checkpoints.length - 1]), 100);
  const journals = fs
    .readdirSync(dir)
    .filter((n) => /^journal-\d+\.log$/.test(n))
    .sort();
  const middle = journals[journals.length - 2];
  const fr = frames(join(dir, middle));
  assert.deepEqual([fr[0].seq, fr[fr.length - 1].seq], [21, 40]);
  const bytes = fs.readFileSync(join(dir, middle));
  bytes[fr[4].offset + 12] ^= 0xff; // batch 25
  fs.writeFileSync(join(dir, middle), bytes);

  const b = await DurableDatabase.open(dir);
  assert.equal(count(b), 24);
  const [damaged, follows] = b.report.journalDamage;
  assert.equal(damaged.journal, middle);
  assert.deepEqual(damaged.missingSeqs, [25, 25]);
  assert.deepEqual(damaged.skippedSeqs, [26, 40]);
  assert.equal(follows.kind, 'follows');
  assert.equal(follows.journal, journals[journals.length - 1]);
  assert.deepEqual(follows.skippedSeqs, [41, 45]);
  assert.equal(b.report.unrecoveredBatches, 1 + 15 + 5);
  for (const q of b.report.quarantined) assert.ok(fs.existsSync(join(dir, q)), q);
  assert.equal(b.report.quarantined.length, 3, 'the checkpoint, the damaged journal and the one after it');
  // Later writes continue from batch 25 and survive a reopen with nothing new to report.
  b.write(insert(100));
  const c = await DurableDatabase.open(dir);
  assert.equal(count(c), 25);
  assert.deepEqual(c.report.journalDamage, []);
  await c.close();
});

test('a truncated newest checkpoint is set aside and the older one plus the journals rebuild everything', async () => {
  const dir = tempDir();
  await twoImages(dir); // left open, as a kill leaves it
  const checkpoints = fs
    .readdirSync(dir)
    .filter((n) => /^checkpoint-\d+\.sqlite$/.test(n))
    .sort();
  assert.ok(checkpoints.length >= 2);
  const newest = join(dir, checkpoints[checkpoints.length - 1]);
  fs.truncateSync(newest, Math.floor(fs.statSync(newest).size / 3));
  const b = await DurableDatabase.open(dir);
  assert.equal(count(b), 45);
  assert.equal(b.report.quarantined.length, 1);
  assert.ok(fs.readdirSync(dir).some((n) => n.includes('.corrupt-')));
  await b.close();
});
