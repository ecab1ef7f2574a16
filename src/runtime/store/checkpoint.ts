// Checkpoint images: sealing them with a CRC, checking them at start-up, and folding closed journal generations
// into the previous image — the work the checkpoint worker does so that the host's event loop never exports.
//
// Why a fold in a worker thread. sql.js keeps the database inside the main thread's WebAssembly memory, and its
// export() copies every page synchronously. Measured at 100 k tasks / 1 M events (262 MB image, 2-core machine, one
// run, loaded): export 1 155 ms on the main thread; with every event payload moved out of sql.js the image is 67 MB
// and its export still took 488 ms — an order of magnitude short of a 20 ms stall budget, so moving events out alone
// would not do. A worker cannot reach the main thread's database, but everything a checkpoint must hold is already
// on disk: the previous image plus the closed journal generations after it (each batch synced before it was
// acknowledged). So the worker builds the new image exactly as start-up recovery does — load the previous image,
// run the migrations, replay the journal batches up to the checkpoint's sequence — exports it, seals it, and writes
// it (temp file, fsync, rename, directory fsync). The main thread only rotates the journal and starts the worker.
// Same code path as recovery, so the image equals what a restart would rebuild; any surprise (a gap, a damaged
// frame, a bad previous image) fails the fold and the store falls back to exporting on its own thread.
//
// Sealed images. `PRAGMA quick_check` read every page of a 262 MB image in 3.8 s (loaded machine). A sealed image
// carries a CRC-32 of the whole file in the SQLite header's user_version field (bytes 60–63, zero while the CRC is
// computed) and our mark in its application_id field (bytes 68–71): 0.29 s over the same file. Images without the
// mark (written by the previous version) are checked with quick_check as before.
import * as fs from 'node:fs';
import { dirname, join } from 'node:path';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { crc32 } from 'node:zlib';
import type { Database, SqlJsStatic } from 'sql.js';
import { readJournal, type WriteOp } from './journal';
import { migrate } from './migrations';

// sql.js's WebAssembly, compiled once per thread and shareable with workers. V8 compiles a module's functions
// lazily, on their first call, on the calling thread: the store's first query after start-up compiled ~40 ms of
// SQLite in one call on the host's event loop (2-core machine, Node 20), the largest block of the editor's start-up
//. Compiled code belongs to the module, and a module posted to a worker is the same module, not
// a copy: the checkpoint worker runs the store's statements once (warmSqlJs) and the host's restore then runs
// code already compiled (that first query: 1–4 ms).
/** A compiled WebAssembly module, opaque here (this project's TypeScript libs do not declare WebAssembly). */
export type WasmModule = object;
interface WasmApi {
  compile(bytes: Uint8Array): Promise<WasmModule>;
  instantiate(module: WasmModule, imports: object): Promise<object>;
}
const { WebAssembly } = globalThis as unknown as { WebAssembly: WasmApi };
let wasm: Promise<WasmModule> | undefined;
let sqlJs: Promise<SqlJsStatic> | undefined;

/** sql.js's module, compiled from its .wasm beside sql-wasm.js (off the thread: WebAssembly.compile). */
export function sqlJsWasm(): Promise<WasmModule> {
  wasm ??= fs.promises.readFile(join(dirname(require.resolve('sql.js')), 'sql-wasm.wasm')).then((bytes) => WebAssembly.compile(bytes));
  return wasm;
}

/** A worker's side: use the module its host compiled (and shares the compiled code of), not a compile of its own. */
export function useSqlJsWasm(module: WasmModule): void {
  wasm ??= Promise.resolve(module);
}

export function loadSqlJs(): Promise<SqlJsStatic> {
  sqlJs ??= sqlJsWasm().then(
    (module) =>
      new Promise<SqlJsStatic>((resolve, reject) => {
        // eslint-disable-next-line @typescript-eslint/no-require-imports
        const init = require('sql.js') as (cfg: object) => Promise<SqlJsStatic>;
        init({
          // Emscripten's hook: the instance from our module (an instantiation that fails must fail the load).
          instantiateWasm(imports: object, receive: (instance: object) => void) {
            WebAssembly.instantiate(module, imports).then(receive, reject);
            return {};
          },
        }).then(resolve, reject);
      }),
  );
  return sqlJs;
}

/**
 * Runs the kinds of statement the store runs (schema, prepared reads, a journal batch, an export) on a scratch
 * database, so that their WebAssembly is compiled: in the checkpoint worker at open (foldWorkerClient.ts).
 */
export async function warmSqlJs(): Promise<void> {
  const SQL = await loadSqlJs();
  const db = new SQL.Database();
  try {
    applyPragmas(db);
    migrate(db);
    applyBatch(db, 1, [
      ['INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value', ['warm', '1']],
      ['DELETE FROM meta WHERE key = ?', ['warm']],
    ]);
    for (const [name] of db.exec("SELECT name FROM sqlite_master WHERE type = 'table'")[0]?.values ?? []) {
      const st = db.prepare(`SELECT * FROM "${String(name)}" LIMIT ?`);
      try {
        st.bind([10]);
        while (st.step()) st.getAsObject();
      } finally {
        st.free();
      }
    }
    // Reopened from its image, as the restore opens a checkpoint.
    const image = new SQL.Database(db.export());
    try {
      image.exec("SELECT value FROM meta WHERE key = 'journal_seq'");
    } finally {
      image.close();
    }
  } finally {
    db.close();
  }
}

export const CHECKPOINT_RE = /^checkpoint-(\d+)\.sqlite$/;
export const JOURNAL_RE = /^journal-(\d+)\.log$/;
/** Temp files of a checkpoint being written: `checkpoint-<seq>.sqlite.<pid>.tmp`. */
export const TEMP_RE = /^checkpoint-\d+\.sqlite\.\d+\.tmp$/;
export const checkpointName = (seq: number) => `checkpoint-${String(seq).padStart(12, '0')}.sqlite`;
export const journalName = (seq: number) => `journal-${String(seq).padStart(12, '0')}.log`;

export interface Listing {
  checkpoints: number[];
  journals: number[];
}

export function listFiles(dir: string): Listing {
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

export function fsyncDir(dir: string): void {
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

// ---- sealing ----

const CRC_AT = 60; // user_version
const MARK_AT = 68; // application_id
const MARK = 0x54524b31; // "TRK1"

/** Writes the CRC and the mark into the image's header (in place). */
export function sealImage(image: Uint8Array): void {
  const view = Buffer.from(image.buffer, image.byteOffset, image.byteLength);
  if (view.length < 100) return;
  view.writeUInt32BE(MARK, MARK_AT);
  view.writeUInt32BE(0, CRC_AT);
  view.writeUInt32BE(crc32(view), CRC_AT);
}

type ImageState = 'sealed' | 'unsealed' | 'damaged';
/** Bytes of an image checksummed between two turns of the event loop when checked at start-up (about 2 ms a step). */
const CRC_STEP = 1024 * 1024;
const ZERO_CRC = Buffer.alloc(4);

/** The image's state from its header alone (null: sealed, so its CRC decides: crcCheck). */
function headerState(image: Buffer): ImageState | null {
  if (image.length < 100 || image.toString('latin1', 0, 15) !== 'SQLite format 3') return 'damaged';
  if (image.readUInt32BE(MARK_AT) !== MARK) return 'unsealed';
  return null;
}

/** A sealed image checked against its CRC (its CRC field read as zero), CRC_STEP bytes between two yields. */
function* crcCheck(image: Buffer): Generator<void, 'sealed' | 'damaged'> {
  let crc = crc32(ZERO_CRC, crc32(image.subarray(0, CRC_AT)));
  for (let off = CRC_AT + 4; off < image.length; off += CRC_STEP) {
    if (off > CRC_AT + 4) yield;
    crc = crc32(image.subarray(off, Math.min(off + CRC_STEP, image.length)), crc);
  }
  return crc === image.readUInt32BE(CRC_AT) ? 'sealed' : 'damaged';
}

/**
 * 'sealed': the CRC matches; 'unsealed': no mark (an image from the previous version: check it with quick_check);
 * 'damaged': the mark is there and the CRC does not match, or the file cannot be a database at all.
 */
export function checkImage(image: Buffer): ImageState {
  const state = headerState(image);
  if (state) return state;
  const steps = crcCheck(image);
  let r = steps.next();
  while (!r.done) r = steps.next();
  return r.value;
}

/** An image read and checked for start-up: off the event loop (the read) and in steps (the CRC). */
export interface CheckedImage {
  bytes: Buffer;
  state: ImageState;
}

/**
 * Reads and checks an image without blocking the event loop for long: on the host's thread a 5 MB image (2 000
 * tasks) took 20 ms to read and 12 ms to checksum in one piece (2-core machine), a block of the editor's start-up.
 */
export async function readImage(path: string): Promise<CheckedImage> {
  const bytes = await fs.promises.readFile(path);
  const state = headerState(bytes);
  if (state) return { bytes, state };
  const steps = crcCheck(bytes);
  let r = steps.next();
  while (!r.done) {
    await nextTurn();
    r = steps.next();
  }
  return { bytes, state: r.value };
}

/** Loads an image file, checks it, and opens it; throws (with the reason) when it is unusable. */
export function openImage(SQL: SqlJsStatic, path: string, expectedSeq: number): Database {
  const bytes = fs.readFileSync(path);
  return openCheckedImage(SQL, { bytes, state: checkImage(bytes) }, expectedSeq);
}

/** Opens an image read and checked before (readImage); throws (with the reason) when it is unusable. */
export function openCheckedImage(SQL: SqlJsStatic, image: CheckedImage, expectedSeq: number): Database {
  const { bytes: buf, state } = image;
  if (state === 'damaged') throw new Error(buf.length < 100 ? 'file too short' : 'checksum mismatch');
  // sql.js hands the buffer to its in-memory file system without copying it.
  const db = new SQL.Database(buf);
  try {
    if (state === 'unsealed') {
      const check = db.exec('PRAGMA quick_check');
      if (check[0]?.values[0]?.[0] !== 'ok') throw new Error('integrity check failed');
    }
    const stored = db.exec("SELECT value FROM meta WHERE key = 'journal_seq'");
    if (Number(stored[0]?.values[0]?.[0] ?? NaN) !== expectedSeq) throw new Error('sequence mismatch');
  } catch (e) {
    db.close();
    throw e;
  }
  return db;
}

export function applyPragmas(db: Database): void {
  // The in-memory image is made durable by our journal, not by SQLite's own.
  // Exclusive locking spares SQLite its per-transaction file checks on the in-memory file system.
  db.exec('PRAGMA locking_mode = EXCLUSIVE; PRAGMA journal_mode = MEMORY; PRAGMA synchronous = OFF; PRAGMA temp_store = MEMORY;');
}

// Space of deleted tasks. SQLite keeps a deleted row's pages on its freelist and sql.js's export copies every page,
// free or not: without a VACUUM an image never shrinks (measured: 2 000 rows of 20 KB, 9 in 10 deleted, the image
// stayed 41 MB). So a checkpoint vacuums the database it exports when the free pages are worth it (over
// VACUUM_MIN_FREE_BYTES and over VACUUM_MIN_FREE_SHARE of the image): the fold in the worker, and the host's own
// inline export (images up to inlineCheckpointBytes, 2 MiB: a few ms). A large store's database on the host keeps its
// free pages (a VACUUM there would block the event loop for the whole copy); SQLite reuses them for new rows, so the
// host's memory stays at its high-water mark, and a restart loads the vacuumed image. The VACUUM's temporary
// database is a file (MEMFS, JS memory that is collected afterwards), not SQLite's WebAssembly heap, which never
// shrinks. Measured (2-core machine, sql.js 3.54, one run each): a 41 MB image with 4 MB live, 118 ms → 4.1 MB; a
// 164 MB image with 16 MB live, 259 ms → 16 MB.
export const VACUUM_MIN_FREE_BYTES = 1024 * 1024;
export const VACUUM_MIN_FREE_SHARE = 0.25;

export interface VacuumResult {
  /** Bytes of free pages given back. */
  freedBytes: number;
  ms: number;
}

/** Free pages of `db`, in bytes, and the database's size. */
export function freePages(db: Database): { freeBytes: number; totalBytes: number } {
  const r = db.exec('PRAGMA freelist_count; PRAGMA page_count; PRAGMA page_size');
  const size = Number(r[2]?.values[0]?.[0] ?? 4096);
  return { freeBytes: Number(r[0]?.values[0]?.[0] ?? 0) * size, totalBytes: Number(r[1]?.values[0]?.[0] ?? 0) * size };
}

/** VACUUMs `db` when its free pages are worth it (see above); undefined when they were not. Outside a transaction. */
export function vacuumIfWorthIt(db: Database): VacuumResult | undefined {
  const { freeBytes, totalBytes } = freePages(db);
  if (freeBytes < VACUUM_MIN_FREE_BYTES || freeBytes < totalBytes * VACUUM_MIN_FREE_SHARE) return undefined;
  const t0 = performance.now();
  db.exec('PRAGMA temp_store = FILE; VACUUM; PRAGMA temp_store = MEMORY;');
  return { freedBytes: freeBytes, ms: performance.now() - t0 };
}

/** Replays one journal batch (recovery and the fold); sets meta.journal_seq so an image names its sequence. */
export function applyBatch(db: Database, seq: number, ops: WriteOp[]): void {
  db.exec('BEGIN');
  try {
    for (const [sql, params] of ops) db.run(sql, params);
    db.run("UPDATE meta SET value = ? WHERE key = 'journal_seq'", [String(seq)]);
    db.exec('COMMIT');
  } catch (e) {
    db.exec('ROLLBACK');
    const err = new Error(`Journal batch ${seq} could not be replayed: ${(e as Error).message}`);
    (err as Error & { storeCorrupt?: boolean }).storeCorrupt = true;
    throw err;
  }
}

/**
 * Writes `bytes` as `dir/name` durably: a temporary name, fsync, rename, then the directory's fsync, so the name
 * holds either nothing or every byte after a crash. In 8 MiB writes with a data sync every 32 MiB: the disk takes a
 * large file in steady steps instead of one burst of dirty pages the kernel then writes back all at once. A failed
 * write (disk full) removes the partial temporary file, which would only hold on to the space that is missing. The one
 * way to write a whole file here: the store's images, the Batch API's files, the workspace index's image.
 */
export function writeFileDurably(dir: string, name: string, bytes: Uint8Array, mode = 0o600): void {
  const final = join(dir, name);
  const tmp = `${final}.${process.pid}.tmp`;
  const fd = fs.openSync(tmp, 'w', mode);
  try {
    let off = 0;
    let synced = 0;
    while (off < bytes.length) {
      off += fs.writeSync(fd, bytes, off, Math.min(8 * 1024 * 1024, bytes.length - off));
      if (off - synced >= 32 * 1024 * 1024) {
        fs.fdatasyncSync(fd);
        synced = off;
      }
    }
    fs.fsyncSync(fd);
  } catch (e) {
    fs.closeSync(fd);
    fs.rmSync(tmp, { force: true });
    throw e;
  }
  fs.closeSync(fd);
  fs.renameSync(tmp, final);
  fsyncDir(dir);
}

/** Exports, seals, and writes an image as `checkpoint-<seq>.sqlite` durably. */
export function writeImageSync(dir: string, seq: number, image: Uint8Array): void {
  sealImage(image);
  writeFileDurably(dir, checkpointName(seq), image);
}

export interface FoldRequest {
  dir: string;
  /** The image to start from (its sequence), or null for an empty database. */
  base: number | null;
  /** The new image holds every batch up to and including this one. */
  upTo: number;
}

export interface FoldResult {
  bytes: number;
  replayed: number;
  ms: number;
  /** The fold's VACUUM, when the free pages were worth one. */
  vacuum?: VacuumResult;
}

/**
 * Builds `checkpoint-<upTo>` from `checkpoint-<base>` and the journal batches (base, upTo], as recovery would, and
 * writes it. Throws when any batch in that range is missing or damaged (the caller falls back).
 */
export async function foldCheckpoint(req: FoldRequest): Promise<FoldResult> {
  const t0 = performance.now();
  const SQL = await loadSqlJs();
  const db = req.base === null ? new SQL.Database() : openImage(SQL, join(req.dir, checkpointName(req.base)), req.base);
  try {
    applyPragmas(db);
    migrate(db);
    let expected = (req.base ?? Number(db.exec("SELECT value FROM meta WHERE key = 'journal_seq'")[0]?.values[0]?.[0] ?? 0)) + 1;
    const journals = listFiles(req.dir).journals;
    let replayed = 0;
    for (const [i, start] of journals.entries()) {
      if (expected > req.upTo) break;
      const next = journals[i + 1];
      if (next !== undefined && next <= expected) continue; // every batch in it is already in the image
      if (start > req.upTo) break;
      const read = readJournal(join(req.dir, journalName(start)));
      for (const rec of read.records) {
        if (rec.seq < expected) continue;
        if (rec.seq > req.upTo) break;
        if (rec.seq !== expected) throw new Error(`batch ${expected} is missing from ${journalName(start)}`);
        applyBatch(db, rec.seq, rec.ops);
        expected++;
        replayed++;
      }
      if (read.damaged.length && expected <= req.upTo) throw new Error(`${journalName(start)} is damaged`);
    }
    if (expected !== req.upTo + 1) throw new Error(`batches ${expected}–${req.upTo} are missing`);
    db.run("UPDATE meta SET value = ? WHERE key = 'journal_seq'", [String(req.upTo)]);
    const vacuum = vacuumIfWorthIt(db);
    const image = db.export();
    db.close();
    writeImageSync(req.dir, req.upTo, image);
    return { bytes: image.length, replayed, ms: performance.now() - t0, ...(vacuum ? { vacuum } : {}) };
  } catch (e) {
    try {
      db.close();
    } catch {
      // already closed
    }
    throw e;
  }
}
