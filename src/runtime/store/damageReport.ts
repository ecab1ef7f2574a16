// What a start of the store found on disk and could not use, for the log, `serve` and the editor. Restoring
// (restore.ts) fills the report; this module only says what the entries mean and words them for people.
//
// Invariant: an entry exists for every file that held something replay did not restore, and it names that loss
// exactly (byte ranges, missing and skipped batch numbers, the copy kept as found). `damageSummary` is undefined
// exactly when no journal was damaged; a torn tail is not damage (it was never acknowledged). Why damage is told
// apart from a torn tail, and the measured case that made it so: docs/store.md.
import type { ByteRange, JournalFrame } from './journal';

export interface JournalDamage {
  /** The journal file, by name in the data directory. */
  journal: string;
  /**
   * damaged: unreadable bytes with valid frames after them (or at the end of an older journal);
   * gap: a batch missing from the sequence with no unreadable bytes in this file (lost with an earlier file);
   * follows: a later journal set aside whole because a batch before it is missing.
   */
  kind: 'damaged' | 'gap' | 'follows';
  /** The copy kept for inspection (also listed in `quarantined`): the file exactly as it was found. */
  copy: string;
  /** Unreadable byte ranges in the copy. */
  damagedRanges: ByteRange[];
  /** Batches that are gone: sequence numbers missing before the first valid frame after the damage (0 if none). */
  lostBatches: number;
  missingSeqs: [first: number, last: number] | null;
  /** Valid, acknowledged batches in the copy that were not replayed because a batch before them is missing. */
  skippedBatches: number;
  skippedSeqs: [first: number, last: number] | null;
  /** Where those frames lie in the copy: from the first one's offset to the end of the last one. */
  skippedBytes: { from: number; to: number } | null;
}

export interface OpenReport {
  checkpointSeq: number;
  /** The schema version the store had when opened (0: a new store); below SCHEMA_VERSION it was migrated. */
  schemaFrom: number;
  replayedBatches: number;
  tornTail: boolean;
  /** Unreadable bytes dropped from the end of the newest journal (an append torn by a crash, never acknowledged). */
  torn: Array<{ journal: string } & ByteRange>;
  quarantined: string[];
  /** What the journals held that this start could not replay; empty when nothing was lost. */
  journalDamage: JournalDamage[];
  /** Sum of lostBatches and skippedBatches over journalDamage: acknowledged batches not restored. */
  unrecoveredBatches: number;
}

/** One entry from what the reader found: `skipped` are the valid frames not replayed. */
export function damageEntry(
  journal: string,
  copy: string,
  kind: JournalDamage['kind'],
  damagedRanges: ByteRange[],
  missing: [number, number] | null,
  skipped: JournalFrame[],
): JournalDamage {
  const first = skipped[0];
  const last = skipped[skipped.length - 1];
  return {
    journal,
    kind,
    copy,
    damagedRanges,
    lostBatches: missing ? missing[1] - missing[0] + 1 : 0,
    missingSeqs: missing,
    skippedBatches: skipped.length,
    skippedSeqs: first ? [first.seq, last.seq] : null,
    skippedBytes: first ? { from: first.offset, to: last.offset + last.bytes } : null,
  };
}

const range = (r: [number, number]) => (r[0] === r[1] ? `${r[0]}` : `${r[0]}–${r[1]}`);

/** One line naming exactly what a damaged journal cost. */
export function describeDamage(d: JournalDamage): string {
  const parts: string[] = [];
  if (d.kind === 'follows') parts.push(`${d.journal} follows a missing batch`);
  else if (d.kind === 'gap') parts.push(`journal gap in ${d.journal}`);
  else {
    const where = d.damagedRanges.map((r) => `offset ${r.offset} (${r.bytes} bytes)`).join(', ');
    parts.push(`${d.journal} is damaged: unreadable bytes at ${where}`);
  }
  if (d.missingSeqs) parts.push(`${d.lostBatches} batch${d.lostBatches === 1 ? '' : 'es'} missing (seq ${range(d.missingSeqs)})`);
  if (d.skippedSeqs && d.skippedBytes) {
    const what = `${d.skippedBatches} valid batch${d.skippedBatches === 1 ? '' : 'es'}${d.kind === 'follows' ? '' : ' after it'}`;
    parts.push(`${what} not replayed (seq ${range(d.skippedSeqs)}, bytes ${d.skippedBytes.from}–${d.skippedBytes.to})`);
  }
  parts.push(`copy kept as ${d.copy}`);
  return parts.join('; ');
}

/** For the user (editor notification, `serve` log): undefined when the store opened without losing anything. */
export function damageSummary(report: OpenReport): string | undefined {
  if (report.journalDamage.length === 0) return undefined;
  const n = report.unrecoveredBatches;
  const head =
    n > 0
      ? `The task store was damaged: ${n} acknowledged write batch${n === 1 ? '' : 'es'} could not be restored (recent tasks or events may be missing).`
      : 'The task store was damaged; everything acknowledged was restored.';
  return `${head} ${report.journalDamage.map(describeDamage).join('. ')}. The damaged files were kept in the data directory.`;
}
