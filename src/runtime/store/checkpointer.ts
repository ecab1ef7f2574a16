// When and how the store writes a checkpoint (a whole-database image) and lets old journals go. History and
// figures: docs/store.md ("Checkpoints off the host's thread").
//
// Invariants:
//   - An image holds every acknowledged batch up to its sequence; new writes go on in the next journal generation
//     while it is written, and no generation starts while writes are refused (the journal may hold a refused
//     batch's bytes).
//   - Above `inlineCheckpointBytes` the host never exports: it rotates the journal and the checkpoint worker folds
//     the previous image and the closed journals (checkpoint.ts), as a restart would. Any fold failure but a disk
//     error falls back to an export on the host ('fallback'); a disk error fails the checkpoint (the journal keeps
//     everything).
//   - An image is exported only outside a sql.js transaction (its export refuses an open write transaction): what
//     waits is synced and committed first.
//   - One checkpoint at a time; a request while one runs gets one more after it, so the caller's writes are covered.
//   - The newest two images are kept, with every journal the older one still needs.
//   - Deleted rows' pages come back in the next image: the fold vacuums when they are worth it, and so does an
//     inline export (checkpoint.ts, vacuumIfWorthIt: the figures).
import * as fs from 'node:fs';
import { join } from 'node:path';
import type { Database } from 'sql.js';
import { checkpointName, fsyncDir, journalName, listFiles, sealImage, vacuumIfWorthIt, type VacuumResult } from './checkpoint';
import type { FoldWorkerClient } from './foldWorkerClient';
import type { GroupCommit } from './groupCommit';
import type { StatementCache } from './statements';

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
  /** The VACUUM before the export, when deleted rows had left enough free pages (checkpoint.ts vacuumIfWorthIt). */
  vacuum?: VacuumResult;
}

export interface CheckpointPolicy {
  /** Start a checkpoint when the live journal passes this many bytes. */
  checkpointBytes: number;
  /** ...or when this much time passed since the last one with changes pending. */
  checkpointIntervalMs: number;
  /** Databases up to this size are exported on the host's thread; larger ones are folded by the worker. */
  inlineCheckpointBytes: number;
  log?: (msg: string) => void;
}

/** Fold failures that exporting on the host would only repeat: the disk refuses the image. */
const IO_ERRORS = new Set(['ENOSPC', 'EDQUOT', 'EFBIG', 'EIO', 'EROFS']);

export class Checkpointer {
  private lastCheckpointAt = Date.now();
  private checkpointing: Promise<void> | undefined;
  /** How the last checkpoint was made (undefined before the first one). */
  last: CheckpointStats | undefined;

  /**
   * `base`: the newest image on disk, which the next fold starts from (null: none yet). `foldWorker`: the store's
   * checkpoint worker, already started by the open when the store is large (foldWorkerClient.ts).
   */
  constructor(
    private readonly db: Database,
    private readonly statements: StatementCache,
    private readonly commits: GroupCommit,
    private readonly dir: string,
    private base: number | null,
    private readonly policy: CheckpointPolicy,
    private readonly foldWorker: FoldWorkerClient,
  ) {}

  /** The checkpoint under way, if any. */
  get running(): Promise<void> | undefined {
    return this.checkpointing;
  }

  /** After a write: starts a checkpoint in the background once the live journal is large enough. */
  afterWrite(): void {
    if (!this.checkpointing && this.commits.journalBytes >= this.policy.checkpointBytes) void this.checkpoint().catch(() => {});
  }

  /** On the maintenance timer: starts a checkpoint in the background when the interval has passed with changes. */
  whenDue(): void {
    if (this.checkpointing) return;
    if (this.commits.journalBytes > 0 && Date.now() - this.lastCheckpointAt >= this.policy.checkpointIntervalMs) {
      void this.checkpoint().catch(() => {});
    }
  }

  /** Writes a database image containing every acknowledged batch, then drops journals no longer needed. */
  checkpoint(): Promise<void> {
    // A new journal generation must not start while the current one may hold a refused batch's bytes.
    try {
      this.commits.assertWritable();
    } catch (e) {
      return Promise.reject(e);
    }
    if (this.checkpointing) {
      // One more after the one under way, so the caller's writes are covered.
      return this.checkpointing.then(() => (!this.commits.isClosed && this.commits.journalBytes > 0 ? this.checkpoint() : undefined));
    }
    if (this.commits.isClosed) return Promise.resolve();
    const run = async () => {
      const t0 = performance.now();
      if (this.imageBytes() <= this.policy.inlineCheckpointBytes) await this.checkpointInline('inline', t0);
      else await this.checkpointInWorker(t0);
      this.lastCheckpointAt = Date.now();
      await this.prune();
    };
    this.checkpointing = run()
      .catch((e) => {
        this.policy.log?.(`store: checkpoint failed (${(e as NodeJS.ErrnoException).code ?? (e as Error).message}); the journal keeps everything`);
        throw e;
      })
      .finally(() => {
        this.checkpointing = undefined;
      });
    return this.checkpointing;
  }

  /** Ends the checkpoint worker (close). */
  stop(): Promise<void> {
    return this.foldWorker.stop();
  }

  /** Database size in bytes, from SQLite's own page count (cheap). */
  private imageBytes(): number {
    const r = this.db.exec('PRAGMA page_count; PRAGMA page_size');
    return Number(r[0]?.values[0]?.[0] ?? 0) * Number(r[1]?.values[0]?.[0] ?? 4096);
  }

  /** Export on this thread: blocks the event loop for about 1 ms per MB (used for small databases, and as fallback). */
  private async checkpointInline(mode: 'inline' | 'fallback', t0: number): Promise<void> {
    // The image is exported outside any transaction: batches waiting for their sync are synced and committed first.
    this.commits.syncNow();
    this.commits.commit();
    const seq = this.commits.commitSeq;
    const h0 = performance.now();
    this.statements.get("UPDATE meta SET value = ? WHERE key = 'journal_seq'").run([String(seq)]);
    // Deleted rows' pages come back (checkpoint.ts): here only for a small database (the fallback may be a large one).
    const vacuum = mode === 'inline' ? vacuumIfWorthIt(this.db) : undefined;
    const image = this.db.export();
    sealImage(image);
    // New writes go to a new journal generation while the image is written.
    this.commits.rotate();
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
    this.last = { seq, mode, ms: performance.now() - t0, bytes: image.length, hostMs, ...(vacuum ? { vacuum } : {}) };
  }

  /**
   * The checkpoint worker builds the image from the previous one and the journals just closed (checkpoint.ts); the
   * host only rotates the journal. If the fold fails for any reason but an I/O error, the host exports itself.
   */
  private async checkpointInWorker(t0: number): Promise<void> {
    const upTo = this.commits.rotate();
    const pending = this.foldWorker.run({ dir: this.dir, base: this.base, upTo });
    const hostMs = performance.now() - t0;
    const reply = await pending;
    if (reply.ok) {
      this.base = upTo;
      this.last = {
        seq: upTo,
        mode: 'worker',
        ms: performance.now() - t0,
        bytes: reply.bytes ?? 0,
        hostMs,
        ...(reply.vacuum ? { vacuum: reply.vacuum } : {}),
      };
      return;
    }
    if (reply.code && IO_ERRORS.has(reply.code)) {
      const err = new Error(reply.error) as NodeJS.ErrnoException;
      err.code = reply.code;
      throw err;
    }
    this.policy.log?.(`store: the checkpoint worker failed (${reply.error}); exporting on the main thread instead`);
    if (this.commits.isClosed) return;
    await this.checkpointInline('fallback', t0);
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
}
