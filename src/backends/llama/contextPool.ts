// Where a generation gets its llama.cpp sequence. The seam is `SequencePool`: a generation acquires a sequence
// (empty, on a context of the model's size and thread count), runs on it, and releases it; how contexts are made,
// shared and reused is this module's business alone.
//
// Today every context has exactly one sequence (one generation), and up to MAX_IDLE_CONTEXTS idle ones are kept per
// model because creating a context allocates its KV cache. With one sequence there is nothing to batch a decode
// with, so each decode is dispatched as soon as the sequence asks (a microtask) rather than on node-llama-cpp's
// default next event-loop cycle, which waits behind whatever I/O callbacks (HTTP writes, journal syncs) are due;
// the figures are in docs/hardware.md.

import type { LlamaContext, LlamaContextSequence, LlamaModel } from 'node-llama-cpp' with { 'resolution-mode': 'import' };

export interface SequencePool {
  /** An empty sequence for one generation; give it back with `release`, whatever the generation's outcome. */
  acquire(): Promise<LlamaContextSequence>;
  /** Takes a sequence back (its state is discarded). Never throws. */
  release(sequence: LlamaContextSequence): Promise<void>;
  /** Frees every context, busy ones included; sequences released afterwards are freed too. */
  dispose(): Promise<void>;
}

/** Idle contexts kept per model for reuse. */
const MAX_IDLE_CONTEXTS = 2;

const DISPATCH_AT_ONCE = { dispatchSchedule: (dispatch: () => void) => queueMicrotask(dispatch) };

/** A context with one sequence whose decodes are dispatched at once (above): tasks', calibration's and the probe's. */
export function oneSequenceContext(model: LlamaModel, contextSize: number | 'auto', threads: number): Promise<LlamaContext> {
  return model.createContext({ contextSize, threads, sequences: 1, batching: DISPATCH_AT_ONCE });
}

/**
 * A context the size tasks will use, made before the thread count is known (one thread, a placeholder) to prove
 * that it fits, e.g. in free VRAM; with 'auto', node-llama-cpp sizes it to what free memory allows, up to the trained
 * context, and its `contextSize` is then the size tasks use. The caller disposes it.
 */
export function probeContext(model: LlamaModel, contextSize: number | 'auto'): Promise<LlamaContext> {
  return oneSequenceContext(model, contextSize, 1);
}

/** One context per generation, idle ones reused. */
export class OneSequenceContextPool implements SequencePool {
  private readonly idle: LlamaContext[] = [];
  private readonly busy = new Set<LlamaContext>();
  private disposed = false;

  constructor(
    private readonly model: LlamaModel,
    private readonly contextSize: number,
    private readonly threads: number,
  ) {}

  async acquire(): Promise<LlamaContextSequence> {
    const context = this.idle.pop() ?? (await oneSequenceContext(this.model, this.contextSize, this.threads));
    this.busy.add(context);
    return context.getSequence();
  }

  async release(sequence: LlamaContextSequence): Promise<void> {
    const context = sequence.context;
    this.busy.delete(context);
    await sequence.dispose().catch(() => undefined);
    if (this.disposed || context.disposed || this.idle.length >= MAX_IDLE_CONTEXTS) {
      await context.dispose().catch(() => undefined);
    } else {
      this.idle.push(context);
    }
  }

  async dispose(): Promise<void> {
    this.disposed = true;
    const contexts = [...this.idle, ...this.busy];
    this.idle.length = 0;
    this.busy.clear();
    for (const c of contexts) await c.dispose().catch(() => undefined);
  }
}
