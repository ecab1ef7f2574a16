// The sampling-race guard (`sampleFirstAlone`): llama.cpp reorders a batch's outputs lazily on the first logits read,
// and node-llama-cpp samples all of a batch's sequences at once on worker threads; the first sampling after a decode
// runs alone, or two could reorder at once and a sequence sample from another's logits (it then continues another
// prompt's text). How often that happened without it: docs/hardware.md, "Batching: the measurements behind the code".
import type { LlamaContext } from 'node-llama-cpp' with { 'resolution-mode': 'import' };
import { nativeContextOf, type NativeContext } from './nativeSeams';

/**
 * Lets the first sampling after each decode run alone; the rest of the batch's samplings follow once it is done.
 *
 * llama.cpp computes a batch's outputs in micro-batch order (`split_equal` takes runs of ascending sequence ids,
 * and a sequence with fewer tokens finishes first) and puts them back in batch order lazily: the first read of any
 * logits after the decode (`output_reorder`) swaps whole rows and clears its list of swaps. node-llama-cpp samples
 * every sequence of a batch at once, each on a libuv worker thread that begins by reading the logits — so two of
 * them could run the swaps at the same time, and a sequence sampled from another's row: it continued another
 * prompt's text. Rare with the ~420-token demo vocabulary, where a row swap takes nanoseconds (2 of 2 400 staggered
 * generations on 4 sequences went wrong); with a 32 000-token vocabulary (a row of 128 KB), 8 sequences whose
 * outputs come out in reverse, 135 of 800 samplings read another row — 0 with this guard (contextPool.test.ts).
 * What it costs: the batch's other samplings start one worker round trip (~0.1 ms) later.
 */
export function sampleFirstAlone(context: LlamaContext): boolean {
  const native = nativeContextOf(context);
  if (!native) return false;
  const decode = native.decodeBatch;
  const sample = native.sampleToken;
  const guard = new FirstReadAlone();
  // The addon's methods are read-only on its prototype: own properties shadow them.
  const wrap = (name: keyof NativeContext, fn: (...args: unknown[]) => Promise<unknown>) =>
    Object.defineProperty(native, name, { value: fn, configurable: true, writable: true });
  wrap('decodeBatch', (...args) => {
    guard.decoded();
    return decode.apply(native, args);
  });
  wrap('sampleToken', (...args) => guard.sample(() => sample.apply(native, args)));
  return true;
}

/**
 * The rule of the guard, shared with the one-step path (oneStep.ts): after a decode whose outputs nothing has read,
 * the first sampling runs alone and the others start once it has settled; after a read, samplings run at once.
 */
export class FirstReadAlone {
  private unread = false;
  /** The first sampling since the latest unread decode (the others wait for it to settle). */
  private first: Promise<unknown> | undefined;

  /** A decode ended and nothing has read its outputs yet. */
  decoded(): void {
    this.unread = true;
    this.first = undefined;
  }

  /** The latest decode's outputs were read in order (a combined decode and sampling). */
  read(): void {
    this.unread = false;
    this.first = undefined;
  }

  sample<T>(run: () => Promise<T>): Promise<T> {
    if (!this.unread) return this.first ? this.first.then(run) : run();
    this.unread = false;
    const sampled = run();
    this.first = sampled.then(
      () => undefined,
      () => undefined,
    );
    return sampled;
  }
}
