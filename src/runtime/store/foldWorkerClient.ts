// The host's side of the checkpoint worker (checkpointWorker.ts, a worker thread that folds closed journal
// generations into a new checkpoint image; why: checkpoint.ts and docs/store.md).
//
// Invariants: one worker per store, started at open when the store's image is large enough to be folded (`start`)
// or else at the first fold, and kept while the store is open (it instantiates sql.js once, as it starts, from the
// host's compiled module when given one); the process's first store also starts it at open to warm that module's
// code (`warm`, checkpoint.ts) and, if it does not fold, ends it at its first maintenance tick; at most one job
// in flight (the checkpointer never starts one before the previous one answered); the worker is referenced only
// while a fold is under way, so it never keeps a process alive by itself, and a fold that was started is still
// waited for by close(). Every failure (the worker cannot start, throws, exits) answers
// the fold in flight with `ok: false`; the caller decides what to do instead.
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import type { FoldRequest, WasmModule } from './checkpoint';
import type { FoldJob, FoldReply, FoldWorkerData } from './checkpointWorker';

/** Built next to this module (dist/ by esbuild, out/ by tsc; scripts/build.mjs). */
const WORKER_FILE = join(__dirname, 'checkpointWorker.js');

export class FoldWorkerClient {
  private worker: Worker | undefined;
  private pending: { id: number; resolve: (r: FoldReply) => void } | undefined;
  private nextId = 1;

  /** `wasm`: sql.js's module as the host compiled it; a worker given it shares its compiled code (checkpoint.ts). */
  constructor(private readonly wasm?: WasmModule) {}

  /**
   * Starts the worker now, idle and unreferenced, so that the first fold finds it running with sql.js loaded:
   * creating it takes 6–70 ms of the host's thread (measured on the loaded 2-core machine) and its start-up
   * instantiates sql.js; at open that hides in the restore, at the first checkpoint it stalled the loop.
   * Failures are the first fold's to report.
   */
  start(): void {
    try {
      this.spawn();
    } catch {
      // run() tries again and answers with the reason
    }
  }

  /** Folds (base, upTo] into `checkpoint-<upTo>`; never rejects. */
  run(req: FoldRequest): Promise<FoldReply> {
    return this.send({ id: this.nextId++, req });
  }

  /**
   * Runs the store's kinds of statement once in the worker (starting it if needed), which compiles their
   * WebAssembly into the module the host shares (checkpoint.ts): the host's restore after it runs compiled code.
   * Never rejects; `ok: false` when the worker could not (the host then compiles as it goes, as before).
   */
  warm(): Promise<FoldReply> {
    return this.send({ id: this.nextId++, warm: true });
  }

  private send(job: FoldJob): Promise<FoldReply> {
    return new Promise((resolve) => {
      let worker: Worker;
      try {
        worker = this.spawn();
      } catch (e) {
        resolve({ ok: false, error: (e as Error).message });
        return;
      }
      this.pending = { id: job.id, resolve };
      worker.ref();
      worker.postMessage(job);
    });
  }

  /** The running worker, or a new one (unreferenced until a fold is sent); throws when it cannot be created. */
  private spawn(): Worker {
    if (this.worker) return this.worker;
    const worker = new Worker(WORKER_FILE, { workerData: { wasm: this.wasm } satisfies FoldWorkerData });
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
      worker.unref();
      p.resolve(m);
    });
    worker.once('error', (e) => fail(e.message));
    worker.once('exit', (code) => fail(`the checkpoint worker exited with code ${code}`));
    // After the listeners: adding a 'message' listener references the worker again (an idle worker unreferenced
    // before it kept a process alive; the test of start() caught it).
    worker.unref();
    return worker;
  }

  /** Ends the worker unless a job is under way (then it stays, as for a store that folds). */
  async stopIfIdle(): Promise<void> {
    if (!this.pending) await this.stop();
  }

  /** Ends the worker (a fold in flight answers `ok: false`); the next run() starts a new one. */
  async stop(): Promise<void> {
    const w = this.worker;
    this.worker = undefined;
    if (w) await w.terminate();
  }
}
