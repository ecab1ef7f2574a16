// sql.js (SQLite in WebAssembly, in memory) made durable: every write batch is journalled and synced before it is
// acknowledged; checkpoints (whole-database images) are written in the background and let old journals go.
//
// Files in the data directory:
//   checkpoint-<seq>.sqlite   database image containing every batch up to <seq> (the newest two are kept), sealed
//                             with a CRC-32 in its header (checkpoint.ts); unsealed ones (previous version) are
//                             checked with quick_check
//   journal-<seq>.log         batches from <seq> on (one file per checkpoint generation)
//   *.corrupt-<time>          damaged files kept for inspection, never read again
//
// Checkpoints never export on the host's thread once the database is larger than `inlineCheckpointBytes` (2 MiB):
// the host closes the journal generation (a file rotation, ~1–4 ms) and the checkpoint worker folds the previous
// image and the closed journals into the new image, as recovery would (checkpoint.ts). Measured at 100 k tasks /
// 1 M events (250 MB image, loaded 2-core machine, one run): the host's own synchronous work per checkpoint 4 ms
// against 1 149 ms for the export it replaces; event-loop utilisation during the fold 0.07, the same as with no
// checkpoint (0.08). If the fold fails for any reason but a disk error, the host exports as before ('fallback').
// Start-up reads no journal whose batches all precede the checkpoint it loaded (one 377 MB journal kept for the
// older checkpoint took 10 s to read for nothing).
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
// Group commit (issue #14 goal 3, issue #13: first delta near the engine). Before, a task paid three fdatasyncs on
// the event loop before its first delta (create; queued → loading → running; the first delta), and the backend
// started only after the second. Now a batch may be written with `defer`: applied inside the open sql.js transaction
// (see below), written to the journal, and synced on libuv's pool while the loop goes on — the LMSP door's
// create and the run's start are written so, and the model starts while they are synced. Batches written while a sync
// is under way share the next one; a plain write (every other change, every delta) syncs on the loop and so covers
// whatever waits. Nothing of a batch is shown before its sync: its events and task changes are published from its
// durable callback, the door answers when the create's promise resolves, reads through the runtime sync what waits
// first (`settle`), and an event stream replays only synced events. A failed sync rolls back exactly the batches not
// yet synced (synced ones are applied again), zeroes their frames and refuses writes until a probe. Measured on a
// quiet 16-core machine (25 paired samples, same process): POST /responses (stream) → first delta 7.09 → 5.83 ms
// against 2.67 ms for the raw first token; a remote llama-server's first token through POST /tasks 8.51 → 7.35 ms
// against 4.32 ms direct. A background sync's callback came 0.8–1.2 ms after it started there (a sync on the loop
// takes 0.2–0.3 ms), so the gain is the overlap with the model, not a shorter sync (docs/runtime.md).
//
// In-memory commits (issue #14, CPU per create). A batch no longer opens and commits its own sql.js transaction, nor
// a savepoint inside the open one: batches are applied in one open transaction, committed once every batch in it is
// synced and COMMIT_AFTER_OPS (16) statements have gathered, or when the event loop is next idle. Durability is the
// journal's, never SQLite's, so what is acknowledged does not change: a batch is acknowledged once synced, committed
// in memory or not; a failed sync rolls back and applies the synced batches again (as before); a failed statement
// rolls the transaction back and applies the batches before it again (only a bug or a failing disk pays that, no
// longer every batch a savepoint). An image is exported only after a COMMIT (sql.js's export refuses an open write
// transaction). Measured on the loaded 2-core machine, two builds alternating create by create in one process, 6000
// each (with the journal encoding of journal.ts), time per create outside fdatasync: median 230 → 182 µs at 1 k
// tasks, 174–176 → 132–137 µs at 100 k; p99 487 → 450 µs and 364–414 → 355–360 µs (the sql.js part alone, three
// statements: 58 → 39 µs at 1 k, 84 → 61 µs at 100 k). create_ack p50 ÷ native 1.13–1.15 → 1.02–1.06 (1 k),
// 1.09–1.11 → 1.00–1.01 (100 k), p99 ÷ native unchanged within the noise (three runs each). Committing every 64
// statements saved another ~10 µs at the median but a COMMIT then took ~260 µs every ~11 creates: p99 +150 µs.
//
// A failed append or fdatasync makes the store refuse writes (`store_unwritable`, 503 at the doors) until a probe —
// zeroing what the failed append may have left after the good end, then a sync of the journal — succeeds. The probe
// runs on the next write attempt and on the maintenance timer. Nothing is acknowledged that was not synced, a
// refused batch cannot surface after a restart, and no new journal generation starts while one may hold its bytes.
import * as fs from 'node:fs';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import type { Database, SqlJsStatic, Statement } from 'sql.js';
import { RuntimeError } from '../errors';
import {
  TEMP_RE,
  applyBatch as replayBatch,
  applyPragmas,
  checkpointName,
  fsyncDir,
  journalName,
  listFiles,
  loadSqlJs,
  openImage,
  sealImage,
  type FoldRequest,
} from './checkpoint';
import type { FoldJob, FoldReply } from './checkpointWorker';
import {
  JournalWriter,
  NODE_FILE_OPS,
  keepFrames,
  readJournal,
  type ByteRange,
  type JournalFileOps,
  type JournalFrame,
  type SqlParam,
  type WriteOp,
} from './journal';
import { migrate } from './migrations';

export type { ByteRange, JournalFileOps, SqlParam, WriteOp } from './journal';
export type Row = Record<string, SqlParam>;

export interface DatabaseOptions {
  /** Start a checkpoint when the live journal passes this many bytes. */
  checkpointBytes?: number;
  /** ...or when this much time passed since the last one with changes pending. */
  checkpointIntervalMs?: number;
  /**
   * Databases up to this size are exported on the host's thread (a 2 MiB export takes a few ms); larger ones are
   * folded by the checkpoint worker. 0: always the worker; Infinity: never.
   */
  inlineCheckpointBytes?: number;
  log?: (msg: string) => void;
  /** The journal's sync calls (tests: count them, fail one, hold one back). */
  fileOps?: JournalFileOps;
}

/**
 * A batch written with `write(ops, { defer })`: applied and journalled when write() returns, synced in the background
 * together with whatever else is written meanwhile. Until `onDurable` runs nothing of it may be shown to anyone
 * (events, task changes, answers); reads through the runtime call `settle()` first, which syncs at once.
 */
export interface DeferredWrite {
  /** The batch is durable (called on this thread, in batch order, before any later batch's own callbacks). */
  onDurable(): void;
  /** The batch will never be durable: its sync (or a later append) failed, it was rolled back, writes are refused. */
  onFailed(err: RuntimeError): void;
}

export interface WriteOptions {
  defer?: DeferredWrite;
}

/** A batch in the open sql.js transaction: applied, journalled, not yet committed in memory. */
interface Uncommitted {
  seq: number;
  ops: WriteOp[];
  defer: DeferredWrite | undefined;
  durable: boolean;
}

/** How the last checkpoint was made, for tests and the benchmark. */
export interface CheckpointStats {
  seq: number;
  mode: 'inline' | 'worker' | 'fallback';
  /** Wall time from start to the image being durable. */
  ms: number;
  /** Image size. */
  bytes: number;
  /** The longest stretch of the checkpoint's own synchronous work on the host thread (not counting waits). */
  hostMs: number;
}

const WORKER_FILE = join(__dirname, 'checkpointWorker.js');
/** Fold failures that exporting on the host would only repeat: the disk refuses the image. */
const IO_ERRORS = new Set(['ENOSPC', 'EDQUOT', 'EFBIG', 'EIO', 'EROFS']);
/** Synced batches stay in the open sql.js transaction until this many statements have gathered (see the header). */
const COMMIT_AFTER_OPS = 16;

/**
 * The store's checkpoint worker: started on first use, kept while the store is open, referenced only while a fold
 * is under way (so it never keeps a process alive by itself, and close() still waits for the fold it started).
 */
class FoldWorker {
  private worker: Worker | undefined;
  private pending: { id: number; resolve: (r: FoldReply) => void } | undefined;
  private nextId = 1;

  run(req: FoldRequest): Promise<FoldReply> {
    return new Promise((resolve) => {
      let worker = this.worker;
      if (!worker) {
        try {
          worker = new Worker(WORKER_FILE);
        } catch (e) {
          resolve({ ok: false, error: (e as Error).message });
          return;
        }
        this.worker = worker;
        const fail = (error: string) => {
          if (this.worker === worker) this.worker = undefined;
          const p = this.pending;
          this.pending = undefined;
          p?.resolve({ ok: false, error });
        };
        worker.on('message', (m: FoldReply) => {
          if (!this.pending || m.id !== this.pending.id) return;
          const p = this.pending;
          this.pending = undefined;
          worker!.unref();
          p.resolve(m);
        });
        worker.once('error', (e) => fail(e.message));
        worker.once('exit', (code) => fail(`the checkpoint worker exited with code ${code}`));
      }
      const id = this.nextId++;
      this.pending = { id, resolve };
      worker.ref();
      worker.postMessage({ id, req } satisfies FoldJob);
    });
  }

  async stop(): Promise<void> {
    const w = this.worker;
    this.worker = undefined;
    if (w) await w.terminate();
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
  /** The newest checkpoint image on disk that the next fold starts from (null: none yet). */
  private base: number | null;
  private lastCheckpointAt = Date.now();
  private checkpointing: Promise<void> | undefined;
  private unwritable: Error | undefined;
  private closed = false;
  private timer: NodeJS.Timeout | undefined;
  private readonly folder = new FoldWorker();
  /** How the last checkpoint was made (undefined before the first one). */
  lastCheckpoint: CheckpointStats | undefined;
  // Group commit (see write()). Batches applied since the last COMMIT, in order, while a sql.js transaction is open.
  private uncommitted: Uncommitted[] = [];
  /** Statements in those batches (the in-memory COMMIT waits for COMMIT_AFTER_OPS of them). */
  private uncommittedOps = 0;
  private idleCommit: NodeJS.Immediate | undefined;
  /** Every batch up to this one is synced; durableEnd is the journal offset just past it (current journal). */
  private durableSeq: number;
  private durableEnd: number;
  /** The sync under way on libuv's pool, with what it covers. */
  private syncing: { seq: number; end: number; epoch: number } | undefined;
  /**
   * Bumped when batches not yet synced are rolled back (their sequence numbers are then used again) and when the
   * journal rotates: a background sync started before says nothing about batches written after.
   */
  private epoch = 0;
  /** Callbacks of batches that became durable (or failed), run in order. */
  private readonly callbacks: Array<() => void> = [];
  private readonly fileOps: JournalFileOps;
  /** Write batches and journal syncs since open (tests and the benchmark: group commit means fewer syncs). */
  readonly stats = { batches: 0, syncs: 0, deferred: 0 };

  private constructor(
    private readonly SQL: SqlJsStatic,
    private db: Database,
    readonly dir: string,
    seq: number,
    base: number | null,
    private readonly options: Required<Omit<DatabaseOptions, 'log' | 'fileOps'>> & Pick<DatabaseOptions, 'log' | 'fileOps'>,
    readonly report: OpenReport,
  ) {
    this.seq = seq;
    this.durableSeq = seq;
    this.base = base;
    this.fileOps = options.fileOps ?? NODE_FILE_OPS;
    this.journal = new JournalWriter(join(dir, journalName(seq + 1)), this.fileOps);
    this.durableEnd = this.journal.bytes;
    this.timer = setInterval(() => this.maybeCheckpoint(), Math.min(5_000, this.options.checkpointIntervalMs));
    this.timer.unref();
  }

  static async open(dir: string, options: DatabaseOptions = {}): Promise<DurableDatabase> {
    const SQL = await loadSqlJs();
    fs.mkdirSync(dir, { recursive: true });
    const opts = {
      checkpointBytes: options.checkpointBytes ?? 32 * 1024 * 1024,
      checkpointIntervalMs: options.checkpointIntervalMs ?? 60_000,
      inlineCheckpointBytes: options.inlineCheckpointBytes ?? 2 * 1024 * 1024,
      log: options.log,
      fileOps: options.fileOps,
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
        db = openImage(SQL, join(dir, name), cp);
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
    migrate(db);
    if (base === null) seq = Number(db.exec("SELECT value FROM meta WHERE key = 'journal_seq'")[0]?.values[0]?.[0] ?? 0);

    // Replay every journal batch after the checkpoint, in sequence order. Batch numbers are dense, so a missing one
    // shows as a gap; nothing after a gap is replayed (a batch may depend on the one before it). A journal whose
    // batches all lie at or before the checkpoint is not read at all (it is kept for the older checkpoint).
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
        try {
          replayBatch(db, rec.seq, rec.ops);
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

    const store = new DurableDatabase(SQL, db, dir, seq, base, opts, report);
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
   *
   * With `defer`, returns once the batch is applied and journalled; a sync on libuv's pool makes it durable, together
   * with every batch written while that sync was under way (one fdatasync for all of them), and `defer.onDurable`
   * runs then. A write without `defer` syncs on this thread and so makes every batch before it durable too. Batches
   * stay in an open sql.js transaction until they are synced (and some more have gathered), so a failed sync rolls
   * back exactly the ones not synced (the synced ones are applied again): none of them was ever shown to anyone.
   */
  write(ops: WriteOp[], options: WriteOptions = {}): void {
    if (this.closed) throw new RuntimeError('runtime_closed', 'The store is closed.');
    if (this.unwritable && !this.probe()) {
      throw new RuntimeError('store_unwritable', `The store cannot be written (${errorCode(this.unwritable)}).`);
    }
    const seq = this.seq + 1;
    // No savepoint per batch: a failed statement rolls the open transaction back and applies the batches before it
    // again (rollbackKeeping), which only a bug or a failing disk pays (see the header).
    if (this.uncommitted.length === 0) this.statement('BEGIN').run();
    try {
      for (const [sql, params] of ops) {
        const st = this.statement(sql);
        st.run(params);
      }
    } catch (e) {
      this.rollbackKeeping(this.uncommitted);
      throw e;
    }
    try {
      this.journal.write({ seq, ops });
    } catch (e) {
      this.rollbackKeeping(this.uncommitted);
      const err = e as NodeJS.ErrnoException;
      this.options.log?.(`store: journal write failed (${errorCode(err)}); nothing was changed; writes are refused until a probe write and sync succeed`);
      // Batches still waiting for their sync go too (never shown to anyone): the journal ends at the last synced one.
      this.failUncommitted(err);
      throw new RuntimeError('store_unwritable', `The store could not be written (${errorCode(err)}).`);
    }
    this.seq = seq;
    this.stats.batches++;
    this.uncommitted.push({ seq, ops, defer: options.defer, durable: false });
    this.uncommittedOps += ops.length;
    if (options.defer) {
      this.stats.deferred++;
      this.syncSoon();
    } else {
      this.syncNow();
    }
    if (!this.checkpointing && this.journal.bytes >= this.options.checkpointBytes) void this.checkpoint().catch(() => {});
  }

  /**
   * Makes every applied batch durable now (a sync on this thread when one is not), running their callbacks. The
   * runtime calls it before every read it answers, so nothing read was not synced. Never throws: a failed sync rolls
   * the batches back and marks the store unwritable, and the read then sees what is durable.
   */
  settle(): void {
    if (this.durableSeq === this.seq || this.closed) return;
    try {
      this.syncNow();
    } catch {
      // rolled back; the store refuses writes until a probe succeeds
    }
  }

  /** True while some applied batch is not yet known to be durable. */
  get unsettled(): boolean {
    return this.durableSeq < this.seq;
  }

  /** Syncs on this thread; throws store_unwritable (after rolling back every batch not yet synced) when it fails. */
  private syncNow(): void {
    if (this.durableSeq === this.seq) return;
    const end = this.journal.bytes;
    try {
      this.journal.sync();
    } catch (e) {
      const err = e as NodeJS.ErrnoException;
      this.options.log?.(`store: journal sync failed (${errorCode(err)}); the batches it carried were rolled back; writes are refused until a probe write and sync succeed`);
      this.failUncommitted(err);
      throw new RuntimeError('store_unwritable', `The store could not be written (${errorCode(err)}).`);
    }
    this.stats.syncs++;
    this.markDurable(this.seq, end);
  }

  /** Starts a sync on libuv's pool unless one is under way (its completion starts the next one). */
  private syncSoon(): void {
    if (this.syncing || this.closed) return;
    const target = { seq: this.seq, end: this.journal.bytes, epoch: this.epoch };
    this.syncing = target;
    this.journal.syncAsync((err) => {
      this.syncing = undefined;
      if (this.closed) return;
      // Since it started, the journal rotated (after syncing everything) or the batches it carried were rolled back
      // (and their sequence numbers may be in use again): it covers nothing that is still waiting.
      if (target.epoch === this.epoch) {
        if (err) {
          if (this.durableSeq < this.seq || !this.unwritable) {
            this.options.log?.(`store: journal sync failed (${errorCode(err)}); the batches it carried were rolled back; writes are refused until a probe write and sync succeed`);
            this.failUncommitted(err);
          }
          return;
        }
        this.stats.syncs++;
        this.markDurable(target.seq, target.end);
      }
      // Batches written while that sync ran: the next sync covers all of them at once.
      if (this.unsettled && !this.unwritable) this.syncSoon();
    });
  }

  /**
   * Every batch up to `seq` is synced: run their callbacks. The in-memory COMMIT waits until nothing after them is
   * pending and COMMIT_AFTER_OPS statements have gathered (see the header).
   */
  private markDurable(seq: number, end: number): void {
    if (seq <= this.durableSeq) return;
    this.durableSeq = seq;
    this.durableEnd = end;
    for (const u of this.uncommitted) {
      if (u.durable || u.seq > seq) continue;
      u.durable = true;
      const d = u.defer;
      if (d) this.callbacks.push(() => d.onDurable());
    }
    if (seq >= this.seq) {
      if (this.uncommittedOps >= COMMIT_AFTER_OPS) this.commit();
      else this.commitWhenIdle();
    }
    this.runCallbacks();
  }

  /**
   * A sync or an append failed: roll back every batch not known to be durable (none was shown to anyone), keep the
   * synced ones, make the journal end after the last synced batch (the rest is zeroed by the probe), refuse writes.
   */
  private failUncommitted(err: NodeJS.ErrnoException): void {
    const error = new RuntimeError('store_unwritable', `The store could not be written (${errorCode(err)}).`);
    if (this.uncommitted.length > 0) {
      const kept = this.uncommitted.filter((u) => u.durable);
      const lost = this.uncommitted.filter((u) => !u.durable);
      // Synced (and already told) but not yet committed in memory: applied again, as they were, and committed.
      this.rollbackKeeping(kept);
      this.commit();
      this.seq = this.durableSeq;
      this.epoch++;
      for (const u of lost) {
        const d = u.defer;
        if (d) this.callbacks.push(() => d.onFailed(error));
      }
    }
    this.journal.forget(this.durableEnd);
    this.markUnwritable(err);
    this.runCallbacks();
  }

  /**
   * Rolls the open sql.js transaction back and applies `keep` (batches that were applied before, in order, from the
   * same state, so they apply again) in a new one; with nothing to keep no transaction stays open.
   */
  private rollbackKeeping(keep: Uncommitted[]): void {
    try {
      this.statement('ROLLBACK').run();
    } catch {
      // SQLite ended the transaction itself (a full disk, out of memory)
    }
    this.uncommitted = [];
    this.uncommittedOps = 0;
    if (keep.length === 0) return;
    this.statement('BEGIN').run();
    for (const u of keep) for (const [sql, params] of u.ops) this.statement(sql).run(params);
    this.uncommitted = keep;
    for (const u of keep) this.uncommittedOps += u.ops.length;
  }

  /** Commits once the event loop is free of the current work (a request's answer goes out first). */
  private commitWhenIdle(): void {
    if (this.idleCommit) return;
    this.idleCommit = setImmediate(() => {
      this.idleCommit = undefined;
      if (this.closed || this.durableSeq !== this.seq) return;
      try {
        this.commit();
      } catch (e) {
        this.options.log?.(`store: an in-memory commit failed: ${(e as Error).message}`);
      }
    });
    this.idleCommit.unref();
  }

  /** Commits the open sql.js transaction (every batch in it is durable). */
  private commit(): void {
    if (this.uncommitted.length === 0) return;
    this.statement('COMMIT').run();
    this.uncommitted = [];
    this.uncommittedOps = 0;
  }

  /** Runs queued callbacks in order; a callback that writes runs the ones queued before its own first. */
  private runCallbacks(): void {
    while (this.callbacks.length > 0) {
      const cb = this.callbacks.shift()!;
      try {
        cb();
      } catch (e) {
        this.options.log?.(`store: a write callback threw: ${(e as Error).message}`);
      }
    }
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

  /** Starts a new journal generation at the current sequence; returns that sequence. */
  private rotate(): number {
    // Nothing unsynced may stay behind in a closed generation (the worker folds it; callbacks are owed).
    this.syncNow();
    const seq = this.seq;
    const old = this.journal;
    this.journal = new JournalWriter(join(this.dir, journalName(seq + 1)), this.fileOps);
    this.durableEnd = this.journal.bytes;
    this.epoch++;
    old.close();
    return seq;
  }

  /** Database size in bytes, from SQLite's own page count (cheap). */
  private imageBytes(): number {
    const r = this.db.exec('PRAGMA page_count; PRAGMA page_size');
    return Number(r[0]?.values[0]?.[0] ?? 0) * Number(r[1]?.values[0]?.[0] ?? 4096);
  }

  /** Export on this thread: blocks the event loop for about 1 ms per MB (used for small databases, and as fallback). */
  private async checkpointInline(mode: 'inline' | 'fallback', t0: number): Promise<void> {
    // The image is exported outside any transaction: batches waiting for their sync are synced and committed first.
    this.syncNow();
    this.commit();
    const seq = this.seq;
    const h0 = performance.now();
    this.statement("UPDATE meta SET value = ? WHERE key = 'journal_seq'").run([String(seq)]);
    const image = this.db.export();
    sealImage(image);
    // New writes go to a new journal generation while the image is written.
    this.rotate();
    const hostMs = performance.now() - (mode === 'inline' ? t0 : h0);
    const final = join(this.dir, checkpointName(seq));
    const tmp = `${final}.${process.pid}.tmp`;
    const fh = await fs.promises.open(tmp, 'w', 0o600);
    try {
      await fh.writeFile(image);
      await fh.sync();
    } catch (e) {
      // A partial image (disk full) would only hold on to the space that is missing.
      await fh.close();
      await fs.promises.rm(tmp, { force: true }).catch(() => {});
      throw e;
    }
    await fh.close();
    await fs.promises.rename(tmp, final);
    fsyncDir(this.dir);
    this.base = seq;
    this.lastCheckpoint = { seq, mode, ms: performance.now() - t0, bytes: image.length, hostMs };
  }

  /**
   * The checkpoint worker builds the image from the previous one and the journals just closed (checkpoint.ts); the
   * host only rotates the journal. If the fold fails for any reason but an I/O error, the host exports itself.
   */
  private async checkpointInWorker(t0: number): Promise<void> {
    const upTo = this.rotate();
    const pending = this.folder.run({ dir: this.dir, base: this.base, upTo });
    const hostMs = performance.now() - t0;
    const reply = await pending;
    if (reply.ok) {
      this.base = upTo;
      this.lastCheckpoint = { seq: upTo, mode: 'worker', ms: performance.now() - t0, bytes: reply.bytes ?? 0, hostMs };
      return;
    }
    if (reply.code && IO_ERRORS.has(reply.code)) {
      const err = new Error(reply.error) as NodeJS.ErrnoException;
      err.code = reply.code;
      throw err;
    }
    this.options.log?.(`store: the checkpoint worker failed (${reply.error}); exporting on the main thread instead`);
    if (this.closed) return;
    await this.checkpointInline('fallback', t0);
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
      const t0 = performance.now();
      if (this.imageBytes() <= this.options.inlineCheckpointBytes) await this.checkpointInline('inline', t0);
      else await this.checkpointInWorker(t0);
      this.lastCheckpointAt = Date.now();
      await this.prune();
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
  private async prune(): Promise<void> {
    const { checkpoints, journals } = listFiles(this.dir);
    const keep = checkpoints.slice(-2);
    const drop: string[] = [];
    for (const cp of checkpoints) if (!keep.includes(cp)) drop.push(checkpointName(cp));
    const base = keep[0] ?? 0;
    for (let i = 0; i < journals.length; i++) {
      const next = journals[i + 1];
      // journal i holds batches [journals[i], next - 1]; it is needed while any of them is after `base`.
      if (next !== undefined && next - 1 <= base) drop.push(journalName(journals[i]));
    }
    // Unlinking a large image can take a while: off the event loop.
    await Promise.all(drop.map((name) => fs.promises.rm(join(this.dir, name), { force: true })));
  }

  /** Flushes a final checkpoint (best effort) and closes. */
  async close(): Promise<void> {
    if (this.closed) return;
    if (this.timer) clearInterval(this.timer);
    if (this.idleCommit) clearImmediate(this.idleCommit);
    this.settle();
    try {
      if (this.checkpointing) await this.checkpointing.catch(() => {});
      if (this.journal.bytes > 0 && (!this.unwritable || this.probe())) await this.checkpoint();
    } catch {
      // the journal still holds everything
    } finally {
      this.closed = true;
      await this.folder.stop().catch(() => {});
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
