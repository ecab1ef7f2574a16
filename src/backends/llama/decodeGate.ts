// Gathering decodes into batches (`DecodeGate`). node-llama-cpp decodes whatever is queued when the previous decode
// and its sampling end, so sequences that start at different times settle into a round robin of one-token decodes
// and never meet: N streams cost N decodes per step. So each token decode of a generating sequence waits at the gate
// until every generating sequence of the context has its token there — without a bound while one of them is still
// being decoded and sampled (it is sure to come), else, for one that is late elsewhere (delivering, saving a
// snapshot, finishing), a bounded wait: GATHER_MICROTASK_HOPS microtask turns, then event-loop turns while more keep
// arriving, at most GATHER_MAX_TURNS; then all go into the queue together. A sequence counts as generating from the
// moment it is handed out, so prompts handed out together share their first decode too. The measurements: docs/
// hardware.md, "Batching: the measurements behind the code".
import type { LlamaContext } from 'node-llama-cpp' with { 'resolution-mode': 'import' };
import { wrapDecodeTokens } from './nativeSeams';

/**
 * Microtask turns a held decode waits for the other generating sequences before it waits event-loop turns instead: a
 * consumer's continuation from one token to its next evaluate() is a chain of promise turns, all within one drain
 * of the microtask queue.
 */
const GATHER_MICROTASK_HOPS = 64;
/** Event-loop turns a held decode waits at most, each only while more sequences arrived in the turn before. */
const GATHER_MAX_TURNS = 4;

/**
 * Holds the token decodes of a context's sequences until every generating sequence has one (header). A sequence is
 * generating from `expect` (handed out) or its first decode until `retire` (its release); it is in flight from its
 * decode's release here until that decode (and its sampling) resolves — a sequence in flight is sure to come back
 * soon, so the gate waits for it without a bound.
 */
export class DecodeGate {
  private readonly generating = new Set<number>();
  private readonly inFlight = new Set<number>();
  private held: Array<() => void> = [];
  private heldIds = new Set<number>();
  /** Bumped on every opening and every new bounded wait: an older wait stops. */
  private round = 0;

  /** Wraps node-llama-cpp's per-context decode entry (nativeSeams.ts); without it decodes go straight to the queue. */
  install(context: LlamaContext): boolean {
    return wrapDecodeTokens(context, (decode) => async (args, ...rest) => {
      const id = args.sequenceId;
      await new Promise<void>((resolve) => this.admit(id, resolve));
      this.inFlight.add(id);
      try {
        return await decode(args, ...rest);
      } finally {
        this.settled(id);
      }
    });
  }

  /**
   * The sequence was handed to a generation: its first decode (the prompt) is coming, so decodes already held wait
   * for it as for a generating sequence's next token — prompts that arrive together share one batch.
   */
  expect(sequenceId: number): void {
    this.generating.add(sequenceId);
  }

  /** The sequence stopped generating (released): nobody waits for it any longer. */
  retire(sequenceId: number): void {
    if (!this.generating.delete(sequenceId)) return;
    this.inFlight.delete(sequenceId);
    this.recheck();
  }

  /** Lets every held decode go (also when the context is disposed: they fail there instead of waiting forever). */
  open(): void {
    this.round++;
    const held = this.held;
    this.held = [];
    this.heldIds = new Set();
    for (const release of held) release();
  }

  private admit(sequenceId: number, release: () => void): void {
    this.generating.add(sequenceId);
    if (this.heldIds.has(sequenceId)) {
      // A second decode of a sequence already held (not a token step): never hold it behind itself.
      this.open();
      release();
      return;
    }
    this.held.push(release);
    this.heldIds.add(sequenceId);
    this.recheck();
  }

  private settled(sequenceId: number): void {
    this.inFlight.delete(sequenceId);
    this.recheck();
  }

  /** Opens when every generating sequence is held; else, with none in flight, waits a bounded while for the rest. */
  private recheck(): void {
    if (!this.held.length) return;
    if (this.heldIds.size >= this.generating.size) return this.open();
    if (this.inFlight.size > 0) return; // its settling rechecks
    const round = ++this.round;
    let hops = 0;
    let turns = 0;
    let lastHeld = -1;
    const check = (): void => {
      if (round !== this.round) return;
      if (this.heldIds.size >= this.generating.size) return this.open();
      if (++hops < GATHER_MICROTASK_HOPS) return queueMicrotask(check);
      if (this.held.length === lastHeld || ++turns > GATHER_MAX_TURNS) return this.open();
      lastHeld = this.held.length;
      hops = 0;
      setImmediate(check);
    };
    queueMicrotask(check);
  }
}
