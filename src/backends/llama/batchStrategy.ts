// What goes into each decode of a batched context, and on how many threads.
//
// Order (`sequenceOrderStrategy`): llama.cpp cuts a batch into micro-batches that take only sequences whose ids
// ascend by one (node-llama-cpp 3.21.1 makes one KV stream per sequence), so a batch in arrival order becomes a run of
// one-token matrix-vector passes. Items are put in ascending sequence id, and the pool hands out the lowest free ids,
// so a batch of N steps is one batched product, as llama-server's is.
//
// Threads (`batchStrategy`): node-llama-cpp's prebuilt CPU binaries make and join a throwaway thread pool on every
// decode with more than one thread. A one-token step pays more for that than a second thread saves (so the calibrated
// step count is often 1), while a prompt's batch amortizes it: a decode of at least PROMPT_BATCH_TOKENS tokens runs on
// `promptThreads` (all math cores, or the setting's number), the steps of generating sequences on `threads`.
// The measurements behind both: docs/hardware.md, "Batching: the measurements behind the code".
import type { BatchItem, CustomBatchingPrioritizationStrategy, LlamaContext, PrioritizedBatchItem, Token } from 'node-llama-cpp' with {
  'resolution-mode': 'import',
};
import { queuedDecodesOf, setWantedThreads, type QueuedDecodes } from './nativeSeams';

/**
 * Tokens in one decode from which it runs on the prompt thread count: a prompt's batch, or many sequences' steps at
 * once. The pool's cost grows with the threads it makes and the gain with the batch's work: on 2 cores, 86 MB model,
 * 4–8 one-token steps per decode ran at 0.9–1.2× on 2 threads against 1, but a tiny model on 16 cores decodes one
 * token 7× faster on 1 thread than on 16 (docs/hardware.md), so the bound stays well above a handful of steps.
 */
export const PROMPT_BATCH_TOKENS = 32;

/**
 * Shares a batch as node-llama-cpp's default (`maximumParallelism`) does — every item an equal share, what is left to
 * the items clipped, higher evaluation priority first — and puts the items in ascending sequence id (header). An
 * item is found by its token array, which is the queued decode's own; `queue` is read at each call.
 */
export function sequenceOrderStrategy(queue: () => QueuedDecodes | undefined): CustomBatchingPrioritizationStrategy {
  return ({ items, size }) => {
    const ids = new Map<readonly Token[], number>();
    for (const q of queue() ?? []) ids.set(q.tokens, q.sequenceId);
    let left = size;
    const share = Math.max(1, Math.floor(size / Math.max(1, items.length)));
    const out: PrioritizedBatchItem[] = [];
    for (const item of items) {
      if (left <= 0) break;
      const processAmount = Math.min(item.tokens.length, left, share);
      out.push({ item, processAmount });
      left -= processAmount;
    }
    const clipped = out.filter((p) => p.processAmount < p.item.tokens.length);
    clipped.sort((a, b) => b.item.evaluationPriority - a.item.evaluationPriority);
    for (const p of clipped) {
      if (left <= 0) break;
      const more = Math.min(p.item.tokens.length - p.processAmount, left);
      p.processAmount += more;
      left -= more;
    }
    const idOf = (item: BatchItem) => ids.get(item.tokens) ?? Number.MAX_SAFE_INTEGER;
    return out.sort((a, b) => idOf(a.item) - idOf(b.item));
  };
}

/**
 * Sets the thread count of the decode node-llama-cpp is about to run (it passes the consumer's wanted count to
 * llama.cpp right before each decode). Does nothing if the internals are not there.
 */
function setDecodeThreads(context: LlamaContext | undefined, threads: number): void {
  setWantedThreads(context, threads);
}

/**
 * The batch strategy of a context whose decodes run on `threads`, and on `promptThreads` from PROMPT_BATCH_TOKENS
 * tokens up; `context` is read at each batch (it does not exist yet when the strategy is made).
 */
export function batchStrategy(context: () => LlamaContext | undefined, threads: number, promptThreads: number): CustomBatchingPrioritizationStrategy {
  const order = sequenceOrderStrategy(() => queuedDecodesOf(context()));
  if (promptThreads === threads) return order;
  return (params) => {
    const items = order(params);
    const tokens = items.reduce((n, p) => n + p.processAmount, 0);
    setDecodeThreads(context(), tokens >= PROMPT_BATCH_TOKENS ? promptThreads : threads);
    return items;
  };
}
