// The host's side of the checkpoint worker (checkpointWorker.ts, a worker thread that folds closed journal
// generations into a new checkpoint image; why: checkpoint.ts and docs/store.md).
//
// Invariants: one worker per store, started at the first fold and kept while the store is open (it loads sql.js
// once); at most one fold in flight (the checkpointer never starts one before the previous one answered); the
// worker is referenced only while a fold is under way, so it never keeps a process alive by itself, and a fold
// that was started is still waited for by close(). Every failure (the worker cannot start, throws, exits) answers
// the fold in flight with `ok: false`; the caller decides what to do instead.
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import type { FoldRequest } from './checkpoint';
import type { FoldJob, FoldReply } from './checkpointWorker';

/** Built next to this module (dist/ by esbuild, out/ by tsc; scripts/build.mjs). */
const WORKER_FILE = join(__dirname, 'checkpointWorker.js');

export class FoldWorkerClient {
  private worker: Worker | undefined;
  private pending: { id: number; resolve: (r: FoldReply) => void } | undefined;
  private nextId = 1;

  /** Folds (base, upTo] into `checkpoint-<upTo>`; never rejects. */
  run(req: FoldRequest): Promise<FoldReply> {
    return new Promise((resolve) => {
      let worker = this.worker;
      if (!worker) {
        try {
          worker = new Worker(WORKER_FILE);
        } catch (e) {
          resolve({ ok: false, error: (e as Error).message });
          return;
        }
        this.worker = worker;
        const fail = (error: string) => {
          if (this.worker === worker) this.worker = undefined;
          const p = this.pending;
          this.pending = undefined;
          p?.resolve({ ok: false, error });
        };
        worker.on('message', (m: FoldReply) => {
          if (!this.pending || m.id !== this.pending.id) return;
          const p = this.pending;
          this.pending = undefined;
          worker!.unref();
          p.resolve(m);
        });
        worker.once('error', (e) => fail(e.message));
        worker.once('exit', (code) => fail(`the checkpoint worker exited with code ${code}`));
      }
      const id = this.nextId++;
      this.pending = { id, resolve };
      worker.ref();
      worker.postMessage({ id, req } satisfies FoldJob);
    });
  }

  /** Ends the worker (a fold in flight answers `ok: false`); the next run() starts a new one. */
  async stop(): Promise<void> {
    const w = this.worker;
    this.worker = undefined;
    if (w) await w.terminate();
  }
}
