// Files of the Batch API (OpenAI's /v1/files): an upload's bytes live in the data directory (`files/<id>`), not in
// the sql.js store, whose whole image is held in memory and checkpointed: a batch's input may be 100 MiB. Only the
// file's record is a row (`files`). Why it is done this way:
//   - Durable before answered: the bytes are written to a temporary name, synced and renamed into place, and only
//     then is the row written (one durable batch). A crash in between leaves bytes without a row; they are removed at
//     the next open (`sweepOrphans`). Deleting removes the row first, then the bytes.
//   - Input files never change once written: a batch reads its lines by offset and length (batch_items rows), so a
//     restart finds every line where it was.
//   - Each principal sees only its own files; another principal's id answers as if it did not exist.
import * as fs from 'node:fs';
import { join } from 'node:path';
import { RuntimeError } from '../errors';
import { randomId } from '../ids';
import { limitExceeded } from '../shares';
import type { DurableDatabase, Row, WriteOp } from '../store/database';
import { writeFileDurably } from '../store/checkpoint';
import { BATCH_LIMIT_NAMES, BATCH_LIMITS, FILE_PURPOSES, type FilePurpose, type FileRecord } from './types';

export const newFileId = () => randomId('file-');

export interface FileListQuery {
  principal: string;
  purpose?: FilePurpose;
  /** A file id: the page starts after it (in the list's order). */
  after?: string;
  limit: number;
  order: 'asc' | 'desc';
}

function toFile(r: Row): FileRecord {
  return {
    id: String(r.id),
    principal: String(r.principal),
    purpose: String(r.purpose) as FilePurpose,
    filename: String(r.filename),
    bytes: Number(r.bytes),
    createdAt: Number(r.created_at),
  };
}

export class BatchFiles {
  readonly dir: string;

  constructor(
    private readonly db: DurableDatabase,
    dataDir: string,
    private readonly now: () => number,
  ) {
    this.dir = join(dataDir, 'files');
    fs.mkdirSync(this.dir, { recursive: true });
  }

  /** Stores an upload; refused when it or the principal's files together pass their limits. */
  create(principal: string, purpose: FilePurpose, filename: string, bytes: Buffer): FileRecord {
    if (!FILE_PURPOSES.includes(purpose) || purpose === 'batch_output') {
      throw new RuntimeError('invalid_request', `Invalid value for "purpose": only "batch" files can be uploaded here.`, 'purpose');
    }
    if (bytes.length > BATCH_LIMITS.maxFileBytes) {
      throw new RuntimeError('payload_too_large', `The file is ${bytes.length} bytes; at most ${BATCH_LIMITS.maxFileBytes} are accepted.`, 'file', {
        name: BATCH_LIMIT_NAMES.fileBytes,
        max: BATCH_LIMITS.maxFileBytes,
        current: bytes.length,
        unit: 'bytes',
      });
    }
    const held = this.usage(principal);
    if (held.count >= BATCH_LIMITS.maxFilesPerPrincipal) {
      throw limitExceeded(
        { name: BATCH_LIMIT_NAMES.files, max: BATCH_LIMITS.maxFilesPerPrincipal, current: held.count, unit: 'requests' },
        `This client has ${held.count} files, the most it may keep; delete some first`,
      );
    }
    if (held.bytes + bytes.length > BATCH_LIMITS.maxFileBytesPerPrincipal) {
      throw limitExceeded(
        { name: BATCH_LIMIT_NAMES.fileBytesPerPrincipal, max: BATCH_LIMITS.maxFileBytesPerPrincipal, current: held.bytes, unit: 'bytes' },
        `This client's files hold ${held.bytes} bytes; ${bytes.length} more would pass the limit of ${BATCH_LIMITS.maxFileBytesPerPrincipal}; delete some first`,
      );
    }
    const { record, ops } = this.prepare(principal, purpose, filename, bytes);
    this.db.write(ops);
    return record;
  }

  /**
   * Writes the bytes of a new file durably and returns its row's insert, for the caller's own batch (a batch's
   * output files are recorded together with the batch's end). Limits are the caller's business.
   */
  prepare(principal: string, purpose: FilePurpose, filename: string, bytes: Buffer): { record: FileRecord; ops: WriteOp[] } {
    const record: FileRecord = { id: newFileId(), principal, purpose, filename: filename.slice(0, 255), bytes: bytes.length, createdAt: this.now() };
    writeFileDurably(this.dir, record.id, bytes);
    return {
      record,
      ops: [
        [
          'INSERT INTO files (id, principal, purpose, filename, bytes, created_at) VALUES (?, ?, ?, ?, ?, ?)',
          [record.id, principal, purpose, record.filename, record.bytes, record.createdAt],
        ],
      ],
    };
  }

  get(id: string, principal: string): FileRecord | undefined {
    if (typeof id !== 'string' || id.length > 200) return undefined;
    const r = this.db.get('SELECT * FROM files WHERE id = ?', [id]);
    if (!r || r.principal !== principal) return undefined;
    return toFile(r);
  }

  mustGet(id: string, principal: string, param = 'file_id'): FileRecord {
    const f = this.get(id, principal);
    if (!f) throw new RuntimeError('not_found', `No file with id "${String(id).slice(0, 80)}".`, param);
    return f;
  }

  list(q: FileListQuery): { files: FileRecord[]; hasMore: boolean } {
    const desc = q.order === 'desc';
    const params: (string | number)[] = [q.principal];
    let where = 'principal = ?';
    if (q.purpose) {
      where += ' AND purpose = ?';
      params.push(q.purpose);
    }
    if (q.after !== undefined) {
      const at = this.get(q.after, q.principal);
      if (!at) throw new RuntimeError('invalid_request', `Invalid value for "after": no file with id "${q.after.slice(0, 80)}".`, 'after');
      where += desc ? ' AND (created_at < ? OR (created_at = ? AND id < ?))' : ' AND (created_at > ? OR (created_at = ? AND id > ?))';
      params.push(at.createdAt, at.createdAt, at.id);
    }
    const dir = desc ? 'DESC' : 'ASC';
    const rows = this.db.all(`SELECT * FROM files WHERE ${where} ORDER BY created_at ${dir}, id ${dir} LIMIT ?`, [...params, q.limit + 1]);
    return { files: rows.slice(0, q.limit).map(toFile), hasMore: rows.length > q.limit };
  }

  /** The whole file. */
  content(id: string, principal: string): Buffer {
    const f = this.mustGet(id, principal);
    return fs.readFileSync(this.pathOf(f.id));
  }

  /** `length` bytes from `offset` of a file (one line of a batch's input). */
  read(id: string, offset: number, length: number): Buffer {
    const fd = fs.openSync(this.pathOf(id), 'r');
    try {
      const buf = Buffer.alloc(length);
      let at = 0;
      while (at < length) {
        const n = fs.readSync(fd, buf, at, length - at, offset + at);
        if (n === 0) break;
        at += n;
      }
      return buf.subarray(0, at);
    } finally {
      fs.closeSync(fd);
    }
  }

  /** Deletes a file: its row, then its bytes. `inUse` refuses while an unfinished batch reads it. */
  delete(id: string, principal: string, inUse: (fileId: string) => string | undefined): FileRecord {
    const f = this.mustGet(id, principal);
    const batch = inUse(f.id);
    if (batch) throw new RuntimeError('invalid_request', `The file is the input of the unfinished batch ${batch}; cancel it first.`, 'file_id');
    this.db.write([['DELETE FROM files WHERE id = ?', [f.id]]]);
    fs.rmSync(this.pathOf(f.id), { force: true });
    return f;
  }

  /** Removes bytes without a row (a crash between writing them and recording them) and leftover temporary files. */
  sweepOrphans(): number {
    let removed = 0;
    for (const name of fs.readdirSync(this.dir)) {
      const id = name.endsWith('.tmp') ? undefined : name;
      if (id !== undefined && this.db.get('SELECT 1 AS x FROM files WHERE id = ?', [id])) continue;
      fs.rmSync(join(this.dir, name), { force: true });
      removed++;
    }
    return removed;
  }

  private usage(principal: string): { count: number; bytes: number } {
    const r = this.db.get('SELECT COUNT(*) AS n, COALESCE(SUM(bytes), 0) AS b FROM files WHERE principal = ?', [principal]);
    return { count: Number(r?.n ?? 0), bytes: Number(r?.b ?? 0) };
  }

  private pathOf(id: string): string {
    if (!/^file-[0-9a-z]+$/.test(id)) throw new RuntimeError('invalid_request', 'Not a file id.', 'file_id');
    return join(this.dir, id);
  }
}
