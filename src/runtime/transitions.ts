// The single place where a task changes: checks the transition table against the stored status, writes the
// change and its events in one durable batch, then tells listeners. Everything here is synchronous, so the
// first committed transition wins and a racing one sees the new status. A deferred transition (`defer`) is applied
// at once but synced in the background (group commit, store/database.ts); its listeners hear of it once it is
// durable, and `defer.onFailed` runs instead if it never becomes durable (rolled back; the store refuses writes).
import type { RuntimeError } from './errors';
import type { TaskEventBus } from './eventBus';
import type { NewEvent, TaskPatch, TaskStore } from './taskStore';
import { pendingRequests } from './input';
import { canTransition, isTerminal, type TaskEvent, type TaskRecord, type TaskStatus } from './task';
import type { WriteOp } from './store/database';

/** For a transition written with a background sync: what to do if it is rolled back instead. */
export interface DeferredTransition {
  onFailed(err: RuntimeError): void;
}

export class TaskTransitions {
  /**
   * Tasks with events in batches not yet durable: the first event sequence of each such batch, oldest first (batches
   * become durable, or fail, in the order they were written).
   */
  private readonly unsynced = new Map<string, number[]>();

  constructor(
    private readonly store: TaskStore,
    private readonly log: TaskEventBus,
    private readonly now: () => number,
  ) {}

  /**
   * Moves `id` to `to` if the table allows it from its current status (and, when given, only from one of `from`).
   * Returns the updated task, or undefined when the transition is not allowed (someone else won).
   */
  transition(
    id: string,
    to: TaskStatus,
    patch: Omit<TaskPatch, 'status'> | ((current: TaskRecord) => Omit<TaskPatch, 'status'>) = {},
    events: (task: TaskRecord) => NewEvent[] = () => [],
    from?: readonly TaskStatus[],
    defer?: DeferredTransition,
  ): TaskRecord | undefined {
    const current = this.store.getTask(id);
    if (!current) return undefined;
    if (from && !from.includes(current.status)) return undefined;
    if (!canTransition(current.status, to)) return undefined;
    const fields = typeof patch === 'function' ? patch(current) : patch;
    return this.commit([this.plan(current, { ...fields, status: to }, events)], true, defer);
  }

  /** Restart recovery only: moves a non-terminal task back to queued for another run. */
  requeue(current: TaskRecord, patch: Omit<TaskPatch, 'status'>, events: (task: TaskRecord) => NewEvent[]): TaskRecord {
    if (isTerminal(current.status)) throw new Error('terminal tasks are final');
    return this.apply(current, { ...patch, status: 'queued' }, events);
  }

  /** Appends events (and progress fields) without a status change. Ignored once the task is terminal. */
  append(
    id: string,
    patch: Omit<TaskPatch, 'status'>,
    events: NewEvent[] | ((task: TaskRecord) => NewEvent[]),
    notifyChange = true,
  ): TaskRecord | undefined {
    const current = this.store.getTask(id);
    if (!current || isTerminal(current.status)) return undefined;
    return this.apply(current, patch, typeof events === 'function' ? events : () => events, notifyChange);
  }

  /**
   * Several transitions in a row (e.g. queued → loading → running when the model is already loaded) in one durable
   * batch. Each step is checked against the status the previous one left; nothing is written unless all pass.
   */
  transitionSteps(
    id: string,
    steps: Array<{ to: TaskStatus; patch?: Omit<TaskPatch, 'status'>; events?: (task: TaskRecord) => NewEvent[] }>,
    from: readonly TaskStatus[],
    defer?: DeferredTransition,
  ): TaskRecord | undefined {
    let current = this.store.getTask(id);
    if (!current || !from.includes(current.status)) return undefined;
    const planned: Planned[] = [];
    for (const step of steps) {
      if (!canTransition(current.status, step.to)) return undefined;
      const p = this.plan(current, { ...step.patch, status: step.to }, step.events ?? (() => []));
      planned.push(p);
      current = p.next;
    }
    return this.commit(planned, true, defer);
  }

  private apply(
    current: TaskRecord,
    patch: TaskPatch,
    events: (task: TaskRecord) => NewEvent[],
    notifyChange = true,
  ): TaskRecord {
    return this.commit([this.plan(current, patch, events)], notifyChange);
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
    };
    // The pending requests are derived from the stored rounds, as getTask derives them (taskStore.toTask).
    next.inputRequests =
      next.status !== 'input_required' ? null : patch.inputRounds !== undefined ? pendingRequests(patch.inputRounds) : current.inputRequests;
    const newEvents = events(next);
    const ops: WriteOp[] = this.store.updateTaskOps(current.id, patch, now);
    if (newEvents.length) ops.push(...this.store.appendEventOps(current.id, current.nextSeq, newEvents, now));
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

  /**
   * Events of `id` from `from` on sit in a batch that is not yet durable (until `release`): replays stop before them
   * (they reach live listeners when the batch is durable). Used by deferred transitions and the deferred create.
   */
  holdEvents(id: string, from: number): void {
    const u = this.unsynced.get(id);
    if (u) u.push(from);
    else this.unsynced.set(id, [from]);
  }

  /** The oldest held batch of `id` is durable (or failed). */
  releaseEvents(id: string): void {
    const u = this.unsynced.get(id);
    u?.shift();
    if (u?.length === 0) this.unsynced.delete(id);
  }

  /** The first event sequence of `id` not yet durable, or undefined when every event of it is. */
  unsyncedFrom(id: string): number | undefined {
    return this.unsynced.get(id)?.[0];
  }

  /** One durable write for all planned steps, then listeners hear of each, in order. */
  private commit(planned: Planned[], notifyChange = true, defer?: DeferredTransition): TaskRecord {
    const tell = () => {
      for (const p of planned) {
        this.log.publish(p.stored);
        if (notifyChange) this.log.publishChange(p.next);
      }
    };
    const ops = planned.flatMap((p) => p.ops);
    if (defer) {
      const id = planned[0].next.id;
      this.holdEvents(id, planned[0].next.nextSeq - planned[0].stored.length);
      this.store.database.write(ops, {
        defer: {
          onDurable: () => {
            this.releaseEvents(id);
            tell();
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

interface Planned {
  next: TaskRecord;
  ops: WriteOp[];
  stored: TaskEvent[];
}
