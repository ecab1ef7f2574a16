// The context size a local model runs with, as a user chooses it (`--context-size`, `taskRuntime.contextSize`):
// `auto` = the model's trained context as far as free memory allows (node-llama-cpp fits it at load), or a number of
// tokens (never more than the model was trained for). One task's prompt + output must fit it.
import { parseAutoOrInt } from './hardware';

export type ContextSizeChoice = 'auto' | number;

/** Smallest and largest context a user may ask for, in tokens. */
export const MIN_CONTEXT_SIZE = 256;
export const MAX_CONTEXT_SIZE = 1_048_576;

export function parseContextSize(v: unknown): ContextSizeChoice | undefined {
  return parseAutoOrInt(v, MIN_CONTEXT_SIZE, MAX_CONTEXT_SIZE);
}

/**
 * Generations of one local model at once (`--concurrency`, `taskRuntime.concurrency`): sequences of its one batched
 * context. `auto` = as many as free memory holds at the context size, capped per compute type (contextPool.ts).
 */
export type ConcurrencyChoice = 'auto' | number;

export const MAX_CONCURRENCY = 64;

export function parseConcurrency(v: unknown): ConcurrencyChoice | undefined {
  return parseAutoOrInt(v, 1, MAX_CONCURRENCY);
}
