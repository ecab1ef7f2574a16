// sql.js (SQLite in WebAssembly, in memory) made durable: every write batch is journalled and synced before it is
// acknowledged; checkpoints (whole-database images) are written in the background and let old journals go.
//
// Files in the data directory:
//   checkpoint-<seq>.sqlite   database image containing every batch up to <seq> (the newest two are kept)
//   journal-<seq>.log         batches from <seq> on (one file per checkpoint generation)
import * as fs from 'node:fs';
import { join } from 'node:path';
import type { Database, SqlJsStatic, Statement } from 'sql.js';
import { RuntimeError } from '../errors';
import { JournalWriter, readJournal, type SqlParam, type WriteOp } from './journal';
import { migrate } from './migrations';

export type { SqlParam, WriteOp } from './journal';
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

export interface OpenReport {
  checkpointSeq: number;
  replayedBatches: number;
  tornTail: boolean;
  quarantined: string[];
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
    const report: OpenReport = { checkpointSeq: 0, replayedBatches: 0, tornTail: false, quarantined: [] };
    const quarantine = (name: string, why: string) => {
      const to = `${name}.corrupt-${Date.now()}`;
      fs.renameSync(join(dir, name), join(dir, to));
      report.quarantined.push(to);
      opts.log?.(`store: ${why}; moved ${name} aside as ${to}`);
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

    // Replay every journal batch after the checkpoint, in order; stop at the first gap or torn record.
    const journals = listFiles(dir).journals;
    let expected = seq + 1;
    let stop = false;
    for (const start of journals) {
      const name = journalName(start);
      const path = join(dir, name);
      if (stop) {
        quarantine(name, `journal ${name} follows a damaged one`);
        continue;
      }
      const { records, goodBytes, tornTail } = readJournal(path);
      for (const rec of records) {
        if (rec.seq < expected) continue;
        if (rec.seq !== expected) {
          stop = true;
          opts.log?.(`store: journal gap before batch ${rec.seq} (expected ${expected})`);
          break;
        }
        applyBatch(db, rec.seq, rec.ops);
        report.replayedBatches++;
        expected++;
      }
      if (tornTail) {
        report.tornTail = true;
        const isLast = start === journals[journals.length - 1];
        if (isLast) {
          // A torn last record was never acknowledged: drop it.
          opts.log?.(`store: dropped a torn record at the end of ${name}`);
        } else {
          stop = true;
          const copy = `${name}.corrupt-${Date.now()}`;
          fs.copyFileSync(path, join(dir, copy));
          report.quarantined.push(copy);
          opts.log?.(`store: ${name} is damaged in the middle (copy kept as ${copy}); later journals are set aside`);
        }
        fs.truncateSync(path, goodBytes);
      }
    }
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
    if (this.unwritable) {
      throw new RuntimeError('store_unwritable', `The store cannot be written: ${this.unwritable.message}`);
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
      this.options.log?.(`store: journal write failed (${err.code ?? err.message}); nothing was changed`);
      throw new RuntimeError('store_unwritable', `The store could not be written (${err.code ?? 'I/O error'}).`);
    }
    this.db.exec('COMMIT');
    this.seq = seq;
    if (!this.checkpointing && this.journal.bytes >= this.options.checkpointBytes) void this.checkpoint().catch(() => {});
  }

  private maybeCheckpoint(): void {
    if (this.closed || this.checkpointing) return;
    if (this.journal.bytes > 0 && Date.now() - this.lastCheckpointAt >= this.options.checkpointIntervalMs) {
      void this.checkpoint().catch(() => {});
    }
  }

  /** Writes a database image containing every acknowledged batch, then drops journals no longer needed. */
  checkpoint(): Promise<void> {
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
      if (this.journal.bytes > 0 && !this.unwritable) await this.checkpoint();
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

  /** For fault handling: refuse writes from now on. */
  markUnwritable(reason: Error): void {
    this.unwritable = reason;
  }
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
