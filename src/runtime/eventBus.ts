// Per-task event subscriptions and task-change listeners. Events reach listeners only after they are durable.
import type { Subscription } from './api';
import type { TaskEvent, TaskRecord } from './task';

export type EventListener = (event: TaskEvent) => void;
export type TaskChangeListener = (task: TaskRecord, deleted: boolean) => void;

export class TaskEventBus {
  private readonly byTask = new Map<string, Set<EventListener>>();
  private readonly changeListeners = new Set<TaskChangeListener>();

  /** Registers a live listener. Callers replay stored events first, synchronously, so nothing falls in between. */
  listen(taskId: string, listener: EventListener): Subscription {
    let set = this.byTask.get(taskId);
    if (!set) this.byTask.set(taskId, (set = new Set()));
    set.add(listener);
    return {
      close: () => {
        const s = this.byTask.get(taskId);
        if (!s) return;
        s.delete(listener);
        if (s.size === 0) this.byTask.delete(taskId);
      },
    };
  }

  onTaskChange(listener: TaskChangeListener): Subscription {
    this.changeListeners.add(listener);
    return { close: () => void this.changeListeners.delete(listener) };
  }

  hasListeners(taskId: string): boolean {
    return this.byTask.has(taskId);
  }

  publish(events: readonly TaskEvent[]): void {
    for (const ev of events) {
      const set = this.byTask.get(ev.taskId);
      if (!set) continue;
      for (const l of [...set]) {
        try {
          l(ev);
        } catch {
          // one broken subscriber must not stop the others or the writer
        }
      }
    }
  }

  publishChange(task: TaskRecord, deleted = false): void {
    for (const l of [...this.changeListeners]) {
      try {
        l(task, deleted);
      } catch {
        // as above
      }
    }
  }
}
