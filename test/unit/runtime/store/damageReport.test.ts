// The damage report (damageReport.ts) as the user and the log read it: a real store whose files were damaged, then
// opened; the entry and its wording must name exactly what was lost. (Damage in the middle of a journal, a torn
// tail and junk between frames: restore.test.ts.)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { join } from 'node:path';
import { DurableDatabase, damageSummary, describeDamage } from '../../../../src/runtime/store/database';
import { readJournal } from '../../../../src/runtime/store/journal';
import { tempDir } from '../helpers';
import { count, insert, named, twoImages } from './support';

test('a clean store has no summary', async () => {
  const dir = tempDir();
  const a = await DurableDatabase.open(dir);
  for (let i = 0; i < 5; i++) a.write(insert(i));
  const b = await DurableDatabase.open(dir);
  assert.equal(b.report.replayedBatches, 5);
  assert.deepEqual(b.report.journalDamage, []);
  assert.equal(damageSummary(b.report), undefined);
  await b.close();
});

test('a journal lost with its image: the next journal is a gap, named with the missing and the skipped batches', async () => {
  const dir = tempDir();
  await twoImages(dir); // left open, as a kill leaves it
  // Images at 20 and 40, journals from 21 and from 41. The newest image is unreadable and the journal holding
  // batches 21–40 is gone: replay from the image at 20 finds batch 41 where 21 should be.
  const images = named(dir, /^checkpoint-\d+\.sqlite$/);
  const journals = named(dir, /^journal-\d+\.log$/);
  assert.equal(journals.length, 2);
  fs.truncateSync(join(dir, images[images.length - 1]), 100);
  fs.rmSync(join(dir, journals[0]));
  const last = journals[1];
  const lastBytes = readJournal(join(dir, last)).goodBytes; // the file is longer: preallocated zeros

  const logs: string[] = [];
  const b = await DurableDatabase.open(dir, { log: (m) => logs.push(m) });
  assert.equal(count(b), 20);
  assert.equal(b.report.journalDamage.length, 1);
  const d = b.report.journalDamage[0];
  assert.equal(d.kind, 'gap');
  assert.equal(d.journal, last);
  assert.deepEqual(d.damagedRanges, []);
  assert.deepEqual(d.missingSeqs, [21, 40]);
  assert.equal(d.lostBatches, 20);
  assert.deepEqual(d.skippedSeqs, [41, 45]);
  assert.deepEqual(d.skippedBytes, { from: 0, to: lastBytes });
  assert.ok(fs.existsSync(join(dir, d.copy)), 'nothing was replayed from it: moved aside whole');
  assert.ok(!fs.existsSync(join(dir, last)));
  assert.equal(b.report.unrecoveredBatches, 25);

  const line = describeDamage(d);
  assert.equal(
    line,
    `journal gap in ${last}; 20 batches missing (seq 21–40); 5 valid batches after it not replayed (seq 41–45, bytes 0–${lastBytes}); copy kept as ${d.copy}`,
  );
  assert.ok(
    logs.some((l) => l === `store: ${line}`),
    logs.join('\n'),
  );
  assert.equal(
    damageSummary(b.report),
    `The task store was damaged: 25 acknowledged write batches could not be restored (recent tasks or events may be missing). ${line}. The damaged files were kept in the data directory.`,
  );
  await b.close();
});
