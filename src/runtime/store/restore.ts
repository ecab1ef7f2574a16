// Restoring the store at open: the newest usable checkpoint image, then every journal batch after it, in sequence
// order, with damage set aside and reported (damageReport.ts). Not task recovery (that is ../recovery.ts).
// History and the measured cases behind these rules: docs/store.md ("Journal damage at start-up").
//
// Invariants:
//   - Runs only under the data-directory lock (lock.ts): nobody else writes these files.
//   - A damaged file is never overwritten or silently dropped: it is moved (or copied) aside as
//     `<name>.corrupt-<time>` and named in the report.
//   - Batch numbers are dense, so what is missing is known exactly. Replay stops for good at the first missing batch:
//     a batch may depend on the one before it, and replaying past a hole could build a state that never existed.
//   - Bad bytes at the end of the newest journal with nothing valid after them are an append torn by a crash, never
//     acknowledged: truncated and reported as `torn`, not as damage.
//   - A journal whose batches all precede the loaded image is not read (it is kept for the older image).
import * as fs from 'node:fs';
import { join } from 'node:path';
import type { Database, SqlJsStatic } from 'sql.js';
import { RuntimeError } from '../errors';
import { TEMP_RE, applyBatch, applyPragmas, checkpointName, fsyncDir, journalName, listFiles, openCheckedImage, readImage } from './checkpoint';
import { damageEntry, describeDamage, type OpenReport } from './damageReport';
import { keepFrames, readJournal } from './journal';
import { migrate, SCHEMA_VERSION } from './migrations';

export interface RestoredStore {
  db: Database;
  /** The last batch restored: the store goes on after it. */
  seq: number;
  /** The image the database was loaded from (its sequence), or null when it started empty. */
  base: number | null;
  report: OpenReport;
}

/** Loads the newest usable image from `dir` (created if missing), migrates it and replays the journals after it. */
export async function restoreStore(SQL: SqlJsStatic, dir: string, log?: (msg: string) => void): Promise<RestoredStore> {
  // The store holds every prompt and output: only its owner may list or read it, also when an earlier version (or
  // the user) made the folder with the umask's 0755.
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  if (process.platform !== 'win32' && (fs.statSync(dir).mode & 0o077) !== 0) fs.chmodSync(dir, 0o700);
  const report: OpenReport = {
    checkpointSeq: 0,
    schemaFrom: 0,
    replayedBatches: 0,
    tornTail: false,
    torn: [],
    quarantined: [],
    journalDamage: [],
    unrecoveredBatches: 0,
  };
  const quarantine = (name: string, why?: string): string => {
    const to = `${name}.corrupt-${Date.now()}`;
    fs.renameSync(join(dir, name), join(dir, to));
    report.quarantined.push(to);
    if (why) log?.(`store: ${why}; moved ${name} aside as ${to}`);
    return to;
  };
  // A checkpoint that was being written when the process died (we hold the data-directory lock: nobody else is).
  for (const name of fs.readdirSync(dir)) if (TEMP_RE.test(name)) fs.rmSync(join(dir, name), { force: true });

  // Newest readable checkpoint wins; a damaged one is set aside, never silently overwritten. Sealed images are
  // checked by their CRC, older ones by quick_check (checkpoint.ts).
  const listing = listFiles(dir);
  let db: Database | undefined;
  let seq = 0;
  let base: number | null = null;
  for (const cp of [...listing.checkpoints].reverse()) {
    const name = checkpointName(cp);
    try {
      db = openCheckedImage(SQL, await readImage(join(dir, name)), cp);
      seq = cp;
      base = cp;
      break;
    } catch (e) {
      quarantine(name, `checkpoint ${name} is unreadable (${(e as Error).message})`);
    }
  }
  db ??= new SQL.Database();
  report.checkpointSeq = seq;
  applyPragmas(db);
  report.schemaFrom = migrate(db);
  if (report.schemaFrom > 0 && report.schemaFrom < SCHEMA_VERSION) log?.(`store: migrated from schema ${report.schemaFrom} to ${SCHEMA_VERSION}`);
  if (base === null) seq = Number(db.exec("SELECT value FROM meta WHERE key = 'journal_seq'")[0]?.values[0]?.[0] ?? 0);

  // Replay every journal batch after the checkpoint, in sequence order (see the header).
  const journals = listFiles(dir).journals;
  let expected = seq + 1;
  let stop = false;
  for (const [i, start] of journals.entries()) {
    const name = journalName(start);
    const path = join(dir, name);
    const following = journals[i + 1];
    if (!stop && following !== undefined && following <= expected) continue;
    const read = readJournal(path);
    if (stop) {
      const to = quarantine(name);
      const entry = damageEntry(name, to, 'follows', [], null, read.records);
      report.journalDamage.push(entry);
      log?.(`store: ${describeDamage(entry)}`);
      continue;
    }
    let kept = 0; // frames kept in the file: replayed now or already in the checkpoint
    let missing: [number, number] | null = null;
    for (const rec of read.records) {
      if (rec.seq < expected) {
        kept++;
        continue;
      }
      if (rec.seq !== expected) {
        missing = [expected, rec.seq - 1];
        stop = true;
        break;
      }
      try {
        applyBatch(db, rec.seq, rec.ops);
      } catch (e) {
        throw new RuntimeError('store_corrupt', (e as Error).message);
      }
      report.replayedBatches++;
      expected++;
      kept++;
    }
    const isLast = i === journals.length - 1;
    if (read.damaged.length === 0 && !missing && (!read.torn || isLast)) {
      if (read.torn) {
        // Bad bytes with nothing valid after them, at the end of the newest journal: an append torn by a crash,
        // never acknowledged. Dropped, and said where.
        report.tornTail = true;
        report.torn.push({ journal: name, offset: read.torn.offset, bytes: read.torn.bytes });
        log?.(
          `store: dropped a torn record at the end of ${name} (${read.torn.bytes} unreadable bytes at offset ${read.torn.offset}; never acknowledged)`,
        );
        fs.truncateSync(path, read.goodBytes);
      }
      continue;
    }
    // Damage with valid frames after it, a gap, or a torn end of an older journal (only the newest journal is
    // appended to, so that is damage too): keep the file as it was, then leave in place only what was replayed.
    const damagedRanges = [...read.damaged, ...(read.torn ? [read.torn] : [])];
    const skipped = read.records.slice(kept);
    let copy: string;
    if (kept === 0) {
      copy = quarantine(name);
    } else {
      copy = `${name}.corrupt-${Date.now()}`;
      fs.copyFileSync(path, join(dir, copy));
      report.quarantined.push(copy);
      keepFrames(path, read.records.slice(0, kept));
    }
    const entry = damageEntry(name, copy, damagedRanges.length ? 'damaged' : 'gap', damagedRanges, missing, skipped);
    report.journalDamage.push(entry);
    log?.(`store: ${describeDamage(entry)}`);
  }
  report.unrecoveredBatches = report.journalDamage.reduce((n, d) => n + d.lostBatches + d.skippedBatches, 0);
  fsyncDir(dir);
  return { db, seq: expected - 1, base, report };
}
