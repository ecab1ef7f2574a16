// Task event streams: subscribe (replay then live) first, so a bad cursor is still answered as a problem, then
// open the SSE response; close after the terminal event.
import type { ServerResponse } from 'node:http';
import type { Subscription } from '../../runtime/api';
import { isTerminal, type TaskEvent } from '../../runtime/task';
import { SseWriter, type SseFrame } from '../http/sse';
import type { LmspDeps } from './deps';
import { TERMINAL_EVENT_TYPES } from './lmspConstants';
import { fromRuntimeError, lmspProblem, translate } from './problems';
import { tooManyStreams } from '../../runtime/shares';
import { sendEvent } from './wire';
import { REFUSALS, retryAfterHeader } from '../shared/refusals';

export interface TaskStreamOptions {
  taskId: string;
  principal: string;
  afterSeq: number | undefined;
  signal: AbortSignal;
  /** Which events to send (all when absent). */
  filter?: (event: TaskEvent) => boolean;
  /** How an event is written (default: as the LMSP/Responses event it is); /chat/completions writes chunks. */
  send?: (writer: SseWriter, event: TaskEvent) => void;
  /** Written after the terminal event, before closing (e.g. `[DONE]` on /responses). */
  trailer?: string;
  /** Answer 204 when the task is terminal and nothing is left to send (stops EventSource reconnects). */
  noContentWhenDone: boolean;
  /** What a heartbeat writes (SseWriterOptions.heartbeatFrame); default a comment. */
  heartbeatFrame?: SseFrame;
}

/**
 * Reserves a stream slot: a caller at its own cap answers 429 limit_exceeded naming the limit; the door's shared
 * slots all taken answers 503. `shared: false` (the change stream) counts against the caller only.
 */
export function acquireStreamSlot(deps: LmspDeps, principal: string, shared = true): () => void {
  const r = deps.sseGate.tryAcquire(principal, shared);
  if (typeof r === 'function') return r;
  if (r.refused === 'principal') throw fromRuntimeError(tooManyStreams(r.current, r.max));
  throw lmspProblem('unavailable', REFUSALS.streamsFull.text, { headers: retryAfterHeader(REFUSALS.streamsFull) });
}

export function openWriter(deps: LmspDeps, res: ServerResponse, signal: AbortSignal, release: () => void, heartbeatFrame?: SseFrame): SseWriter {
  const writer = new SseWriter(res, { heartbeatMs: deps.heartbeatMs, signal, heartbeatFrame });
  deps.streams.add(writer);
  writer.onClose(() => {
    deps.streams.delete(writer);
    release();
  });
  return writer;
}

export async function streamTaskEvents(deps: LmspDeps, res: ServerResponse, opts: TaskStreamOptions): Promise<void> {
  const release = acquireStreamSlot(deps, opts.principal);
  // Events wait here until the writer exists and the socket takes them: a replay of any size is written with
  // backpressure (the writer's congestion, not its hard cap on a reader that stopped reading), live events after it.
  const queue: TaskEvent[] = [];
  let writer: SseWriter | undefined;
  let ended = false;
  let pumping = false;

  const write = (w: SseWriter, event: TaskEvent) => {
    if (!opts.filter || opts.filter(event)) (opts.send ?? sendEvent)(w, event);
    if (TERMINAL_EVENT_TYPES.has(event.type)) {
      ended = true;
      if (opts.trailer !== undefined) w.send({ data: opts.trailer });
      w.close();
    }
  };
  const pump = async () => {
    if (pumping || !writer) return;
    pumping = true;
    try {
      while (queue.length && !ended && !writer.isClosed) {
        write(writer, queue.shift()!);
        if (writer.congested) await writer.drained();
      }
    } finally {
      pumping = false;
    }
  };
  const deliver = (event: TaskEvent) => {
    if (ended) return;
    queue.push(event);
    void pump();
  };

  let subscription: Subscription;
  try {
    subscription = translate(() => deps.runtime.subscribe(opts.taskId, opts.afterSeq, deliver, opts.principal));
  } catch (e) {
    release();
    throw e;
  }
  let done = false;
  if (queue.length === 0) {
    const task = deps.runtime.getTask(opts.taskId, opts.principal);
    done = !task || isTerminal(task.status);
    if (done && opts.noContentWhenDone) {
      subscription.close();
      release();
      res.statusCode = 204;
      res.end();
      return;
    }
  }
  writer = openWriter(deps, res, opts.signal, release, opts.heartbeatFrame);
  const closed = new Promise<void>((resolve) => writer!.onClose(resolve));
  writer.onClose(() => subscription.close());
  if (done) {
    // Resumed after the last event of a finished task (a Responses resume past the end): nothing more will come.
    ended = true;
    if (opts.trailer !== undefined) writer.send({ data: opts.trailer });
    writer.close();
  }
  void pump();
  await closed;
}
