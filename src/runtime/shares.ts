// Fair shares: what one principal (one bearer token) may hold of what every client shares, beside the global caps.
// Without them one client could fill the global queue, hold every shared stream slot, and grow the in-memory store
// (the process's memory; in the editor the extension host's) for everyone (the measurements: docs/runtime.md, "Fair
// shares"). The scheduler serves principals in turn (scheduler.ts); these caps bound what one of them can pile up.
// Defaults, and why:
// - 256 unfinished tasks per principal: under a quarter of the global queue (1 000), so one client, even three,
//   cannot fill it; above the 200 that an agent's batch or our benchmark queues at once.
// - 32 open event streams per principal (per door): an agent watches a handful of tasks at a time; 32 leaves the
//   door's 256 shared slots to at least seven other clients. A change stream (`/task_runtime/changes`) counts only
//   against its owner, never against the shared slots, and ends after 5 minutes without a change (clients reconnect
//   and re-read the list, as they do on every connect), so abandoned ones free their owner's slots too.
// - 64 MiB stored per principal: sixteen of the largest accepted bodies (4 MiB), some hundred times a long agent
//   conversation. Counted where it is stored (TaskStore.storedBytes): the task rows' prompt, output, snapshot and
//   other JSON, and every event row of the principal's tasks, which carry the output again (deltas with their
//   logprobs, the final response); their echoes of the request (instructions, tool schemas, text format) are stored
//   as references to it (taskStore.ts, "Echoes of the request"). So the cap bounds the store itself: the store's image
//   stays within about 1.5× the sum of the principals' caps (SQLite's pages and indexes; test/unit/runtime/
//   storedBytes.test.ts), and the host's memory holds that image (docs/runtime.md, "Fair shares"). A prompt alone
//   over the cap is refused 413, one that would take the principal over it 429. The cap is checked at create: a
//   task admitted below it may still write its whole output. Bytes come free as the principal's tasks are deleted
//   (DELETE, ttl, retention) or their event history expires; the image on disk shrinks at the next checkpoint
//   (store/checkpointer.ts, vacuum).
import { RuntimeError, type LimitInfo } from './errors';

export const DEFAULT_MAX_QUEUED_PER_PRINCIPAL = 256;
export const DEFAULT_MAX_STREAMS_PER_PRINCIPAL = 32;
export const DEFAULT_MAX_STORED_BYTES_PER_PRINCIPAL = 64 * 1024 * 1024;
export const DEFAULT_CHANGE_STREAM_IDLE_MS = 5 * 60_000;

/** The names refusals carry (`limit.name` on every door), and the setting / flag that raises each. */
export const LIMIT_NAMES = {
  queued: 'max_queued_tasks_per_principal',
  streams: 'max_streams_per_principal',
  storedBytes: 'max_stored_bytes_per_principal',
  embeddingCalls: 'max_embedding_calls_per_principal',
} as const;

/**
 * Embeddings calls of one principal in flight at once (direct calls, not tasks: runtime/embeddings.ts). A model embeds
 * one input at a time, so more calls only queue; 4 lets a client pipeline without taking the model from the others.
 */
export const DEFAULT_MAX_EMBEDDING_CALLS_PER_PRINCIPAL = 4;

export function limitExceeded(limit: LimitInfo, message: string): RuntimeError {
  return new RuntimeError('limit_exceeded', `${message} (limit ${limit.name} = ${limit.max}).`, undefined, limit);
}

/** A principal's unfinished tasks are at its cap. */
export function tooManyQueued(current: number, max: number): RuntimeError {
  return limitExceeded(
    { name: LIMIT_NAMES.queued, max, current, unit: 'tasks' },
    `Too many unfinished tasks for this client: ${current} of at most ${max}; wait for some to finish or cancel them`,
  );
}

/** A principal's open event streams are at its cap. */
export function tooManyStreams(current: number, max: number): RuntimeError {
  return limitExceeded(
    { name: LIMIT_NAMES.streams, max, current, unit: 'streams' },
    `Too many open event streams for this client: ${current} of at most ${max}; close one first`,
  );
}

/**
 * Re-counted from the store at least this often, and at most this often while a principal is over its cap. Every
 * write of a principal's tasks is added as it happens and every delete forgets the count, so a recount only corrects
 * values counted twice (a snapshot replaced); it scans the principal's event rows (TaskStore.storedBytes: 35–45 ms
 * at 65 000 events), hence rarely.
 */
const RECOUNT_MS = 60_000;
const RECOUNT_OVER_MS = 1000;

/**
 * Stored bytes per principal, counted from the store (TaskStore.storedBytes, too dear for every create: 8 ms for a
 * principal with 1 000 tasks / 13 000 events, 35–45 ms with 5 000 / 65 000, 2-core machine), so the count is kept between recounts: what was counted plus what the principal's tasks wrote since
 * (`added`, told by every transition's batch as it is written: creates, and the events and outputs of running
 * tasks). It is counted again after RECOUNT_MS (replaced values were counted twice), or when a
 * create would go over the cap (at most every RECOUNT_OVER_MS while a client keeps trying), and after the principal
 * deleted a task or retention removed any.
 */
export class StoredBytesMeter {
  private readonly counted = new Map<string, { bytes: number; at: number }>();

  constructor(
    private readonly count: (principal: string) => number,
    private readonly clock: () => number = () => performance.now(),
  ) {}

  /** Throws payload_too_large / limit_exceeded when `adding` more bytes would not fit the principal's `max`. */
  admit(principal: string, adding: number, max: number): void {
    if (adding > max) {
      const limit: LimitInfo = { name: LIMIT_NAMES.storedBytes, max, current: adding, unit: 'bytes' };
      throw new RuntimeError(
        'payload_too_large',
        `The request's prompt is ${adding} bytes as stored, more than a client may store in all (limit ${limit.name} = ${max}).`,
        'input',
        limit,
      );
    }
    const now = this.clock();
    let c = this.counted.get(principal);
    const over = c !== undefined && c.bytes + adding > max;
    if (!c || now - c.at >= RECOUNT_MS || (over && now - c.at >= RECOUNT_OVER_MS)) {
      c = { bytes: this.count(principal), at: now };
      this.counted.set(principal, c);
    }
    if (c.bytes + adding > max) {
      throw limitExceeded(
        { name: LIMIT_NAMES.storedBytes, max, current: c.bytes, unit: 'bytes' },
        `This client's stored tasks (prompts, outputs and their events) take ${c.bytes} bytes; ${adding} more would pass its cap. Delete finished tasks to make room`,
      );
    }
  }

  /** Something of the principal's was deleted: count again at its next create. */
  forget(principal: string): void {
    this.counted.delete(principal);
  }

  /** Retention removed tasks or event history of any principal: count each again at its next create. */
  forgetAll(): void {
    this.counted.clear();
  }

  /** A batch of the principal's (a create, a running task's events and output) was written. */
  added(principal: string, bytes: number): void {
    const c = this.counted.get(principal);
    if (c) c.bytes += bytes;
  }
}
