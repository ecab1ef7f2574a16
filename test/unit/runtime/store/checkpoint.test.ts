// Checkpoints made by the worker (a fold of the previous image and the closed journals), sealed images, and stores
// written by the previous version (unsealed images). Real stores, real files.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { join } from 'node:path';
import { crc32 } from 'node:zlib';
import { DurableDatabase } from '../../../../src/runtime/store/database';
import { checkImage, loadSqlJs } from '../../../../src/runtime/store/checkpoint';
import { migrate } from '../../../../src/runtime/store/migrations';
import { tempDir } from '../helpers';

type Op = [string, Array<string | number | null>];
const insert = (i: number, pad = ''): Op[] => [
  [
    `INSERT INTO idempotency_keys (principal, scope, key, fingerprint, task_id, created_at) VALUES ('p', 's', ?, ?, ?, ?)`,
    [`k${i}`, `f${i}${pad}`, `t${i}`, i],
  ],
];
const count = (db: DurableDatabase) => Number(db.get('SELECT COUNT(*) AS n FROM idempotency_keys')?.n);
const keys = (db: DurableDatabase) => db.all('SELECT key, fingerprint FROM idempotency_keys ORDER BY created_at');
const checkpoints = (dir: string) =>
  fs
    .readdirSync(dir)
    .filter((n) => /^checkpoint-\d+\.sqlite$/.test(n))
    .sort();

test('the worker folds the previous image and the closed journal into a new one; writes during the fold go on', async () => {
  const dir = tempDir();
  const a = await DurableDatabase.open(dir, { inlineCheckpointBytes: 0 });
  for (let i = 0; i < 300; i++) a.write(insert(i));
  const fold = a.checkpoint();
  // The host keeps writing while the worker works: these batches go to the next journal generation.
  for (let i = 300; i < 400; i++) a.write(insert(i));
  await fold;
  assert.equal(a.lastCheckpoint?.mode, 'worker');
  assert.equal(a.lastCheckpoint?.seq, 300);
  const newest = checkpoints(dir).pop()!;
  assert.equal(newest, 'checkpoint-000000000300.sqlite');
  assert.equal(checkImage(fs.readFileSync(join(dir, newest))), 'sealed');
  const expected = keys(a);
  // No close: the next open starts from the worker's image and replays only what came after it.
  const b = await DurableDatabase.open(dir, { inlineCheckpointBytes: 0 });
  assert.equal(b.report.checkpointSeq, 300);
  assert.equal(b.report.replayedBatches, 100);
  assert.deepEqual(keys(b), expected);
  // Folding again from the worker's own image (and the open's replay) keeps everything.
  b.write(insert(400));
  await b.close();
  const c = await DurableDatabase.open(dir);
  assert.equal(c.report.replayedBatches, 0);
  assert.equal(count(c), 401);
  await c.close();
});

test('a store above the inline size is checkpointed by the worker with the default options', async () => {
  const dir = tempDir();
  const a = await DurableDatabase.open(dir);
  const pad = 'x'.repeat(2000);
  for (let i = 0; i < 1500; i += 50) a.write(Array.from({ length: 50 }, (_, k) => insert(i + k, pad)[0]));
  await a.checkpoint();
  assert.equal(a.lastCheckpoint?.mode, 'worker', 'about 3 MB: above the 2 MiB inline limit');
  await a.close();
  const b = await DurableDatabase.open(dir);
  assert.equal(count(b), 1500);
  await b.close();
});

test('a flipped byte inside a sealed image is caught by its checksum: set aside, rebuilt from the older one', async () => {
  const dir = tempDir();
  const a = await DurableDatabase.open(dir, { inlineCheckpointBytes: 0 });
  for (let i = 0; i < 20; i++) a.write(insert(i));
  await a.checkpoint();
  for (let i = 20; i < 40; i++) a.write(insert(i));
  await a.checkpoint();
  const newest = join(dir, checkpoints(dir).pop()!);
  // One byte of row data in the last page: structure intact, so quick_check alone need not notice it.
  const bytes = fs.readFileSync(newest);
  const at = bytes.indexOf(Buffer.from('f39'));
  assert.ok(at > 0, 'the row is in the image');
  bytes[at + 1] ^= 0x01;
  fs.writeFileSync(newest, bytes);
  const logs: string[] = [];
  const b = await DurableDatabase.open(dir, { log: (m) => logs.push(m) });
  assert.equal(b.report.quarantined.length, 1);
  assert.match(logs.join('\n'), /checksum mismatch/);
  assert.equal(b.get("SELECT fingerprint FROM idempotency_keys WHERE key = 'k39'")?.fingerprint, 'f39');
  assert.equal(count(b), 40);
  await b.close();
});

test('when the fold cannot run (its base image is gone) the host exports instead and nothing is lost', async () => {
  const dir = tempDir();
  const logs: string[] = [];
  const a = await DurableDatabase.open(dir, { inlineCheckpointBytes: 0, log: (m) => logs.push(m) });
  for (let i = 0; i < 30; i++) a.write(insert(i));
  for (const name of checkpoints(dir)) fs.rmSync(join(dir, name));
  await a.checkpoint();
  assert.equal(a.lastCheckpoint?.mode, 'fallback');
  assert.match(logs.join('\n'), /checkpoint worker failed/);
  for (let i = 30; i < 35; i++) a.write(insert(i));
  const b = await DurableDatabase.open(dir);
  assert.equal(count(b), 35);
  assert.deepEqual(b.report.quarantined, []);
  await b.close();
});

test('a store written by the previous version (unsealed image, journal) opens, and its next image is sealed', async () => {
  const dir = tempDir();
  // The previous version's layout: an exported image without our mark whose meta names its sequence, and a journal
  // after it whose batches set meta.journal_seq themselves.
  const SQL = await loadSqlJs();
  const old = new SQL.Database();
  migrate(old);
  old.run("INSERT INTO idempotency_keys VALUES ('p', 's', 'old', 'f', 't', 1)");
  old.run("UPDATE meta SET value = '7' WHERE key = 'journal_seq'");
  fs.writeFileSync(join(dir, 'checkpoint-000000000007.sqlite'), old.export());
  old.close();
  assert.equal(checkImage(fs.readFileSync(join(dir, 'checkpoint-000000000007.sqlite'))), 'unsealed');
  const payload = Buffer.from(
    JSON.stringify({
      s: 8,
      o: [...insert(8), ["UPDATE meta SET value = ? WHERE key = 'journal_seq'", ['8']]],
    }),
  );
  const frame = Buffer.alloc(8 + payload.length);
  frame.writeUInt32LE(payload.length, 0);
  frame.writeUInt32LE(crc32(payload), 4);
  payload.copy(frame, 8);
  fs.writeFileSync(join(dir, 'journal-000000000008.log'), frame);

  const a = await DurableDatabase.open(dir, { inlineCheckpointBytes: 0 });
  assert.equal(a.report.checkpointSeq, 7);
  assert.equal(a.report.replayedBatches, 1);
  assert.equal(count(a), 2);
  assert.equal(a.lastCheckpoint?.mode, 'worker', 'the open folded the old image and the journal');
  assert.equal(checkImage(fs.readFileSync(join(dir, checkpoints(dir).pop()!))), 'sealed');
  a.write(insert(9));
  await a.close();
  const b = await DurableDatabase.open(dir);
  assert.equal(count(b), 3);
  await b.close();
});

test('a checkpoint temp file left by a kill is removed at the next open', async () => {
  const dir = tempDir();
  const a = await DurableDatabase.open(dir);
  a.write(insert(1));
  fs.writeFileSync(join(dir, `checkpoint-000000000001.sqlite.${process.pid}.tmp`), 'half an image');
  const b = await DurableDatabase.open(dir);
  assert.deepEqual(
    fs.readdirSync(dir).filter((n) => n.endsWith('.tmp')),
    [],
  );
  assert.equal(count(b), 1);
  await b.close();
});

/** The last checkpoint's VACUUM (a function: no narrowing across checkpoints). */
const vacuumOf = (db: DurableDatabase) => db.lastCheckpoint?.vacuum;

for (const [mode, inlineCheckpointBytes] of [
  ['worker', 0],
  ['inline', Infinity],
] as const) {
  test(`deleted rows' pages come back at the next checkpoint (${mode}): the image shrinks, and stays small after a reopen`, async (t) => {
    const dir = tempDir();
    const a = await DurableDatabase.open(dir, { inlineCheckpointBytes });
    const pad = 'x'.repeat(20_000);
    for (let i = 0; i < 400; i += 50) a.write(Array.from({ length: 50 }, (_, k) => insert(i + k, pad)[0]));
    await a.checkpoint();
    const full = a.lastCheckpoint!.bytes;
    assert.equal(vacuumOf(a), undefined, 'nothing to give back yet');
    a.write([['DELETE FROM idempotency_keys WHERE created_at >= 40', []]]);
    await a.checkpoint();
    assert.equal(a.lastCheckpoint?.mode, mode);
    const shrunk = a.lastCheckpoint!.bytes;
    t.diagnostic(`${full} → ${shrunk} bytes; VACUUM ${vacuumOf(a)?.ms.toFixed(1)} ms`);
    assert.ok(vacuumOf(a), 'vacuumed');
    assert.ok(shrunk < full / 5, `${full} → ${shrunk}`);
    assert.equal(fs.statSync(join(dir, checkpoints(dir).pop()!)).size, shrunk);
    // A few freed pages are not worth a VACUUM.
    a.write([['DELETE FROM idempotency_keys WHERE created_at = 39', []]]);
    await a.checkpoint();
    assert.equal(vacuumOf(a), undefined);
    a.write(insert(1000));
    await a.close();
    const b = await DurableDatabase.open(dir);
    assert.equal(count(b), 40);
    assert.equal(b.get("SELECT key FROM idempotency_keys WHERE key = 'k1000'")?.key, 'k1000');
    await b.close();
    assert.ok(fs.statSync(join(dir, checkpoints(dir).pop()!)).size < full / 5);
  });
}
