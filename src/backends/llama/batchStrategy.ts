// Order in the batch (`sequenceOrderStrategy`): node-llama-cpp 3.21.1 creates every context with one KV stream per
// sequence (`kv_unified` off), and llama.cpp then cuts a batch into micro-batches (`split_equal`, sequential) that
// take only sequences whose ids ascend by one from the first: a batch of tokens for sequences 5, 2, 7, 0… becomes a
// run of one-token micro-batches, each a matrix-vector pass over every weight. node-llama-cpp adds its queued decodes
// in arrival order, so batches were cut up that way: with perf, a third of the decode time in `ggml_vec_dot_f32`,
// against tinyBLAS's batched products for llama-server (whose slots are added in id order). Ordering the items by
// sequence id, 8 sequences, 1 thread, the batching bench's 86 MB model: a decode of 8 tokens 26 → 12.5 ms, the
// same as llama-server's. The pool hands out the lowest free ids for the same reason (a gap in the ids splits too).
//
// Threads per decode (`promptThreads`): node-llama-cpp 3.21.1's prebuilt CPU binaries have no OpenMP and it attaches
// no ggml threadpool to its contexts, so every decode with T > 1 threads makes a disposable pool of T − 1 threads and
// joins them (strace, 200 tokens of the batching bench's 86 MB model: 220 clone3 calls at 2 threads, 20 at 1). For a
// one-token step that costs more than the second thread saves — 1 stream, 2-core machine: 55–81 tokens/s at 2
// threads against 144–186 at 1, where llama-server (persistent pool) goes from 182–260 to 394–512 — which is why the
// calibrated count (threadCalibration.ts, measured on one-token steps) is often 1. A prompt's batch amortizes the
// pool: 2 008 prompt tokens, first token 2 130–2 158 ms at 1 thread, 1 138–1 141 ms at 2. So a decode of at least
// PROMPT_BATCH_TOKENS tokens runs on `promptThreads` (all math cores, or the setting's number) and the steps of
// generating sequences on `threads` (calibrated, up to that number).
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
