// The host's side of the grammar worker (grammarWorker.ts): schemas become grammar text off the host's thread, one
// job at a time, each within a time budget. Why: a schema with a 100 000-value enum took ~0.9 s of node-llama-cpp's
// converter on the host's thread, and every other principal's request waited behind it (docs/security.md).
//
// Invariants: one worker per process, started at the first job and kept, referenced only while a job is in flight
// (it never keeps a process alive by itself); a job that runs past its budget terminates the worker (the next job
// starts a fresh one) and rejects with a GrammarBudgetError; a worker that cannot start or dies rejects the job in
// flight with the reason. Jobs wait in order; the budget counts from when a job reaches the worker.
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import type { GrammarJob, GrammarReply } from './grammarWorker';

/** Built next to this module (dist/ by esbuild, out/ by tsc; scripts/build.mjs). */
const WORKER_FILE = join(__dirname, 'grammarWorker.js');

/** The most one schema's conversion may take: 100 000 enum values take ~0.9 s on a loaded 2-core machine. */
export const GRAMMAR_BUDGET_MS = 15_000;

export class GrammarBudgetError extends Error {}

interface Pending {
  job: GrammarJob;
  resolve: (grammar: string) => void;
  reject: (err: Error) => void;
}

export class GrammarCompiler {
  private worker: Worker | undefined;
  private readonly queue: Pending[] = [];
  private current: { pending: Pending; timer: NodeJS.Timeout } | undefined;
  private nextId = 1;

  constructor(private readonly budgetMs = GRAMMAR_BUDGET_MS) {}

  /** The hardened grammar text enforcing `schema` (node-llama-cpp's schema subset, jsonSchema.ts). */
  compile(schema: unknown): Promise<string> {
    return new Promise((resolve, reject) => {
      this.queue.push({ job: { id: this.nextId++, schema }, resolve, reject });
      this.pump();
    });
  }

  dispose(): void {
    const worker = this.worker;
    this.worker = undefined;
    this.fail(new Error('the grammar worker was stopped'));
    for (const p of this.queue.splice(0)) p.reject(new Error('the grammar worker was stopped'));
    void worker?.terminate();
  }

  private pump(): void {
    if (this.current) return;
    const pending = this.queue.shift();
    if (!pending) {
      this.worker?.unref();
      return;
    }
    let worker: Worker;
    try {
      worker = this.spawn();
    } catch (err) {
      pending.reject(new Error(`the grammar worker could not start: ${err instanceof Error ? err.message : String(err)}`));
      return this.pump();
    }
    worker.ref();
    const timer = setTimeout(() => {
      this.fail(new GrammarBudgetError(`building the grammar took longer than ${Math.round(this.budgetMs / 1000)} s`));
      this.worker = undefined;
      void worker.terminate();
      this.pump();
    }, this.budgetMs);
    this.current = { pending, timer };
    worker.postMessage(pending.job);
  }

  private spawn(): Worker {
    if (this.worker) return this.worker;
    const worker = new Worker(WORKER_FILE);
    worker.on('message', (reply: GrammarReply) => {
      const current = this.current;
      if (!current || current.pending.job.id !== reply.id) return;
      clearTimeout(current.timer);
      this.current = undefined;
      if (reply.ok) current.pending.resolve(reply.grammar);
      else current.pending.reject(new Error(reply.message));
      this.pump();
    });
    const gone = (why: string) => {
      if (this.worker !== worker) return;
      this.worker = undefined;
      this.fail(new Error(`the grammar worker ${why}`));
      this.pump();
    };
    worker.on('error', (err) => gone(`failed: ${err.message}`));
    worker.on('exit', (code) => gone(`exited (code ${code})`));
    this.worker = worker;
    return worker;
  }

  private fail(err: Error): void {
    const current = this.current;
    if (!current) return;
    clearTimeout(current.timer);
    this.current = undefined;
    current.pending.reject(err);
  }
}

/** The process's compiler: every model's grammars share one worker. */
let shared: GrammarCompiler | undefined;
export function grammarCompiler(): GrammarCompiler {
  shared ??= new GrammarCompiler();
  return shared;
}
