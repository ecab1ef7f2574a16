// The store's write path: every batch is applied to sql.js, appended to the journal and synced before anyone is
// told of it; batches written while a sync is under way share the next one (group commit), and synced batches
// share one in-memory COMMIT. History and figures: docs/store.md ("Group commit", "In-memory commits").
//
// Invariants:
//   - Nothing of a batch is shown before its sync: `onDurable` callbacks run in batch order, from the sync that
//     covered the batch; a plain write syncs on this thread and so covers every batch before it.
//   - Durability is the journal's, never SQLite's. Batches stay in one open sql.js transaction until every batch in
//     it is synced and COMMIT_AFTER_OPS statements have gathered (or the loop is next idle), so a failed sync rolls
//     back exactly the batches not yet synced and applies the synced ones again; none of them was shown to anyone.
//   - A failed statement rolls the open transaction back and applies the batches before it again (no savepoint per
//     batch).
//   - A failed append or sync refuses every write (`store_unwritable`) until a probe (zeros over what the failure may
//     have left after the good end, then a sync) succeeds: a refused batch can never surface after a restart, and
//     no new journal generation starts while one may hold its bytes (a checkpoint starts only once writable).
//   - `epoch` changes when unsynced batches are rolled back (their sequence numbers are used again) and when the
//     journal rotates: a background sync started before says nothing about batches written after.
import { join } from 'node:path';
import { RuntimeError } from '../errors';
import { journalName } from './checkpoint';
import { JournalWriter, type JournalFileOps, type WriteOp } from './journal';
import type { StatementCache } from './statements';

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

/** Synced batches stay in the open sql.js transaction until this many statements have gathered (docs/store.md). */
const COMMIT_AFTER_OPS = 16;

export class GroupCommit {
  private journal: JournalWriter;
  private seq: number;
  private unwritable: Error | undefined;
  private closed = false;
  // Batches applied since the last COMMIT, in order, while a sql.js transaction is open.
  private uncommitted: Uncommitted[] = [];
  /** Statements in those batches (the in-memory COMMIT waits for COMMIT_AFTER_OPS of them). */
  private uncommittedOps = 0;
  private idleCommit: NodeJS.Immediate | undefined;
  /** Every batch up to this one is synced; durableEnd is the journal offset just past it (current journal). */
  private durableSeq: number;
  private durableEnd: number;
  /** The sync under way on libuv's pool, with what it covers. */
  private syncing: { seq: number; end: number; epoch: number } | undefined;
  /** See the header. */
  private epoch = 0;
  /** Callbacks of batches that became durable (or failed), run in order. */
  private readonly callbacks: Array<() => void> = [];
  /** Write batches and journal syncs since open (tests and the benchmark: group commit means fewer syncs). */
  readonly stats = { batches: 0, syncs: 0, deferred: 0 };
  /** Told how long each successful journal sync took, in ms (the runtime's metrics). */
  onSync: ((ms: number) => void) | undefined;

  /** Continues after batch `seq` (everything up to it is in the database and durable) in a new journal generation. */
  constructor(
    private readonly statements: StatementCache,
    private readonly dir: string,
    seq: number,
    private readonly fileOps: JournalFileOps,
    private readonly log: ((msg: string) => void) | undefined,
  ) {
    this.seq = seq;
    this.durableSeq = seq;
    this.journal = new JournalWriter(join(dir, journalName(seq + 1)), fileOps);
    this.durableEnd = this.journal.bytes;
  }

  /** The last batch applied (durable or not). */
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

  get isClosed(): boolean {
    return this.closed;
  }

  /** True while some applied batch is not yet known to be durable. */
  get unsettled(): boolean {
    return this.durableSeq < this.seq;
  }

  /** Throws store_unwritable while writes are refused and a probe does not succeed. */
  assertWritable(): void {
    if (this.unwritable && !this.probe()) {
      throw new RuntimeError('store_unwritable', `The store cannot be written (${errorCode(this.unwritable)}).`);
    }
  }

  /**
   * Applies the batch atomically and makes it durable before returning. Throws (and changes nothing) when a
   * statement fails or the journal cannot be written.
   *
   * With `defer`, returns once the batch is applied and journalled; a sync on libuv's pool makes it durable, together
   * with every batch written while that sync was under way (one fdatasync for all of them), and `defer.onDurable`
   * runs then. A write without `defer` syncs on this thread and so makes every batch before it durable too.
   */
  write(ops: WriteOp[], options: WriteOptions = {}): void {
    if (this.closed) throw new RuntimeError('runtime_closed', 'The store is closed.');
    this.assertWritable();
    const seq = this.seq + 1;
    // No savepoint per batch: a failed statement rolls the open transaction back and applies the batches before it
    // again (rollbackKeeping), which only a bug or a failing disk pays (see the header).
    if (this.uncommitted.length === 0) this.statements.get('BEGIN').run();
    try {
      for (const [sql, params] of ops) {
        const st = this.statements.get(sql);
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
      this.log?.(`store: journal write failed (${errorCode(err)}); nothing was changed; writes are refused until a probe write and sync succeed`);
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

  /** Syncs on this thread; throws store_unwritable (after rolling back every batch not yet synced) when it fails. */
  syncNow(): void {
    if (this.durableSeq === this.seq) return;
    const end = this.journal.bytes;
    const t0 = performance.now();
    try {
      this.journal.sync();
    } catch (e) {
      const err = e as NodeJS.ErrnoException;
      this.log?.(
        `store: journal sync failed (${errorCode(err)}); the batches it carried were rolled back; writes are refused until a probe write and sync succeed`,
      );
      this.failUncommitted(err);
      throw new RuntimeError('store_unwritable', `The store could not be written (${errorCode(err)}).`);
    }
    this.stats.syncs++;
    this.onSync?.(performance.now() - t0);
    this.markDurable(this.seq, end);
  }

  /** Starts a sync on libuv's pool unless one is under way (its completion starts the next one). */
  private syncSoon(): void {
    if (this.syncing || this.closed) return;
    const target = { seq: this.seq, end: this.journal.bytes, epoch: this.epoch };
    this.syncing = target;
    const t0 = performance.now();
    this.journal.syncAsync((err) => {
      this.syncing = undefined;
      if (this.closed) return;
      // Since it started, the journal rotated (after syncing everything) or the batches it carried were rolled back
      // (and their sequence numbers may be in use again): it covers nothing that is still waiting.
      if (target.epoch === this.epoch) {
        if (err) {
          if (this.durableSeq < this.seq || !this.unwritable) {
            this.log?.(
              `store: journal sync failed (${errorCode(err)}); the batches it carried were rolled back; writes are refused until a probe write and sync succeed`,
            );
            this.failUncommitted(err);
          }
          return;
        }
        this.stats.syncs++;
        this.onSync?.(performance.now() - t0);
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
    this.unwritable = err;
    this.runCallbacks();
  }

  /**
   * Rolls the open sql.js transaction back and applies `keep` (batches that were applied before, in order, from the
   * same state, so they apply again) in a new one; with nothing to keep no transaction stays open.
   */
  private rollbackKeeping(keep: Uncommitted[]): void {
    try {
      this.statements.get('ROLLBACK').run();
    } catch {
      // SQLite ended the transaction itself (a full disk, out of memory)
    }
    this.uncommitted = [];
    this.uncommittedOps = 0;
    if (keep.length === 0) return;
    this.statements.get('BEGIN').run();
    for (const u of keep) for (const [sql, params] of u.ops) this.statements.get(sql).run(params);
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
        this.log?.(`store: an in-memory commit failed: ${(e as Error).message}`);
      }
    });
    this.idleCommit.unref();
  }

  /** Commits the open sql.js transaction (every batch in it is durable). */
  commit(): void {
    if (this.uncommitted.length === 0) return;
    this.statements.get('COMMIT').run();
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
        this.log?.(`store: a write callback threw: ${(e as Error).message}`);
      }
    }
  }

  /**
   * After a failed append: zero what it may have left behind and sync (a real write and sync on the journal). True
   * when that worked and writes are accepted again (and true at once when they were not refused).
   */
  probe(): boolean {
    if (!this.unwritable || this.closed) return !this.unwritable;
    try {
      this.journal.probe();
    } catch {
      return false;
    }
    this.log?.(`store: a probe write and sync succeeded after ${errorCode(this.unwritable)}; writes are accepted again`);
    this.unwritable = undefined;
    return true;
  }

  /**
   * Starts a new journal generation after the current sequence (a checkpoint: the closed one is folded or no longer
   * needed); returns that sequence.
   */
  rotate(): number {
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

  /** Drops a pending idle commit (close: the final checkpoint commits what it exports). */
  cancelIdleCommit(): void {
    if (this.idleCommit) clearImmediate(this.idleCommit);
  }

  /** Refuses writes from now on and closes the journal (everything acknowledged is synced). */
  close(): void {
    this.closed = true;
    this.journal.close();
  }
}

function errorCode(e: Error): string {
  return (e as NodeJS.ErrnoException).code ?? 'I/O error';
}
