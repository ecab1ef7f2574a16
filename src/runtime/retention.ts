// Retention: tasks past their ttl, terminal tasks past the retention window, event history past its window,
// and old idempotency keys are removed in bounded batches.
import type { TaskEventBus } from './eventBus';
import type { TaskStore } from './taskStore';
import type { WriteOp } from './store/database';

export interface RetentionPolicy {
  taskRetentionMs: number;
  eventHistoryMs: number;
  idempotencyKeyTtlMs: number;
}

const BATCH = 500;

export interface SweepResult {
  expired: number;
  deleted: number;
  historyPurged: number;
}

/**
 * One sweep. `stopActive` is called for a non-terminal task whose ttl passed, before it is deleted.
 */
export function sweep(store: TaskStore, bus: TaskEventBus, policy: RetentionPolicy, now: number, stopActive: (id: string) => void): SweepResult {
  const result: SweepResult = { expired: 0, deleted: 0, historyPurged: 0 };
  const deleteIds = (ids: string[]) => {
    const removed = ids.map((id) => store.getTask(id)).filter((t) => t !== undefined);
    for (const t of removed) stopActive(t.id);
    const ops: WriteOp[] = removed.flatMap((t) => store.deleteTaskOps(t.id));
    if (ops.length) store.database.write(ops);
    for (const t of removed) bus.publishChange(t, true);
    return removed.length;
  };
  for (let ids = store.expiredTaskIds(now, BATCH); ids.length; ids = store.expiredTaskIds(now, BATCH)) {
    result.expired += deleteIds(ids);
    if (ids.length < BATCH) break;
  }
  const taskCutoff = now - policy.taskRetentionMs;
  for (let ids = store.terminalTasksUpdatedBefore(taskCutoff, BATCH); ids.length; ids = store.terminalTasksUpdatedBefore(taskCutoff, BATCH)) {
    result.deleted += deleteIds(ids);
    if (ids.length < BATCH) break;
  }
  const historyCutoff = now - policy.eventHistoryMs;
  for (let rows = store.tasksWithHistoryBefore(historyCutoff, BATCH); rows.length; rows = store.tasksWithHistoryBefore(historyCutoff, BATCH)) {
    store.database.write(rows.flatMap((r) => store.purgeEventsOps(r.id, r.nextSeq)));
    result.historyPurged += rows.length;
    if (rows.length < BATCH) break;
  }
  // Only write when there is something to purge: an empty batch would still cost a journal record and a sync.
  const keyCutoff = now - policy.idempotencyKeyTtlMs;
  if (store.hasIdempotencyKeysBefore(keyCutoff)) store.database.write(store.purgeIdempotencyOps(keyCutoff));
  return result;
}
