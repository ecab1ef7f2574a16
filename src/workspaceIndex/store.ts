// The workspace index on disk: its own sql.js database (never the task store's), in a folder of the data directory.
// Why a journal: the index is written one finished file at a time, and a crash or window reload mid-index must keep
// every finished file, while exporting the whole database after each file costs time that grows with the index
// (docs/store.md measured 9 ms at 0.6 MB, 96 ms at 12 MB). So each finished file is one JSON line appended to
// `journal.jsonl` and synced (a fraction of a millisecond), and the database image `index.sqlite` is written (temp
// file, fsync, rename) at the end of a run, on close, and when the journal passes JOURNAL_CHECKPOINT_BYTES. Opening
// loads the image and replays the journal. Every record replaces a whole file's state (or drops it, or resets the
// index), so replaying a record the image already holds changes nothing; an unreadable line (a torn append) ends the
// replay: the files after it are simply indexed again. The index is derived data: anything lost is re-embedded.
//
// Tables: files(path, hash, mtime, size), chunks(path, start_line, end_line, hash, text, vector float32 blob),
// meta(key, value): the embedding model and its vector size (another model means another index: reset).
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import { join } from 'node:path';
import type { Database } from 'sql.js';
import { isProcessAlive } from '../runtime/process';
import { loadSqlJs, writeFileDurably } from '../runtime/store/checkpoint';

export const IMAGE_FILE = 'index.sqlite';
export const JOURNAL_FILE = 'journal.jsonl';
/** Held by the one process that writes the index (pid inside); readers take no lock. */
export const LOCK_FILE = 'index.lock';
/** The journal is folded into the image when it grows past this. */
export const JOURNAL_CHECKPOINT_BYTES = 16 * 1024 * 1024;

export interface IndexedFile {
  /** Workspace-relative, '/'-separated. */
  path: string;
  /** sha256 of the content, hex. */
  hash: string;
  /** Unix ms, as listed when it was read. */
  mtime: number;
  size: number;
}

export interface ChunkRecord {
  startLine: number;
  endLine: number;
  /** sha256 of the chunk text, hex. */
  hash: string;
  text: string;
  vector: Float32Array;
}

export interface StoredChunk extends Omit<ChunkRecord, 'vector'> {
  path: string;
}

type JournalRecord =
  | { op: 'reset'; model: string; dimensions: number }
  | { op: 'file'; file: IndexedFile; chunks: Array<Omit<ChunkRecord, 'vector'> & { vector: string }> }
  | { op: 'touch'; file: IndexedFile }
  | { op: 'drop'; path: string };

const SCHEMA = `
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files (path TEXT PRIMARY KEY, hash TEXT NOT NULL, mtime INTEGER NOT NULL, size INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS chunks (id INTEGER PRIMARY KEY, path TEXT NOT NULL, start_line INTEGER NOT NULL,
  end_line INTEGER NOT NULL, hash TEXT NOT NULL, text TEXT NOT NULL, vector BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS chunks_path ON chunks (path);
`;

/** Another live process (another window of the same workspace) is writing this index. */
export class IndexBusyError extends Error {
  constructor(readonly pid: number) {
    super(`The workspace index is being updated by another window (process ${pid}); try again when it has finished.`);
  }
}

/** Takes the writer's lock, taking over one left by a process that is gone; returns its release. */
function lock(dir: string): () => void {
  const path = join(dir, LOCK_FILE);
  for (let attempt = 0; ; attempt++) {
    try {
      const fd = fs.openSync(path, 'wx');
      fs.writeSync(fd, String(process.pid));
      fs.closeSync(fd);
      return () => fs.rmSync(path, { force: true });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST' || attempt > 0) throw e;
      const pid = Number(fs.readFileSync(path, 'utf8'));
      if (Number.isInteger(pid) && pid > 0 && pid !== process.pid && isProcessAlive(pid)) throw new IndexBusyError(pid);
      fs.rmSync(path, { force: true });
    }
  }
}

export function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

function vectorToBase64(v: Float32Array): string {
  return Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('base64');
}

function bytesToVector(bytes: Uint8Array): Float32Array {
  // A copy: the blob's offset need not be 4-aligned.
  const copy = new Uint8Array(bytes.byteLength);
  copy.set(bytes);
  return new Float32Array(copy.buffer);
}

export class IndexStore {
  private journalFd: number | undefined;
  private journalBytes = 0;
  /** Bumped on every change: search caches its matrix per version. */
  version = 0;
  private closed = false;
  private unlock: (() => void) | undefined;

  private constructor(
    readonly dir: string,
    private readonly db: Database,
    readonly readOnly: boolean,
  ) {}

  /**
   * What the files on disk are now (image and journal sizes and times): a reader opened at one signature is current
   * as long as the signature is the same.
   */
  static signature(dir: string): string {
    const stat = (name: string) => {
      try {
        const s = fs.statSync(join(dir, name));
        return `${s.size}:${s.mtimeMs}`;
      } catch {
        return '-';
      }
    };
    return `${stat(IMAGE_FILE)}|${stat(JOURNAL_FILE)}`;
  }

  static exists(dir: string): boolean {
    return fs.existsSync(join(dir, IMAGE_FILE)) || fs.existsSync(join(dir, JOURNAL_FILE));
  }

  /**
   * Opens (or creates) the index in `dir`: the image, then the journal replayed. A writer takes the directory's lock
   * (IndexBusyError while another live process holds it); a reader (`readOnly`) takes none and writes nothing.
   */
  static async open(dir: string, options: { readOnly?: boolean } = {}): Promise<IndexStore> {
    const readOnly = options.readOnly ?? false;
    fs.mkdirSync(dir, { recursive: true });
    const unlock = readOnly ? undefined : lock(dir);
    try {
      return await IndexStore.load(dir, readOnly, unlock);
    } catch (e) {
      unlock?.();
      throw e;
    }
  }

  private static async load(dir: string, readOnly: boolean, unlock: (() => void) | undefined): Promise<IndexStore> {
    const SQL = await loadSqlJs();
    const imagePath = join(dir, IMAGE_FILE);
    let db: Database;
    try {
      db = fs.existsSync(imagePath) ? new SQL.Database(fs.readFileSync(imagePath)) : new SQL.Database();
      db.exec(SCHEMA);
    } catch {
      // A damaged image: the index is derived data, start again (the journal alone may still restore part of it).
      db = new SQL.Database();
      db.exec(SCHEMA);
    }
    const store = new IndexStore(dir, db, readOnly);
    store.unlock = unlock;
    store.replayJournal();
    if (!readOnly) store.journalFd = fs.openSync(join(dir, JOURNAL_FILE), 'a');
    return store;
  }

  private replayJournal(): void {
    const path = join(this.dir, JOURNAL_FILE);
    if (!fs.existsSync(path)) return;
    const bytes = fs.readFileSync(path);
    let good = 0;
    let at = 0;
    while (at < bytes.length) {
      const nl = bytes.indexOf(0x0a, at);
      if (nl < 0) break; // a torn last append: never acknowledged
      let record: JournalRecord;
      try {
        record = JSON.parse(bytes.subarray(at, nl).toString('utf8')) as JournalRecord;
      } catch {
        break;
      }
      this.apply(record);
      at = nl + 1;
      good = at;
    }
    if (good < bytes.length && !this.readOnly) fs.truncateSync(path, good);
    this.journalBytes = good;
  }

  private apply(r: JournalRecord): void {
    this.version += 1;
    const db = this.db;
    if (r.op === 'reset') {
      db.exec('DELETE FROM chunks; DELETE FROM files; DELETE FROM meta;');
      db.run('INSERT INTO meta (key, value) VALUES (?, ?), (?, ?)', ['model', r.model, 'dimensions', String(r.dimensions)]);
      return;
    }
    if (r.op === 'touch') {
      db.run('UPDATE files SET mtime = ?, size = ? WHERE path = ? AND hash = ?', [r.file.mtime, r.file.size, r.file.path, r.file.hash]);
      return;
    }
    const path = r.op === 'drop' ? r.path : r.file.path;
    db.exec('BEGIN');
    try {
      db.run('DELETE FROM chunks WHERE path = ?', [path]);
      db.run('DELETE FROM files WHERE path = ?', [path]);
      if (r.op === 'file') {
        db.run('INSERT INTO files (path, hash, mtime, size) VALUES (?, ?, ?, ?)', [path, r.file.hash, r.file.mtime, r.file.size]);
        const st = db.prepare('INSERT INTO chunks (path, start_line, end_line, hash, text, vector) VALUES (?, ?, ?, ?, ?, ?)');
        try {
          for (const c of r.chunks) st.run([path, c.startLine, c.endLine, c.hash, c.text, Buffer.from(c.vector, 'base64')]);
        } finally {
          st.free();
        }
      }
      db.exec('COMMIT');
    } catch (e) {
      db.exec('ROLLBACK');
      throw e;
    }
  }

  /** Applies a record and returns once it is synced to the journal. */
  private write(r: JournalRecord): void {
    if (this.closed || this.journalFd === undefined) throw new Error('the workspace index is closed');
    const line = Buffer.from(JSON.stringify(r) + '\n', 'utf8');
    fs.writeSync(this.journalFd, line);
    fs.fdatasyncSync(this.journalFd);
    this.journalBytes += line.length;
    this.apply(r);
    if (this.journalBytes > JOURNAL_CHECKPOINT_BYTES) this.checkpoint();
  }

  get model(): string | undefined {
    return this.metaValue('model');
  }

  get dimensions(): number | undefined {
    const v = this.metaValue('dimensions');
    return v === undefined ? undefined : Number(v);
  }

  private metaValue(key: string): string | undefined {
    const rows = this.db.exec('SELECT value FROM meta WHERE key = ?', [key]);
    const v = rows[0]?.values[0]?.[0];
    return typeof v === 'string' ? v : undefined;
  }

  /** Empties the index and records the model its vectors will come from. */
  reset(model: string, dimensions: number): void {
    this.write({ op: 'reset', model, dimensions });
  }

  putFile(file: IndexedFile, chunks: readonly ChunkRecord[]): void {
    this.write({ op: 'file', file, chunks: chunks.map((c) => ({ ...c, vector: vectorToBase64(c.vector) })) });
  }

  /** A file read again and found unchanged: its new mtime and size, so that the next run need not read it. */
  touchFile(file: IndexedFile): void {
    this.write({ op: 'touch', file });
  }

  dropFile(path: string): void {
    this.write({ op: 'drop', path });
  }

  files(): Map<string, IndexedFile> {
    const out = new Map<string, IndexedFile>();
    const st = this.db.prepare('SELECT path, hash, mtime, size FROM files');
    try {
      while (st.step()) {
        const [path, hash, mtime, size] = st.get() as [string, string, number, number];
        out.set(path, { path, hash, mtime, size });
      }
    } finally {
      st.free();
    }
    return out;
  }

  counts(): { files: number; chunks: number } {
    const f = this.db.exec('SELECT COUNT(*) FROM files')[0]?.values[0]?.[0];
    const c = this.db.exec('SELECT COUNT(*) FROM chunks')[0]?.values[0]?.[0];
    return { files: Number(f ?? 0), chunks: Number(c ?? 0) };
  }

  /** Every chunk's id and vector (for search; the caller caches it per `version`). */
  vectors(): { ids: number[]; vectors: Float32Array[] } {
    const ids: number[] = [];
    const vectors: Float32Array[] = [];
    const st = this.db.prepare('SELECT id, vector FROM chunks');
    try {
      while (st.step()) {
        const [id, blob] = st.get() as [number, Uint8Array];
        ids.push(id);
        vectors.push(bytesToVector(blob));
      }
    } finally {
      st.free();
    }
    return { ids, vectors };
  }

  chunk(id: number): StoredChunk | undefined {
    const rows = this.db.exec('SELECT path, start_line, end_line, hash, text FROM chunks WHERE id = ?', [id]);
    const row = rows[0]?.values[0];
    if (!row) return undefined;
    const [path, startLine, endLine, hash, text] = row as [string, number, number, string, string];
    return { path, startLine, endLine, hash, text };
  }

  /** Writes the image (temp file, fsync, rename) and empties the journal. */
  checkpoint(): void {
    if (this.closed || this.readOnly) return;
    const image = this.db.export();
    writeFileDurably(this.dir, IMAGE_FILE, image);
    if (this.journalFd !== undefined) fs.ftruncateSync(this.journalFd, 0);
    this.journalBytes = 0;
  }

  close(): void {
    if (this.closed) return;
    try {
      if (this.journalBytes > 0) this.checkpoint();
    } finally {
      this.closed = true;
      if (this.journalFd !== undefined) fs.closeSync(this.journalFd);
      this.journalFd = undefined;
      this.db.close();
      this.unlock?.();
    }
  }
}
