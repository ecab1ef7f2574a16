// Worker-thread entry: folds closed journal generations into new checkpoint images off the host's event loop (see
// checkpoint.ts for why, and docs/runtime.md for the figures). One worker per store, started at open when the store
// is large (else at the first large checkpoint) and kept: it loads sql.js once, as it starts, and a fold's memory
// (the previous image, the export) lives in JS buffers that its own garbage collector returns afterwards (SQLite's
// WebAssembly heap stays at its 2 MB page cache). Built as its own file (dist/ and out/) next to
// foldWorkerClient.js, which starts it.
import { readlinkSync } from 'node:fs';
import { setPriority } from 'node:os';
import { parentPort } from 'node:worker_threads';
import { foldCheckpoint, loadSqlJs, type FoldRequest } from './checkpoint';

export interface FoldJob {
  id: number;
  req: FoldRequest;
}

export interface FoldReply {
  id?: number;
  ok: boolean;
  bytes?: number;
  replayed?: number;
  ms?: number;
  error?: string;
  /** errno code when the failure was an I/O error (disk full …): falling back on the host's thread would not help. */
  code?: string;
}

// Lowest CPU priority for this thread only (Linux: /proc/thread-self names its thread id): a fold is background
// work and must leave the cores to the host's event loop first. Elsewhere the worker runs at normal priority.
try {
  setPriority(Number(readlinkSync('/proc/thread-self').split('/').pop()), 19);
} catch {
  // not Linux, or not allowed
}

// sql.js is compiled as the worker starts (at the store's open, foldWorkerClient.ts), not in the first fold; a failure
// here comes back from that fold.
loadSqlJs().catch(() => {});

// One job at a time: the store never starts a fold before the previous one answered.
parentPort?.on('message', (job: FoldJob) => {
  foldCheckpoint(job.req).then(
    (r) => parentPort?.postMessage({ id: job.id, ok: true, ...r } satisfies FoldReply),
    (e: unknown) => {
      const err = e as NodeJS.ErrnoException;
      parentPort?.postMessage({ id: job.id, ok: false, error: err?.message ?? String(e), code: err?.code } satisfies FoldReply);
    },
  );
});
