// sql.js (SQLite in WebAssembly, in memory) made durable: every write batch is journalled and synced before it is
// acknowledged; checkpoints (whole-database images) are written in the background and let old journals go.
//
// Files in the data directory:
//   checkpoint-<seq>.sqlite   database image containing every batch up to <seq> (the newest two are kept)
//   journal-<seq>.log         batches from <seq> on (one file per checkpoint generation)
//   *.corrupt-<time>          damaged files kept for inspection, never read again
//
// Journal damage at start-up. Batch numbers are dense, so what is missing is known exactly:
//   - bad bytes at the end of the newest journal with nothing valid after them: an append torn by a crash, never
//     acknowledged. Truncated; `report.torn` and the log say where and how many bytes.
//   - bad bytes with valid frames after them (the reader resynchronises on the next frame with a valid length and
//     CRC): acknowledged batches may sit behind the damage. Frames after it are replayed only while the sequence
//     continues without a gap (then nothing was lost in the damaged bytes). At the first missing batch replay stops
//     for good: a batch can depend on the one before it (a task's status, its event numbering), so replaying past a
//     hole could build a state that never existed. The file is copied aside as found, the original keeps only the
//     replayed frames, later journals are moved aside, and `report.journalDamage` names the damaged byte ranges, the
//     missing batches, and the valid batches not replayed with their sequence numbers and byte range in the copy.
//     `serve` and the editor show `damageSummary()` to the user. Measured on a 10-batch journal with one flipped byte
//     in the 5th record: the old reader took it for a torn tail and dropped six acknowledged batches (the damaged one
//     and five intact ones after it) with no copy and nothing in the report.
//
// A failed append or fdatasync makes the store refuse writes (`store_unwritable`, 503 at the doors) until a probe —
// zeroing what the failed append may have left after the good end, then a sync of the journal — succeeds. The probe
// runs on the next write attempt and on the maintenance timer. Nothing is acknowledged that was not synced, a
// refused batch cannot surface after a restart, and no new journal generation starts while one may hold its bytes.
import * as fs from 'node:fs';
import { join } from 'node:path';
import type { Database, SqlJsStatic, Statement } from 'sql.js';
import { RuntimeError } from '../errors';
import { JournalWriter, keepFrames, readJournal, type ByteRange, type JournalFrame, type SqlParam, type WriteOp } from './journal';
import { migrate } from './migrations';

export type { ByteRange, SqlParam, WriteOp } from './journal';
export type Row = Record<string, SqlParam>;

export interface DatabaseOptions {
  /** Start a checkpoint when the live journal passes this many bytes. */
  checkpointBytes?: number;
  /** ...or when this much time passed since the last one with changes pending. */
  checkpointIntervalMs?: number;
  log?: (msg: string) => void;
}

let sqlJs: Promise<SqlJsStatic> | undefined;
function loadSqlJs(): Promise<SqlJsStatic> {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  sqlJs ??= (require('sql.js') as (cfg?: object) => Promise<SqlJsStatic>)();
  return sqlJs;
}

const CHECKPOINT_RE = /^checkpoint-(\d+)\.sqlite$/;
const JOURNAL_RE = /^journal-(\d+)\.log$/;

interface Listing {
  checkpoints: number[];
  journals: number[];
}

function listFiles(dir: string): Listing {
  const checkpoints: number[] = [];
  const journals: number[] = [];
  for (const name of fs.readdirSync(dir)) {
    const c = CHECKPOINT_RE.exec(name);
    if (c) checkpoints.push(Number(c[1]));
    const j = JOURNAL_RE.exec(name);
    if (j) journals.push(Number(j[1]));
  }
  const asc = (a: number, b: number) => a - b;
  return { checkpoints: checkpoints.sort(asc), journals: journals.sort(asc) };
}

const checkpointName = (seq: number) => `checkpoint-${String(seq).padStart(12, '0')}.sqlite`;
const journalName = (seq: number) => `journal-${String(seq).padStart(12, '0')}.log`;

function fsyncDir(dir: string): void {
  try {
    const fd = fs.openSync(dir, 'r');
    try {
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
  } catch {
    // not supported everywhere; rename is still atomic
  }
}

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

function damageEntry(
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

export class DurableDatabase {
  private statements = new Map<string, Statement>();
  private journal: JournalWriter;
  private seq: number;
  private lastCheckpointAt = Date.now();
  private checkpointing: Promise<void> | undefined;
  private unwritable: Error | undefined;
  private closed = false;
  private timer: NodeJS.Timeout | undefined;

  private constructor(
    private readonly SQL: SqlJsStatic,
    private db: Database,
    readonly dir: string,
    seq: number,
    private readonly options: Required<Omit<DatabaseOptions, 'log'>> & Pick<DatabaseOptions, 'log'>,
    readonly report: OpenReport,
  ) {
    this.seq = seq;
    this.journal = new JournalWriter(join(dir, journalName(seq + 1)));
    this.timer = setInterval(() => this.maybeCheckpoint(), Math.min(5_000, this.options.checkpointIntervalMs));
    this.timer.unref();
  }

  static async open(dir: string, options: DatabaseOptions = {}): Promise<DurableDatabase> {
    const SQL = await loadSqlJs();
    fs.mkdirSync(dir, { recursive: true });
    const opts = {
      checkpointBytes: options.checkpointBytes ?? 32 * 1024 * 1024,
      checkpointIntervalMs: options.checkpointIntervalMs ?? 60_000,
      log: options.log,
    };
    const report: OpenReport = {
      checkpointSeq: 0,
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
      if (why) opts.log?.(`store: ${why}; moved ${name} aside as ${to}`);
      return to;
    };

    // Newest readable checkpoint wins; a damaged one is set aside, never silently overwritten.
    const listing = listFiles(dir);
    let db: Database | undefined;
    let seq = 0;
    for (const cp of [...listing.checkpoints].reverse()) {
      const name = checkpointName(cp);
      try {
        const candidate = new SQL.Database(fs.readFileSync(join(dir, name)));
        const check = candidate.exec('PRAGMA quick_check');
        if (check[0]?.values[0]?.[0] !== 'ok') throw new Error('integrity check failed');
        const stored = candidate.exec("SELECT value FROM meta WHERE key = 'journal_seq'");
        const storedSeq = Number(stored[0]?.values[0]?.[0] ?? NaN);
        if (storedSeq !== cp) throw new Error('sequence mismatch');
        db = candidate;
        seq = cp;
        break;
      } catch (e) {
        quarantine(name, `checkpoint ${name} is unreadable (${(e as Error).message})`);
      }
    }
    db ??= new SQL.Database();
    report.checkpointSeq = seq;
    applyPragmas(db);
    migrate(db);
    if (seq === 0) seq = Number(db.exec("SELECT value FROM meta WHERE key = 'journal_seq'")[0]?.values[0]?.[0] ?? 0);

    // Replay every journal batch after the checkpoint, in sequence order. Batch numbers are dense, so a missing one
    // shows as a gap; nothing after a gap is replayed (a batch may depend on the one before it).
    const journals = listFiles(dir).journals;
    let expected = seq + 1;
    let stop = false;
    for (const [i, start] of journals.entries()) {
      const name = journalName(start);
      const path = join(dir, name);
      const read = readJournal(path);
      if (stop) {
        const to = quarantine(name);
        const entry = damageEntry(name, to, 'follows', [], null, read.records);
        report.journalDamage.push(entry);
        opts.log?.(`store: ${describeDamage(entry)}`);
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
        applyBatch(db, rec.seq, rec.ops);
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
          opts.log?.(`store: dropped a torn record at the end of ${name} (${read.torn.bytes} unreadable bytes at offset ${read.torn.offset}; never acknowledged)`);
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
      opts.log?.(`store: ${describeDamage(entry)}`);
    }
    report.unrecoveredBatches = report.journalDamage.reduce((n, d) => n + d.lostBatches + d.skippedBatches, 0);
    fsyncDir(dir);
    seq = expected - 1;

    const store = new DurableDatabase(SQL, db, dir, seq, opts, report);
    // Start from a clean generation: a fresh checkpoint makes the replayed journals unnecessary.
    if (report.replayedBatches > 0 || report.quarantined.length > 0 || listFiles(dir).checkpoints.length === 0) {
      await store.checkpoint();
    }
    return store;
  }

  get commitSeq(): number {
    return this.seq;
  }

  get journalBytes(): number {
    return this.journal.bytes;
  }

  /** Why writes are refused, if they are. */
  get writeError(): Error | undefined {
    return this.unwritable;
  }

  private statement(sql: string): Statement {
    let st = this.statements.get(sql);
    if (!st) {
      st = this.db.prepare(sql);
      this.statements.set(sql, st);
    }
    return st;
  }

  all(sql: string, params: SqlParam[] = []): Row[] {
    const st = this.statement(sql);
    try {
      st.bind(params);
      const rows: Row[] = [];
      while (st.step()) rows.push(st.getAsObject() as Row);
      return rows;
    } finally {
      st.reset();
    }
  }

  get(sql: string, params: SqlParam[] = []): Row | undefined {
    const st = this.statement(sql);
    try {
      st.bind(params);
      return st.step() ? (st.getAsObject() as Row) : undefined;
    } finally {
      st.reset();
    }
  }

  /**
   * Applies the batch atomically and makes it durable before returning. Throws (and changes nothing) when a
   * statement fails or the journal cannot be written.
   */
  write(ops: WriteOp[]): void {
    if (this.closed) throw new RuntimeError('runtime_closed', 'The store is closed.');
    if (this.unwritable && !this.probe()) {
      throw new RuntimeError('store_unwritable', `The store cannot be written (${errorCode(this.unwritable)}).`);
    }
    const seq = this.seq + 1;
    this.db.exec('BEGIN');
    try {
      for (const [sql, params] of ops) {
        const st = this.statement(sql);
        st.run(params);
      }
      this.statement("UPDATE meta SET value = ? WHERE key = 'journal_seq'").run([String(seq)]);
    } catch (e) {
      this.db.exec('ROLLBACK');
      throw e;
    }
    try {
      this.journal.append({ seq, ops });
    } catch (e) {
      this.db.exec('ROLLBACK');
      const err = e as NodeJS.ErrnoException;
      this.options.log?.(`store: journal write failed (${errorCode(err)}); nothing was changed; writes are refused until a probe write and sync succeed`);
      this.markUnwritable(err);
      throw new RuntimeError('store_unwritable', `The store could not be written (${errorCode(err)}).`);
    }
    this.db.exec('COMMIT');
    this.seq = seq;
    if (!this.checkpointing && this.journal.bytes >= this.options.checkpointBytes) void this.checkpoint().catch(() => {});
  }

  /**
   * After a failed append: zero what it may have left behind and sync (a real write and sync on the journal). True
   * when that worked and writes are accepted again.
   */
  private probe(): boolean {
    if (!this.unwritable || this.closed) return !this.unwritable;
    try {
      this.journal.probe();
    } catch {
      return false;
    }
    this.options.log?.(`store: a probe write and sync succeeded after ${errorCode(this.unwritable)}; writes are accepted again`);
    this.unwritable = undefined;
    return true;
  }

  private maybeCheckpoint(): void {
    if (this.closed) return;
    // While writes are refused the timer probes too, so the store recovers without waiting for a write.
    if (this.unwritable && !this.probe()) return;
    if (this.checkpointing) return;
    if (this.journal.bytes > 0 && Date.now() - this.lastCheckpointAt >= this.options.checkpointIntervalMs) {
      void this.checkpoint().catch(() => {});
    }
  }

  /** Writes a database image containing every acknowledged batch, then drops journals no longer needed. */
  checkpoint(): Promise<void> {
    // A new journal generation must not start while the current one may hold a refused batch's bytes.
    if (this.unwritable && !this.probe()) {
      return Promise.reject(new RuntimeError('store_unwritable', `The store cannot be written (${errorCode(this.unwritable)}).`));
    }
    if (this.checkpointing) {
      // One more after the one under way, so the caller's writes are covered.
      return this.checkpointing.then(() => (!this.closed && this.journal.bytes > 0 ? this.checkpoint() : undefined));
    }
    if (this.closed) return Promise.resolve();
    const run = async () => {
      const seq = this.seq;
      // export() closes and reopens the sqlite handle: prepared statements and pragmas do not survive it.
      for (const st of this.statements.values()) st.free();
      this.statements.clear();
      const image = this.db.export();
      applyPragmas(this.db);
      // New writes go to a new journal generation while the image is written.
      const old = this.journal;
      this.journal = new JournalWriter(join(this.dir, journalName(seq + 1)));
      old.close();
      const final = join(this.dir, checkpointName(seq));
      const tmp = `${final}.${process.pid}.tmp`;
      const fh = await fs.promises.open(tmp, 'w');
      try {
        await fh.writeFile(image);
        await fh.sync();
      } catch (e) {
        // A partial image (disk full) would only hold on to the space that is missing.
        await fs.promises.rm(tmp, { force: true }).catch(() => {});
        throw e;
      } finally {
        await fh.close();
      }
      await fs.promises.rename(tmp, final);
      fsyncDir(this.dir);
      this.lastCheckpointAt = Date.now();
      this.prune();
    };
    this.checkpointing = run()
      .catch((e) => {
        this.options.log?.(`store: checkpoint failed (${(e as NodeJS.ErrnoException).code ?? (e as Error).message}); the journal keeps everything`);
        throw e;
      })
      .finally(() => {
        this.checkpointing = undefined;
      });
    return this.checkpointing;
  }

  /** Keep the newest two checkpoints and every journal the older of them still needs. */
  private prune(): void {
    const { checkpoints, journals } = listFiles(this.dir);
    const keep = checkpoints.slice(-2);
    for (const cp of checkpoints) if (!keep.includes(cp)) fs.rmSync(join(this.dir, checkpointName(cp)), { force: true });
    const base = keep[0] ?? 0;
    for (let i = 0; i < journals.length; i++) {
      const next = journals[i + 1];
      // journal i holds batches [journals[i], next - 1]; it is needed while any of them is after `base`.
      if (next !== undefined && next - 1 <= base) fs.rmSync(join(this.dir, journalName(journals[i])), { force: true });
    }
  }

  /** Flushes a final checkpoint (best effort) and closes. */
  async close(): Promise<void> {
    if (this.closed) return;
    if (this.timer) clearInterval(this.timer);
    try {
      if (this.checkpointing) await this.checkpointing.catch(() => {});
      if (this.journal.bytes > 0 && (!this.unwritable || this.probe())) await this.checkpoint();
    } catch {
      // the journal still holds everything
    } finally {
      this.closed = true;
      this.journal.close();
      for (const st of this.statements.values()) st.free();
      this.statements.clear();
      this.db.close();
    }
  }

  /** Refuse writes (`store_unwritable`) until a probe write and sync on the journal succeeds. */
  markUnwritable(reason: Error): void {
    this.unwritable = reason;
  }
}

function errorCode(e: Error): string {
  return (e as NodeJS.ErrnoException).code ?? 'I/O error';
}

function applyPragmas(db: Database): void {
  // The in-memory image is made durable by our journal, not by SQLite's own.
  // Exclusive locking spares SQLite its per-transaction file checks on the in-memory file system.
  db.exec(
    'PRAGMA locking_mode = EXCLUSIVE; PRAGMA journal_mode = MEMORY; PRAGMA synchronous = OFF; PRAGMA temp_store = MEMORY;',
  );
}

function applyBatch(db: Database, seq: number, ops: WriteOp[]): void {
  db.exec('BEGIN');
  try {
    for (const [sql, params] of ops) db.run(sql, params);
    db.run("UPDATE meta SET value = ? WHERE key = 'journal_seq'", [String(seq)]);
    db.exec('COMMIT');
  } catch (e) {
    db.exec('ROLLBACK');
    throw new RuntimeError('store_corrupt', `Journal batch ${seq} could not be replayed: ${(e as Error).message}`);
  }
}
