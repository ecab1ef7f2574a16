// The single place where a task changes, in the lifecycle's own words: each operation (startLoading, startRunning,
// progress, awaitInput, newAttempt, succeed, fail, cancelled, …) checks the transition table against the stored
// status, builds its patch and its events (responseEvents.ts) and writes both in one durable batch, then tells
// listeners. Everything here is synchronous, so the first committed transition wins and a racing one sees the new
// status (the operation returns undefined). A deferred operation (`defer`) is applied at once but synced in the
// background (group commit, store/database.ts); its listeners hear of it once it is durable, and `defer.onFailed`
// runs instead if it never becomes durable (rolled back; the store refuses writes).
import type { GenerateResult, GenerationSnapshot, OutputChannel, OutputSegment, TokenLogprob } from './backend';
import { itemsOf, OutputAssembler, type OutputStep } from './outputItems';
import type { RuntimeError } from './errors';
import type { TaskEventBus } from './eventBus';
import { pendingRequests, waitingMessage } from './input';
import {
  cancelledEvents,
  EVENT,
  failedEvents,
  finishedEvents,
  modelLoadingEvent,
  outputOpenedEvents,
  queueEvent,
  outputStepEvents,
  queuedEvents,
  statusEvent,
} from './responseEvents';
import { readLogprobs, responseObject } from './responses';
import { TaskStore, type NewEvent, type TaskPatch } from './taskStore';
import type { QueueInfo } from './queue';
import {
  canTransition,
  isCancellable,
  isTerminal,
  type InputRound,
  type Problem,
  type TaskEvent,
  type TaskRecord,
  type TaskStatus,
  type Usage,
} from './task';
import type { WriteOp } from './store/database';

/** For an operation written with a background sync: what to do if it is rolled back instead. */
export interface DeferredTransition {
  onFailed(err: RuntimeError): void;
}

/**
 * What the current attempt delivered to clients: the text of its output item, that item's id (absent when the
 * attempt never opened one) and its output tokens (absent: leave the stored count as it is).
 */
export interface Delivered {
  text: string;
  messageId?: string;
  tokens?: number;
  /** Log-probabilities of the delivered tokens, when the request asked for them. */
  logprobs?: TokenLogprob[];
  /**
   * Everything delivered by channel, in order, when some of it was not answer text (reasoning, function calls):
   * the items after the message follow from it (outputItems.ts itemsOf). Absent: `text` is all there was.
   */
  segments?: OutputSegment[];
  /** Output tokens of reasoning, when counted (usage.output_tokens_details.reasoning_tokens). */
  reasoningTokens?: number;
}

export const NOTHING_DELIVERED: Delivered = { text: '' };

/** One status change: where to, the fields it sets (from the current record), the events it writes (from the next). */
interface Step {
  to: TaskStatus;
  patch?: Omit<TaskPatch, 'status'> | ((current: TaskRecord) => Omit<TaskPatch, 'status'>);
  events?: (next: TaskRecord) => NewEvent[];
}

export class TaskTransitions {
  /**
   * Tasks with events in batches not yet durable: the first event sequence of each such batch, oldest first (batches
   * become durable, or fail, in the order they were written).
   */
  private readonly unsynced = new Map<string, number[]>();

  /**
   * `stored`: told the bytes each batch stores for a principal (TaskStore.bytesOf), as it is written: the runtime's
   * stored-bytes meter (shares.ts), so that what a running task writes counts between the meter's recounts.
   * `finished`: more writes for the batch of a step that ends a task (`next`: the task as that step leaves it): the
   * completion-webhook outbox row (webhooks.ts), durable together with the ending or not at all.
   */
  constructor(
    private readonly store: TaskStore,
    private readonly bus: TaskEventBus,
    private readonly now: () => number,
    private readonly stored?: (principal: string, bytes: number) => void,
    private readonly finished?: (next: TaskRecord, now: number) => WriteOp[],
  ) {}

  // ---------------- a new task ----------------

  /**
   * A new task (newTaskRecord), queued: its row, its first events and `extraOps` (its idempotency key) in one batch.
   * With `defer` the batch is synced in the background: nothing about the task is told (or replayed) before it is
   * durable, then `onDurable` runs; if it is rolled back, `onFailed` runs instead.
   */
  create(task: TaskRecord, queueOrder: number, o: { extraOps?: WriteOp[]; defer?: DeferredTransition & { onDurable(): void } } = {}): void {
    const events = queuedEvents(task);
    const ops = this.store.createTaskOps(task, queueOrder, events, task.createdAt);
    if (o.extraOps?.length) ops.push(...o.extraOps);
    const stored = events.map((e, i) => ({ taskId: task.id, seq: i, type: e.type, data: e.data, createdAt: task.createdAt }));
    this.commit([{ next: task, ops, stored }], o.defer);
  }

  // ---------------- one run: queued → loading → running ----------------

  /** queued → loading, before the backend loads the task's model. */
  startLoading(id: string): TaskRecord | undefined {
    return this.move(id, { to: 'loading', patch: { statusMessage: 'loading model' }, events: (t) => [statusEvent(t)] }, ['queued']);
  }

  /** Load progress (0..1) of a loading task, as a status message and a model-loading event. */
  loadProgress(id: string, model: string, progress: number): void {
    this.record(id, { statusMessage: `loading model ${Math.round(progress * 100)}%` }, () => [modelLoadingEvent(model, progress)]);
  }

  /**
   * loading → running (or queued → loading → running in one batch when the model is already loaded: that batch is
   * what a client waits for before the first text). A fresh attempt opens its output item `messageId`; a resumed one
   * (`resumedTokens`: what it delivered before) continues in the item it already has.
   */
  startRunning(
    id: string,
    o: { messageId: string; resumedTokens?: number; fromQueued?: boolean; defer?: DeferredTransition },
  ): TaskRecord | undefined {
    const resumed = o.resumedTokens !== undefined;
    const running: Step = {
      to: 'running',
      patch: { statusMessage: resumed ? `resuming after ${o.resumedTokens} tokens` : 'generating' },
      events: (t) => (resumed ? [statusEvent(t)] : outputOpenedEvents(t, o.messageId)),
    };
    if (!o.fromQueued) return this.move(id, running, ['loading'], o.defer);
    const loading: Step = { to: 'loading', patch: { statusMessage: 'loading model' }, events: (t) => [statusEvent(t)] };
    return this.moveSteps(id, [loading, running], ['queued'], o.defer);
  }

  /**
   * Progress of a running attempt: the output tokens so far, the output that arrived since the last call (its steps:
   * answer text deltas, items opened, growing and closed — outputItems.ts), and the resume snapshot that covers it.
   * `waiting`: the task waits for input, and its status message keeps saying so. With `defer` the batch shares a
   * background sync with whatever else is written meanwhile (group commit) and its events reach listeners once it is
   * durable: a running generation's deltas never make the loop wait for the disk (docs/store.md).
   */
  progress(
    id: string,
    o: { messageId: string; tokens: number; output?: readonly OutputStep[]; snapshot?: GenerationSnapshot; waiting?: boolean },
    defer?: DeferredTransition,
  ): TaskRecord | undefined {
    return this.record(
      id,
      {
        outputTokens: o.tokens,
        ...(o.waiting ? {} : { statusMessage: `generating: ${o.tokens} tokens` }),
        ...(o.snapshot ? { snapshot: o.snapshot } : {}),
      },
      () => (o.output?.length ? outputStepEvents(o.messageId, o.output) : []),
      defer,
    );
  }

  // ---------------- input ----------------

  /** running → input_required with a new input round (appended to the stored ones). */
  awaitInput(id: string, rounds: InputRound[], round: InputRound): TaskRecord | undefined {
    return this.move(
      id,
      { to: 'input_required', patch: { inputRounds: [...rounds, round], statusMessage: waitingMessage(round) }, events: (t) => [statusEvent(t)] },
      ['running'],
    );
  }

  /** Some answers of the open round are in, not all: the task keeps waiting, for the rest. */
  recordAnswers(id: string, inputRounds: InputRound[]): TaskRecord | undefined {
    const open = inputRounds[inputRounds.length - 1];
    return this.record(id, { inputRounds, statusMessage: open ? waitingMessage(open) : null }, (t) => [statusEvent(t)]);
  }

  /** Every answer of the open round is in and the run that asked still waits: input_required → running. */
  inputReceived(id: string, inputRounds: InputRound[]): TaskRecord | undefined {
    return this.move(
      id,
      {
        to: 'running',
        patch: (cur) => ({ inputRounds, statusMessage: `generating: ${cur.outputTokens} tokens` }),
        events: (t) => [statusEvent(t)],
      },
      ['input_required'],
    );
  }

  // ---------------- back to the queue ----------------
  // The table holds the moves within one run; a task goes back to the queue from any unfinished status, for another
  // run: restart recovery, a backend that was unavailable, the answers to a task whose run is gone.

  /**
   * Back to the queue as the same attempt (`statusMessage` says why): it never started, or it resumes its output
   * item where it was cut off.
   */
  requeue(task: TaskRecord, statusMessage: string): TaskRecord {
    return this.toQueue(task, { statusMessage }, (t) => [statusEvent(t)]);
  }

  /**
   * Back to the queue as a new attempt: clients drop what the last one delivered (a fresh `response.created`
   * follows), its output tokens, snapshot and response are cleared. `why` words the status message for the attempt
   * number; `inputRounds` is written with it when the new attempt replays answered input.
   */
  newAttempt(task: TaskRecord, why: (attempt: number) => string, o: { inputRounds?: InputRound[] } = {}): TaskRecord {
    const attempt = task.attempt + 1;
    return this.toQueue(
      task,
      {
        attempt,
        statusMessage: why(attempt),
        outputTokens: 0,
        snapshot: null,
        response: null,
        ...(o.inputRounds ? { inputRounds: o.inputRounds } : {}),
      },
      (t) => [statusEvent(t), ...queuedEvents(t)],
    );
  }

  private toQueue(task: TaskRecord, patch: Omit<TaskPatch, 'status'>, events: (t: TaskRecord) => NewEvent[]): TaskRecord {
    if (isTerminal(task.status)) throw new Error('terminal tasks are final');
    return this.commit([this.plan(task, { ...patch, status: 'queued' }, events)]);
  }

  // ---------------- endings ----------------

  /** running (or input_required) → succeeded: the response completed, or incomplete at the token limit. */
  succeed(id: string, result: GenerateResult, delivered: Delivered & { messageId: string }): TaskRecord | undefined {
    const { text, messageId } = delivered;
    const items = itemsOf(messageId, delivered.segments);
    const tokens = delivered.tokens ?? result.outputTokens;
    const incomplete = result.finishReason === 'max_output_tokens';
    const usage: Usage = {
      input_tokens: result.inputTokens,
      output_tokens: result.outputTokens,
      total_tokens: result.inputTokens + result.outputTokens,
    };
    if (result.cachedInputTokens) usage.input_tokens_details = { cached_tokens: result.cachedInputTokens };
    if (result.speculative && result.speculative.drafted > 0) usage.task_runtime = { speculative: { ...result.speculative } };
    if (delivered.reasoningTokens) usage.output_tokens_details = { reasoning_tokens: delivered.reasoningTokens };
    const completedAt = this.now();
    return this.move(id, {
      to: 'succeeded',
      patch: (cur) => ({
        statusMessage: incomplete ? `finished at the token limit (${tokens} tokens)` : `completed: ${tokens} tokens`,
        outputTokens: result.outputTokens,
        usage,
        snapshot: null,
        response: responseObject(cur, {
          status: incomplete ? 'incomplete' : 'completed',
          text,
          logprobs: delivered.logprobs,
          messageId,
          itemStatus: incomplete ? 'incomplete' : 'completed',
          items: items.map((i) => (incomplete ? i : { ...i, done: true })),
          usage,
          incompleteReason: incomplete ? 'max_output_tokens' : null,
          completedAt,
          // Only for an output a stop string ended (a backend sets it with finishReason `stop` alone).
          ...(!incomplete && result.stopSequence !== undefined ? { stopSequence: result.stopSequence } : {}),
        }),
      }),
      events: (t) => finishedEvents(t, messageId, text, incomplete, delivered.logprobs, items),
    });
  }

  /** → failed with `err`, keeping what the attempt delivered in the partial response. */
  fail(id: string, err: Problem, delivered: Delivered = NOTHING_DELIVERED): TaskRecord | undefined {
    return this.move(id, {
      to: 'failed',
      patch: (cur) => ({
        statusMessage: `failed: ${err.detail}`,
        error: err,
        snapshot: null,
        ...(delivered.tokens !== undefined ? { outputTokens: delivered.tokens } : {}),
        response: responseObject(cur, {
          status: 'failed',
          text: delivered.text,
          messageId: delivered.messageId,
          itemStatus: 'incomplete',
          items: delivered.messageId ? itemsOf(delivered.messageId, delivered.segments) : [],
          error: { code: err.code, message: err.detail },
        }),
      }),
      events: (t) => failedEvents(t, err),
    });
  }

  /** A cancel of a started task: → cancelling while its run stops (`cancelled` ends it). */
  requestCancel(id: string, reason?: string): TaskRecord | undefined {
    return this.move(id, {
      to: 'cancelling',
      patch: { statusMessage: cancellingMessage(reason) },
      events: (t) => [statusEvent(t)],
    });
  }

  // ---------------- the queue ----------------

  /**
   * Queued tasks' places moved: an event on each one's stream (no field of a task changes), one batch per principal.
   * Tasks no longer queued are skipped.
   */
  queueMoved(moves: ReadonlyArray<{ id: string; info: QueueInfo }>): void {
    const byPrincipal = new Map<string, Planned[]>();
    for (const { id, info } of moves) {
      const current = this.store.getTask(id);
      if (!current || current.status !== 'queued') continue;
      let planned = byPrincipal.get(current.principal);
      if (!planned) byPrincipal.set(current.principal, (planned = []));
      planned.push(this.plan(current, {}, () => [queueEvent(info)]));
    }
    for (const planned of byPrincipal.values()) this.commit(planned);
  }

  /** A queued task to the front of its principal's line ("run next"): its priority and queue order, with a status event. */
  prioritize(id: string, priority: number, queueOrder: number): TaskRecord | undefined {
    const current = this.store.getTask(id);
    if (!current || current.status !== 'queued') return undefined;
    return this.commit([this.plan(current, { priority, queueOrder, statusMessage: 'queued: runs next' }, (t) => [statusEvent(t)])]);
  }

  /**
   * Many of one principal's tasks cancelled in one durable batch: queued ones → cancelled, running ones →
   * cancelling (their runs are stopped by the caller). Tasks in any other status are left out. Returns the tasks as
   * they are after the batch.
   */
  cancelMany(ids: readonly string[], reason?: string): TaskRecord[] {
    const planned: Planned[] = [];
    for (const id of ids) {
      const current = this.store.getTask(id);
      if (!current || !isCancellable(current.status)) continue;
      if (current.status === 'queued') {
        planned.push(this.plan(current, { status: 'cancelled', ...cancelledPatch(current, NOTHING_DELIVERED) }, (t) => cancelledEvents(t)));
      } else {
        planned.push(this.plan(current, { status: 'cancelling', statusMessage: cancellingMessage(reason) }, (t) => [statusEvent(t)]));
      }
    }
    if (planned.length === 0) return [];
    this.commit(planned);
    return planned.map((p) => p.next);
  }

  /** → cancelled (from queued, or cancelling), keeping what the attempt delivered in the partial response. */
  cancelled(id: string, delivered: Delivered = NOTHING_DELIVERED): TaskRecord | undefined {
    return this.move(id, {
      to: 'cancelled',
      patch: (cur) => cancelledPatch(cur, delivered),
      events: (t) => cancelledEvents(t),
    });
  }

  /** What the task's current attempt delivered, read back from its events (after a restart, or a run that is gone). */
  delivered(task: TaskRecord): Delivered {
    // The current attempt: the output after its last response.created, as the pieces it was written from, put back
    // together by the same assembler that wrote them (outputItems.ts).
    let messageId: string | undefined;
    let logprobs: TokenLogprob[] | undefined;
    let pieces: OutputSegment[] = [];
    /** Channels of the items after the message, by item id. */
    let channels = new Map<string, OutputChannel>();
    for (const ev of this.store.readEvents(task.id, task.oldestSeq - 1)) {
      if (ev.type === EVENT.created) {
        messageId = undefined;
        logprobs = undefined;
        pieces = [];
        channels = new Map();
      } else if (ev.type === EVENT.outputItemAdded) {
        const item = ev.data.item as { id?: string; type?: string; call_id?: unknown; name?: unknown } | undefined;
        if (item?.type === 'message' || ev.data.output_index === 0) messageId = item?.id;
        else if (item?.id && (item.type === 'reasoning' || item.type === 'function_call')) {
          const channel: OutputChannel =
            item.type === 'reasoning'
              ? { kind: 'reasoning' }
              : { kind: 'function_call', callId: String(item.call_id ?? ''), name: String(item.name ?? '') };
          channels.set(item.id, channel);
          pieces.push({ text: '', channel });
        }
      } else if (ev.type === EVENT.outputTextDelta) {
        pieces.push({ text: String(ev.data.delta ?? '') });
        const lp = readLogprobs(ev.data.logprobs);
        if (lp.length) (logprobs ??= []).push(...lp);
      } else if (ev.type === EVENT.functionCallArgumentsDelta || ev.type === EVENT.reasoningTextDelta) {
        const channel = channels.get(String(ev.data.item_id ?? ''));
        if (channel) pieces.push({ text: String(ev.data.delta ?? ''), channel });
      }
    }
    const output = new OutputAssembler(messageId ?? '', pieces);
    const out: Delivered = { text: output.text, messageId };
    if (logprobs) out.logprobs = logprobs;
    const segments = output.segments;
    if (segments) out.segments = segments;
    return out;
  }

  // ---------------- notes ----------------

  /**
   * Events that change nothing about the task (a webhook delivery's log), on its stream whatever its status, written
   * with `extraOps` in one batch; its status, update time and listeners of changes are left alone. A task that is gone
   * (deleted, expired) gets no events; `extraOps` are written all the same. The batch is synced in the background
   * (group commit: a burst of deliveries shares syncs); its events reach listeners once it is durable. Nothing waits
   * on it: if it is rolled back instead, what it recorded is simply not recorded (a delivery is then tried again).
   */
  note(id: string, events: NewEvent[], extraOps: WriteOp[]): void {
    const current = this.store.getTask(id);
    if (!current) {
      if (extraOps.length) this.store.database.write(extraOps, { defer: { onDurable: () => undefined, onFailed: () => undefined } });
      return;
    }
    const now = Math.max(this.now(), current.updatedAt);
    const ops = [...this.store.appendEventOps(id, current.request, current.nextSeq, events, now), ...extraOps];
    const stored: TaskEvent[] = events.map((e, i) => ({ taskId: id, seq: current.nextSeq + i, type: e.type, data: e.data, createdAt: now }));
    this.stored?.(current.principal, TaskStore.bytesOf(ops));
    this.holdEvents(id, current.nextSeq);
    this.store.database.write(ops, {
      defer: {
        onDurable: () => {
          this.releaseEvents(id);
          this.bus.publish(stored);
        },
        onFailed: () => this.releaseEvents(id),
      },
    });
  }

  // ---------------- events not yet durable ----------------

  /**
   * Events of `id` from `from` on sit in a batch that is not yet durable (until `release`): replays stop before them
   * (they reach live listeners when the batch is durable). Used by deferred operations and the deferred create.
   */
  private holdEvents(id: string, from: number): void {
    const u = this.unsynced.get(id);
    if (u) u.push(from);
    else this.unsynced.set(id, [from]);
  }

  /** The oldest held batch of `id` is durable (or failed). */
  private releaseEvents(id: string): void {
    const u = this.unsynced.get(id);
    u?.shift();
    if (u?.length === 0) this.unsynced.delete(id);
  }

  /** The first event sequence of `id` not yet durable, or undefined when every event of it is. */
  unsyncedFrom(id: string): number | undefined {
    return this.unsynced.get(id)?.[0];
  }

  // ---------------- the primitives ----------------

  /**
   * `step` if the table allows it from the task's current status (and, when given, only from one of `from`).
   * Returns the updated task, or undefined when it is not allowed (someone else won).
   */
  private move(id: string, step: Step, from?: readonly TaskStatus[], defer?: DeferredTransition): TaskRecord | undefined {
    return this.moveSteps(id, [step], from, defer);
  }

  /**
   * Several steps in a row in one durable batch (optionally only from one of `from`). Each is checked against the
   * status the previous one left; nothing is written unless all pass.
   */
  private moveSteps(id: string, steps: Step[], from?: readonly TaskStatus[], defer?: DeferredTransition): TaskRecord | undefined {
    let current = this.store.getTask(id);
    if (!current || (from && !from.includes(current.status))) return undefined;
    const planned: Planned[] = [];
    for (const step of steps) {
      if (!canTransition(current.status, step.to)) return undefined;
      const fields = typeof step.patch === 'function' ? step.patch(current) : (step.patch ?? {});
      const p = this.plan(current, { ...fields, status: step.to }, step.events ?? (() => []));
      planned.push(p);
      current = p.next;
    }
    return this.commit(planned, defer);
  }

  /** Fields and events without a status change. Ignored once the task is terminal. */
  private record(
    id: string,
    patch: Omit<TaskPatch, 'status'>,
    events: (task: TaskRecord) => NewEvent[],
    defer?: DeferredTransition,
  ): TaskRecord | undefined {
    const current = this.store.getTask(id);
    if (!current || isTerminal(current.status)) return undefined;
    return this.commit([this.plan(current, patch, events)], defer);
  }

  private plan(current: TaskRecord, patch: TaskPatch, events: (task: TaskRecord) => NewEvent[]): Planned {
    const now = Math.max(this.now(), current.updatedAt);
    const next: TaskRecord = {
      ...current,
      updatedAt: now,
      ...(patch.status !== undefined ? { status: patch.status } : {}),
      ...(patch.statusMessage !== undefined ? { statusMessage: patch.statusMessage } : {}),
      ...(patch.attempt !== undefined ? { attempt: patch.attempt } : {}),
      ...(patch.response !== undefined ? { response: patch.response } : {}),
      ...(patch.error !== undefined ? { error: patch.error } : {}),
      ...(patch.usage !== undefined ? { usage: patch.usage } : {}),
      ...(patch.outputTokens !== undefined ? { outputTokens: patch.outputTokens } : {}),
      ...(patch.priority !== undefined ? { priority: patch.priority } : {}),
    };
    // The pending requests are derived from the stored rounds, as getTask derives them (taskStore.toTask).
    next.inputRequests =
      next.status !== 'input_required' ? null : patch.inputRounds !== undefined ? pendingRequests(patch.inputRounds) : current.inputRequests;
    const newEvents = events(next);
    const ops: WriteOp[] = this.store.updateTaskOps(current.id, patch, now);
    if (newEvents.length) ops.push(...this.store.appendEventOps(current.id, current.request, current.nextSeq, newEvents, now));
    if (this.finished && patch.status !== undefined && isTerminal(patch.status)) ops.push(...this.finished(next, now));
    next.nextSeq = current.nextSeq + newEvents.length;
    const stored: TaskEvent[] = newEvents.map((e, i) => ({
      taskId: current.id,
      seq: current.nextSeq + i,
      type: e.type,
      data: e.data,
      createdAt: now,
    }));
    return { next, ops, stored };
  }

  /** One durable write for all planned steps, then listeners hear of each, in order (with `defer`: once durable). */
  private commit(planned: Planned[], defer?: DeferredTransition & { onDurable?(): void }): TaskRecord {
    const tell = () => {
      for (const p of planned) {
        this.bus.publish(p.stored);
        this.bus.publishChange(p.next);
      }
    };
    const ops = planned.flatMap((p) => p.ops);
    // Counted as written (a deferred batch that is rolled back stays counted until the meter's next recount).
    this.stored?.(planned[0].next.principal, TaskStore.bytesOf(ops));
    if (defer) {
      const id = planned[0].next.id;
      this.holdEvents(id, planned[0].next.nextSeq - planned[0].stored.length);
      this.store.database.write(ops, {
        defer: {
          onDurable: () => {
            this.releaseEvents(id);
            tell();
            defer.onDurable?.();
          },
          onFailed: (e) => {
            this.releaseEvents(id);
            defer.onFailed(e);
          },
        },
      });
    } else {
      this.store.database.write(ops);
      tell();
    }
    return planned[planned.length - 1].next;
  }
}

/** The status message of a task being stopped, with the canceller's reason when it gave one. */
function cancellingMessage(reason: string | undefined): string {
  return reason ? `cancelling: ${reason.slice(0, 200)}` : 'cancelling';
}

/** The fields of a task that ends cancelled, keeping what its attempt delivered in the partial response. */
function cancelledPatch(cur: TaskRecord, delivered: Delivered): Omit<TaskPatch, 'status'> {
  return {
    statusMessage: 'cancelled',
    snapshot: null,
    ...(delivered.tokens !== undefined ? { outputTokens: delivered.tokens } : {}),
    response: responseObject(cur, {
      status: 'cancelled',
      text: delivered.text,
      messageId: delivered.messageId,
      itemStatus: 'incomplete',
      items: delivered.messageId ? itemsOf(delivered.messageId, delivered.segments) : [],
    }),
  };
}

interface Planned {
  next: TaskRecord;
  ops: WriteOp[];
  stored: TaskEvent[];
}
