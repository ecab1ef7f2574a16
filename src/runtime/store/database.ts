// sql.js (SQLite in WebAssembly, in memory) made durable: the store's facade. Every write batch is journalled and
// synced before it is acknowledged; checkpoints (whole-database images) are written in the background and let old
// journals go. The parts: restore.ts (open: image + journal replay, damage set aside), damageReport.ts (what was
// lost, for people), groupCommit.ts (the write path), checkpointer.ts with foldWorkerClient.ts (images, off the
// host's thread when large), statements.ts (prepared statements). History and measured figures: docs/store.md.
//
// Files in the data directory:
//   checkpoint-<seq>.sqlite   database image containing every batch up to <seq> (the newest two are kept), sealed
//                             with a CRC-32 in its header (checkpoint.ts); unsealed ones (previous version) are
//                             checked with quick_check
//   journal-<seq>.log         batches from <seq> on (one file per checkpoint generation)
//   *.corrupt-<time>          damaged files kept for inspection, never read again
//
// Invariants (the parts keep them; details in their headers):
//   - Nothing is acknowledged or shown that was not synced; a refused batch cannot surface after a restart.
//   - A failed append or sync refuses writes (`store_unwritable`, 503 at the doors) until a probe succeeds; the
//     probe runs on the next write attempt and on the maintenance timer.
//   - Start-up never replays past a missing batch, and every loss it finds is in `report` (`damageSummary`).
//   - The host's thread never exports an image larger than `inlineCheckpointBytes`.
import type { Database } from 'sql.js';
import { setImmediate as nextTurn } from 'node:timers/promises';
import * as fs from 'node:fs';
import { join } from 'node:path';
import { checkpointName, journalName, loadSqlJs, listFiles, sqlJsWasm } from './checkpoint';
import { SCHEMA_VERSION } from './migrations';
import { Checkpointer, type CheckpointStats } from './checkpointer';
import type { OpenReport } from './damageReport';
import { GroupCommit, type WriteOptions } from './groupCommit';
import { NODE_FILE_OPS, type JournalFileOps, type SqlParam, type WriteOp } from './journal';
import { FoldWorkerClient } from './foldWorkerClient';
import { restoreStore } from './restore';
import { StatementCache } from './statements';

export type { ByteRange, JournalFileOps, SqlParam, WriteOp } from './journal';
export type { CheckpointStats } from './checkpointer';
export { damageSummary, describeDamage, type JournalDamage, type OpenReport } from './damageReport';
export type { DeferredWrite, WriteOptions } from './groupCommit';
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

/** Size of the newest checkpoint image in `dir` (0: none, or no such directory yet). */
function newestImageBytes(dir: string): number {
  try {
    const { checkpoints } = listFiles(dir);
    return checkpoints.length ? fs.statSync(join(dir, checkpointName(checkpoints[checkpoints.length - 1]))).size : 0;
  } catch {
    return 0;
  }
}

/** Whether this process has warmed sql.js's compiled code (once is enough: every store shares the module). */
let sqlJsWarmed = false;

export class DurableDatabase {
  private readonly statements: StatementCache;
  private readonly commits: GroupCommit;
  private readonly checkpointer: Checkpointer;
  private timer: NodeJS.Timeout | undefined;

  private constructor(
    private readonly db: Database,
    readonly dir: string,
    seq: number,
    base: number | null,
    options: Required<Omit<DatabaseOptions, 'log' | 'fileOps'>> & Pick<DatabaseOptions, 'log' | 'fileOps'>,
    readonly report: OpenReport,
    private readonly foldWorker: FoldWorkerClient,
    /** The worker ran only to warm sql.js (a small store's checkpoints are inline): end it once start-up is over. */
    private dropWarmWorker: boolean,
  ) {
    this.statements = new StatementCache(db);
    this.commits = new GroupCommit(this.statements, dir, seq, options.fileOps ?? NODE_FILE_OPS, options.log);
    this.checkpointer = new Checkpointer(db, this.statements, this.commits, dir, base, options, foldWorker);
    this.timer = setInterval(() => this.maintain(), Math.min(5_000, options.checkpointIntervalMs));
    this.timer.unref();
  }

  static async open(dir: string, options: DatabaseOptions = {}): Promise<DurableDatabase> {
    const opts = {
      checkpointBytes: options.checkpointBytes ?? 32 * 1024 * 1024,
      checkpointIntervalMs: options.checkpointIntervalMs ?? 60_000,
      inlineCheckpointBytes: options.inlineCheckpointBytes ?? 2 * 1024 * 1024,
      log: options.log,
      fileOps: options.fileOps,
    };
    // A store whose checkpoints the worker folds gets its worker now, while the restore runs: started at the first
    // checkpoint instead, it took the event loop for 6–70 ms there (foldWorkerClient.ts).
    const foldWorker = new FoldWorkerClient(await sqlJsWasm());
    const folding = newestImageBytes(dir) > opts.inlineCheckpointBytes;
    if (folding) foldWorker.start();
    const SQL = loadSqlJs();
    SQL.catch(() => {}); // awaited below; not an unhandled rejection while the warm-up runs
    // The process's first store has the worker compile sql.js's code before the restore runs it (checkpoint.ts): the
    // restore then runs in 1–4 ms blocks instead of one 40 ms one. Meanwhile the host instantiates its own sql.js.
    const warming = !sqlJsWarmed;
    if (warming) {
      const warm = await foldWorker.warm();
      sqlJsWarmed = warm.ok;
      if (!warm.ok) opts.log?.(`store: sql.js was not warmed in the checkpoint worker (${warm.error}); the restore compiles it`);
    }
    let restored: Awaited<ReturnType<typeof restoreStore>>;
    try {
      restored = await restoreStore(await SQL, dir, opts.log);
    } catch (e) {
      await foldWorker.stop();
      throw e;
    }
    const { db, seq, base, report } = restored;
    // Ending a worker right away competed for the cores with the restore after it (its blocks doubled to 30–50 ms
    // on 2 cores): a worker the store does not fold with ends at the first maintenance tick instead.
    const store = new DurableDatabase(db, dir, seq, base, opts, report, foldWorker, warming && !folding);
    // Start from a clean generation: a fresh checkpoint makes the replayed journals unnecessary. A migrated store is
    // written out at once too, so that its image says its new schema version and an older release refuses it
    // instead of replaying this release's journal over the old schema.
    const migrated = report.schemaFrom < SCHEMA_VERSION;
    if (migrated || report.replayedBatches > 0 || report.quarantined.length > 0 || listFiles(dir).checkpoints.length === 0) {
      // A turn of the loop first: the restore and this checkpoint (an export and its fsync) were one block of start-up.
      await nextTurn();
      await store.checkpoint();
    }
    return store;
  }

  /** The last batch applied. */
  get commitSeq(): number {
    return this.commits.commitSeq;
  }

  get journalBytes(): number {
    return this.commits.journalBytes;
  }

  /** Why writes are refused, if they are. */
  get writeError(): Error | undefined {
    return this.commits.writeError;
  }

  /** True while some applied batch is not yet known to be durable. */
  get unsettled(): boolean {
    return this.commits.unsettled;
  }

  /** Write batches and journal syncs since open (tests and the benchmark: group commit means fewer syncs). */
  get stats(): { batches: number; syncs: number; deferred: number } {
    return this.commits.stats;
  }

  /** Tells `listener` how long each journal sync took (ms); one listener (the runtime's metrics). */
  onSync(listener: (ms: number) => void): void {
    this.commits.onSync = listener;
  }

  /** Bytes of the store's checkpoints and journals on disk (a directory listing and a stat per file). */
  sizeBytes(): number {
    const { checkpoints, journals } = listFiles(this.dir);
    let total = 0;
    for (const name of [...checkpoints.map(checkpointName), ...journals.map(journalName)]) {
      try {
        total += fs.statSync(join(this.dir, name)).size;
      } catch {
        // removed meanwhile (a checkpoint let it go)
      }
    }
    return total;
  }

  /** How the last checkpoint was made (undefined before the first one). */
  get lastCheckpoint(): CheckpointStats | undefined {
    return this.checkpointer.last;
  }

  all(sql: string, params: SqlParam[] = []): Row[] {
    const st = this.statements.get(sql);
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
    const st = this.statements.get(sql);
    try {
      st.bind(params);
      return st.step() ? (st.getAsObject() as Row) : undefined;
    } finally {
      st.reset();
    }
  }

  /**
   * Applies the batch atomically and makes it durable before returning; with `defer`, durable in the background
   * (groupCommit.ts says exactly when, and what may be shown meanwhile). Throws (and changes nothing) when a
   * statement fails or the journal cannot be written.
   */
  write(ops: WriteOp[], options: WriteOptions = {}): void {
    this.commits.write(ops, options);
    this.checkpointer.afterWrite();
  }

  /**
   * Makes every applied batch durable now, running their callbacks. The runtime calls it before every read it
   * answers, so nothing read was not synced. Never throws.
   */
  settle(): void {
    this.commits.settle();
  }

  /** Writes a database image containing every acknowledged batch, then drops journals no longer needed. */
  checkpoint(): Promise<void> {
    return this.checkpointer.checkpoint();
  }

  /** The maintenance timer: while writes are refused it probes too, so the store recovers without waiting for a write. */
  private maintain(): void {
    if (this.commits.isClosed) return;
    if (this.dropWarmWorker) {
      this.dropWarmWorker = false;
      void this.foldWorker.stopIfIdle();
    }
    if (!this.commits.probe()) return;
    this.checkpointer.whenDue();
  }

  /** Flushes a final checkpoint (best effort) and closes. */
  async close(): Promise<void> {
    if (this.commits.isClosed) return;
    if (this.timer) clearInterval(this.timer);
    this.commits.cancelIdleCommit();
    this.commits.settle();
    try {
      const running = this.checkpointer.running;
      if (running) await running.catch(() => {});
      if (this.commits.journalBytes > 0 && this.commits.probe()) await this.checkpointer.checkpoint();
    } catch {
      // the journal still holds everything
    } finally {
      this.commits.close();
      await this.checkpointer.stop().catch(() => {});
      this.statements.free();
      this.db.close();
    }
  }
}
