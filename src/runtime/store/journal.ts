// Append-only journal of committed write batches. A record is [u32 length][u32 crc32][JSON payload]; it is
// synced before the write it carries is acknowledged. The payload is JSON.stringify({ s, o }) byte for byte, built
// with each statement's text escaped once per writer, in a frame buffer the writer keeps (encodeRecord; a create's
// record: 12–17 → 8–9 µs, three runs on the loaded 2-core machine). Appending and syncing are separate steps
// (`write`, then `sync` on this thread or `syncAsync` on libuv's pool), so that one sync can cover several records
// (group commit, groupCommit.ts). The async sync uses a second descriptor of the same file: Linux reports a writeback
// error to every open file description once (errseq), so a sync on this thread that runs beside one on the pool
// still sees an error the other one saw, and neither can take the other's error away.
//
// Reading tells two kinds of bad bytes apart:
//   - a torn tail: bad bytes with no valid frame anywhere after them. A crash during an append leaves this, and such
//     a record was never acknowledged, so it is dropped.
//   - damage: bad bytes followed by at least one valid frame (found by scanning forward, byte by byte, for a header
//     whose length fits and whose CRC matches a JSON payload of the record shape). The frames after the damage were
//     acknowledged, so they are returned with their offsets and the caller decides what may be replayed and what is
//     kept aside. A false resynchronisation needs a 32-bit CRC collision on a payload that also parses as a record.
//     Cheap: a payload starts with '{' and JSON bytes read as a length are ≥ 0x20000000, so a CRC is computed at
//     almost no offset. Measured here (loaded 2-core machine, best of 9): 4 MiB of random junk or of zeros after a
//     torn record scanned in 20–50 ms; a clean 4 MiB journal (~28 k records) reads in the same 100–200 ms as before.
//
// A failed append leaves bytes after the good end whose on-disk state is unknown (written but not synced, or a
// header zeroed but not synced). The writer remembers that extent; `probe()` overwrites it with zeros and syncs —
// the probe that must succeed before the store accepts writes again, so a batch that was refused can never surface
// on the next start and a later batch never lands behind unsynced leftovers.
import * as fs from 'node:fs';
import { crc32 } from 'node:zlib';

export type SqlParam = string | number | null;
export type WriteOp = [sql: string, params: SqlParam[]];

export interface JournalRecord {
  /** Store-wide commit sequence number of this batch. */
  seq: number;
  ops: WriteOp[];
}

const HEADER = 8;
/** The smallest payload a record can have: {"s":0,"o":[]}. */
const MIN_PAYLOAD = 14;
const OPEN_BRACE = 0x7b;

// Appends overwrite space written ahead of time, so each sync carries data only and no file-size change
// (measured here: p50 0.11 ms vs 0.26 ms for growing appends; p99 0.3 ms vs 2–9 ms). The zeros are written on the
// host's thread and the next sync carries them, so a writer grows its file in steps that double from
// FIRST_PREALLOCATE up to PREALLOCATE: the first write of a generation (after an open, after each checkpoint's
// rotation) used to zero-fill and sync 4 MiB on the event loop — 60–330 ms of write plus 5–30 ms of sync right after
// an open of the 100 k-task store on the loaded 2-core machine, 18–67 ms after a rotation — and
// now does 64 KiB. Seven steps reach 4 MiB within a generation's first 8 MiB; from then on it is as before.
const PREALLOCATE = 4 * 1024 * 1024;
const FIRST_PREALLOCATE = 64 * 1024;

/** Frames up to this size are built in the writer's scratch buffer; larger ones (bulk batches) get their own. */
const SCRATCH_KEEP = 1024 * 1024;
/** Statement texts whose JSON is remembered (the store writes a few dozen distinct ones). */
const SQL_JSON_ENTRIES = 512;

/**
 * The payload of a record: exactly JSON.stringify({ s: seq, o: ops }), built with each statement's text escaped once
 * per writer instead of once per record (statement texts are a third of a create's 2 KB record).
 */
export function encodeRecord(record: JournalRecord, sqlJson: Map<string, string>): string {
  let out = `{"s":${JSON.stringify(record.seq)},"o":[`;
  const ops = record.ops;
  for (let i = 0; i < ops.length; i++) {
    const op = ops[i];
    if (i > 0) out += ',';
    if (op.length !== 2 || typeof op[0] !== 'string' || !Array.isArray(op[1])) {
      out += JSON.stringify(op);
      continue;
    }
    const sql = op[0];
    let text = sqlJson.get(sql);
    if (text === undefined) {
      text = JSON.stringify(sql);
      if (sqlJson.size < SQL_JSON_ENTRIES) sqlJson.set(sql, text);
    }
    out += `[${text},${JSON.stringify(op[1])}]`;
  }
  return `${out}]}`;
}

/** The file operations the writer syncs with: a seam for tests (count syncs, fail one, hold one back). */
export interface JournalFileOps {
  fdatasyncSync(fd: number): void;
  fdatasync(fd: number, callback: (err: NodeJS.ErrnoException | null) => void): void;
}

export const NODE_FILE_OPS: JournalFileOps = {
  fdatasyncSync: (fd) => fs.fdatasyncSync(fd),
  fdatasync: (fd, callback) => fs.fdatasync(fd, callback),
};

export class JournalWriter {
  private fd: number;
  /** A second descriptor of the same file, for syncs on libuv's pool (see the header). */
  private asyncFd: number | undefined;
  private asyncSyncs = 0;
  private closed = false;
  private size: number;
  private allocated: number;
  /** How much the next growth writes ahead (doubles up to PREALLOCATE). */
  private step = FIRST_PREALLOCATE;
  /** End of the bytes a failed append may have left after `size` (0: nothing to repair). */
  private dirtyTo = 0;
  /** Frames are built here (one buffer for every append up to SCRATCH_KEEP bytes), then written. */
  private scratch = Buffer.allocUnsafe(16 * 1024);
  /** Statement text as JSON, by statement (see encodeRecord). */
  private readonly sqlJson = new Map<string, string>();

  constructor(
    readonly path: string,
    private readonly ops: JournalFileOps = NODE_FILE_OPS,
  ) {
    this.fd = fs.openSync(path, fs.constants.O_RDWR | fs.constants.O_CREAT, 0o600);
    const existing = fs.fstatSync(this.fd).size;
    this.size = existing > 0 ? readJournal(path).goodBytes : 0;
    this.allocated = existing;
  }

  get bytes(): number {
    return this.size;
  }

  private reserve(upTo: number): void {
    if (upTo <= this.allocated) return;
    const grow = Math.max(this.step, upTo - this.allocated);
    this.step = Math.min(PREALLOCATE, 2 * this.step);
    const zeros = Buffer.alloc(grow);
    let off = 0;
    while (off < grow) off += fs.writeSync(this.fd, zeros, off, grow - off, this.allocated + off);
    this.allocated += grow;
  }

  /**
   * Writes one record after the last one, without syncing it; returns the offset just past it. On failure the
   * record's header is zeroed (best effort) and its extent is remembered for `probe()`; writing again before a probe
   * is refused.
   */
  write(record: JournalRecord): number {
    if (this.dirtyTo > 0) throw new Error('the journal needs a probe after a failed write');
    const payload = encodeRecord(record, this.sqlJson);
    const n = HEADER + Buffer.byteLength(payload, 'utf8');
    if (n > this.scratch.length && n <= SCRATCH_KEEP) {
      this.scratch = Buffer.allocUnsafe(Math.min(SCRATCH_KEEP, Math.max(n, 2 * this.scratch.length)));
    }
    const frame = n <= this.scratch.length ? this.scratch : Buffer.allocUnsafe(n);
    frame.write(payload, HEADER, 'utf8');
    frame.writeUInt32LE(n - HEADER, 0);
    frame.writeUInt32LE(crc32(frame.subarray(HEADER, n)), 4);
    const before = this.size;
    try {
      this.reserve(before + n);
      let off = 0;
      while (off < n) off += fs.writeSync(this.fd, frame, off, n - off, before + off);
    } catch (e) {
      this.forget(before, before + n);
      throw e;
    }
    this.size = before + n;
    return this.size;
  }

  /** Syncs everything written so far, on this thread. */
  sync(): void {
    this.ops.fdatasyncSync(this.fd);
  }

  /** Syncs everything written so far on libuv's pool; `done` is called on this thread. */
  syncAsync(done: (err: NodeJS.ErrnoException | null) => void): void {
    if (this.closed) throw new Error('the journal is closed');
    this.asyncFd ??= fs.openSync(this.path, fs.constants.O_RDWR);
    this.asyncSyncs++;
    this.ops.fdatasync(this.asyncFd, (err) => {
      this.asyncSyncs--;
      if (this.closed) this.closeAsyncFd();
      done(err);
    });
  }

  /** Appends and syncs one record (the plain acknowledged write). */
  append(record: JournalRecord): void {
    const before = this.size;
    const end = this.write(record);
    try {
      this.sync();
    } catch (e) {
      this.forget(before, end);
      throw e;
    }
  }

  /**
   * Gives up the records after `goodEnd` (written, maybe partly on disk, never acknowledged): their bytes are zeroed
   * here as far as the file system lets us, and by the next probe, which must succeed before anything is written again.
   */
  forget(goodEnd: number, end = this.size): void {
    const from = Math.min(this.size, goodEnd);
    const to = Math.max(end, this.size);
    this.dirtyTo = Math.max(this.dirtyTo, to);
    this.size = from;
    try {
      // The first header first: with it zeroed nothing after it reads as a record.
      fs.writeSync(this.fd, Buffer.alloc(HEADER), 0, HEADER, from);
      if (to - from > HEADER) fs.writeSync(this.fd, Buffer.alloc(to - from - HEADER), 0, to - from - HEADER, from + HEADER);
    } catch {
      // probe() zeroes it later; until then the store refuses writes
    }
  }

  /**
   * The probe after a failed append or sync: overwrite with zeros everything after the good end that the failure may
   * have left (at least one header's worth), and sync. Throws while the file system still refuses; afterwards the
   * file holds exactly the acknowledged records followed by zeros.
   */
  probe(): void {
    const end = Math.max(this.dirtyTo, this.size + HEADER);
    const len = end - this.size;
    const zeros = Buffer.alloc(len);
    let off = 0;
    while (off < len) off += fs.writeSync(this.fd, zeros, off, len - off, this.size + off);
    this.ops.fdatasyncSync(this.fd);
    this.allocated = Math.max(this.allocated, end);
    this.dirtyTo = 0;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    fs.closeSync(this.fd);
    // A sync still on the pool keeps its descriptor until it is done (closing it early could let the number be reused).
    if (this.asyncSyncs === 0) this.closeAsyncFd();
  }

  private closeAsyncFd(): void {
    if (this.asyncFd === undefined) return;
    fs.closeSync(this.asyncFd);
    this.asyncFd = undefined;
  }
}

export interface JournalFrame extends JournalRecord {
  /** Byte offset of the frame's header in the file. */
  offset: number;
  /** Frame length (header + payload). */
  bytes: number;
}

export interface ByteRange {
  offset: number;
  bytes: number;
}

export interface JournalReadResult {
  /** Every valid frame in file order: the clean prefix, then any found past damaged bytes. */
  records: JournalFrame[];
  /** Byte offset just past the clean prefix (the first bad byte, or the end of the last record). */
  goodBytes: number;
  /** Unreadable ranges that have valid frames after them. */
  damaged: ByteRange[];
  /** Unreadable bytes at the end with nothing valid after them (zero write-ahead space is not counted). */
  torn: ByteRange | undefined;
  /** True when `torn` is set. */
  tornTail: boolean;
}

function frameAt(buf: Buffer, off: number): JournalFrame | undefined {
  if (off + HEADER + MIN_PAYLOAD > buf.length || buf[off + HEADER] !== OPEN_BRACE) return undefined;
  const len = buf.readUInt32LE(off);
  if (len < MIN_PAYLOAD || off + HEADER + len > buf.length) return undefined;
  const payload = buf.subarray(off + HEADER, off + HEADER + len);
  if (crc32(payload) !== buf.readUInt32LE(off + 4)) return undefined;
  let parsed: { s: number; o: WriteOp[] };
  try {
    parsed = JSON.parse(payload.toString('utf8'));
  } catch {
    return undefined;
  }
  if (typeof parsed?.s !== 'number' || !Array.isArray(parsed.o)) return undefined;
  return { seq: parsed.s, ops: parsed.o, offset: off, bytes: HEADER + len };
}

/** Offset of the first non-zero byte at or after `from` (buf.length when the rest is zeros). */
function skipZeros(buf: Buffer, from: number): number {
  let i = from;
  while (i < buf.length && buf[i] === 0) i++;
  return i;
}

/** Offset of the next valid frame after `from` (buf.length when there is none). */
function nextFrame(buf: Buffer, from: number): number {
  const last = buf.length - HEADER - MIN_PAYLOAD;
  for (let p = from; p <= last; p++) {
    // Every payload starts with '{': one byte rules out almost every offset before any CRC is computed.
    if (buf[p + HEADER] === OPEN_BRACE && frameAt(buf, p)) return p;
  }
  return buf.length;
}

export function readJournal(path: string): JournalReadResult {
  const buf = fs.readFileSync(path);
  const records: JournalFrame[] = [];
  const damaged: ByteRange[] = [];
  let goodBytes: number | undefined;
  let off = 0;
  for (;;) {
    const rec = frameAt(buf, off);
    if (rec) {
      records.push(rec);
      off += rec.bytes;
      continue;
    }
    goodBytes ??= off;
    // Space written ahead (zeros) after the last record is a clean end, not a torn one.
    if (skipZeros(buf, off) === buf.length) return { records, goodBytes, damaged, torn: undefined, tornTail: false };
    const next = nextFrame(buf, off + 1);
    if (next >= buf.length) {
      // Nothing valid after: a torn tail, trailing zeros excluded.
      let last = buf.length;
      while (last > off && buf[last - 1] === 0) last--;
      return { records, goodBytes, damaged, torn: { offset: off, bytes: last - off }, tornTail: true };
    }
    damaged.push({ offset: off, bytes: next - off });
    off = next;
  }
}

/**
 * Rewrites a journal to hold exactly `frames` (frames read from it, in order), through a synced temp file and a
 * rename; the caller syncs the directory.
 */
export function keepFrames(path: string, frames: JournalFrame[]): void {
  const buf = fs.readFileSync(path);
  const out = Buffer.concat(frames.map((f) => buf.subarray(f.offset, f.offset + f.bytes)));
  const tmp = `${path}.${process.pid}.tmp`;
  const fd = fs.openSync(tmp, 'w', 0o600);
  try {
    let off = 0;
    while (off < out.length) off += fs.writeSync(fd, out, off, out.length - off);
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  fs.renameSync(tmp, path);
}
