// Worker-thread entry: folds closed journal generations into new checkpoint images off the host's event loop (see
// checkpoint.ts for why, and docs/runtime.md for the figures), and at a process's first open runs the store's
// statements once so that the sql.js module it shares with the host is compiled (warmSqlJs). One worker per store,
// started at open when the store is large (else at the first large checkpoint) and kept: it instantiates sql.js once,
// as it starts, from the host's module (workerData), and a fold's memory (the previous image, the export) lives in
// JS buffers that its own garbage collector returns afterwards (SQLite's WebAssembly heap stays at its 2 MB page
// cache). Built as its own file (dist/ and out/) next to foldWorkerClient.js, which starts it.
import { readlinkSync } from 'node:fs';
import { setPriority } from 'node:os';
import { parentPort, workerData } from 'node:worker_threads';
import { foldCheckpoint, loadSqlJs, useSqlJsWasm, warmSqlJs, type FoldRequest, type WasmModule } from './checkpoint';

/** A fold, or (`warm`) running the store's statements once so that the shared module's code is compiled. */
export type FoldJob = { id: number; req: FoldRequest } | { id: number; warm: true };

/** What the host passes at start: sql.js's compiled module (its code is shared with the host's instance). */
export interface FoldWorkerData {
  wasm?: WasmModule;
}

export interface FoldReply {
  id?: number;
  ok: boolean;
  bytes?: number;
  replayed?: number;
  ms?: number;
  /** The fold's VACUUM (checkpoint.ts vacuumIfWorthIt), when there was one. */
  vacuum?: { freedBytes: number; ms: number };
  error?: string;
  /** errno code when the failure was an I/O error (disk full …): falling back on the host's thread would not help. */
  code?: string;
}

// Lowest CPU priority for this thread only (Linux: /proc/thread-self names its thread id): a fold is background
// work and must leave the cores to the host's event loop first. Lowered at the first fold, not at start: the host's
// restore waits for the warm-up, which took 255–281 ms at nice 19 and 82 ms at the host's priority (2-core machine),
// and a thread cannot raise its priority again. Elsewhere the worker runs at normal priority.
let lowered = false;
function lowerPriority(): void {
  if (lowered) return;
  lowered = true;
  try {
    setPriority(Number(readlinkSync('/proc/thread-self').split('/').pop()), 19);
  } catch {
    // not Linux, or not allowed
  }
}

// sql.js is instantiated as the worker starts (from the host's module when it passed one), not in the first fold; a
// failure here comes back from that fold.
const data = workerData as FoldWorkerData | null;
if (data?.wasm) useSqlJsWasm(data.wasm);
loadSqlJs().catch(() => {});

// One job at a time: the store never starts a fold before the previous one answered.
parentPort?.on('message', (job: FoldJob) => {
  const t0 = performance.now();
  if (!('warm' in job)) lowerPriority();
  const work = 'warm' in job ? warmSqlJs().then(() => ({ ms: performance.now() - t0 })) : foldCheckpoint(job.req);
  work.then(
    (r) => parentPort?.postMessage({ id: job.id, ok: true, ...r } satisfies FoldReply),
    (e: unknown) => {
      const err = e as NodeJS.ErrnoException;
      parentPort?.postMessage({ id: job.id, ok: false, error: err?.message ?? String(e), code: err?.code } satisfies FoldReply);
    },
  );
});
