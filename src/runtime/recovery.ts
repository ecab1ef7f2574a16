// Restart recovery (LMSP ch.7 §7.5): every task that was not terminal when the previous process stopped is
// resolved by its on_restart policy before anything new runs.
//
// A task waiting for input (`input_required`) lost the run that asked, but not its questions: its input rounds are
// in the store. Under `fail` it fails with `server_restarted` like any other interrupted task (the policy forbids
// running its work again, and the work up to the question would have to run again). Under `retry` and `resume` it
// stays `input_required` with the same pending requests, and answers are still accepted; once the last one is in, the
// task runs again as a new attempt whose backend gets every answered round replayed (backend.ts requestInput), so it
// continues where the answers left it. (`resume` does the same as `retry` here: a snapshot cannot restore a backend
// that is waiting inside a call.)
import type { ModelBackend } from './backend';
import type { ResumePoint } from './generation';
import { failTask, finishCancelled } from './generation';
import { problem } from './problems';
import { responseObject, taskStatusSnapshot } from './responses';
import type { TaskStore } from './taskStore';
import type { TaskTransitions } from './transitions';
import type { TaskRecord } from './task';

export interface RecoveryOutcome {
  cancelled: number;
  failed: number;
  retried: number;
  resumed: number;
  requeued: number;
  /** Tasks left waiting for input (retry/resume), with their pending requests. */
  waitingForInput: number;
  /** Tasks to run from a snapshot, by id. */
  resumePoints: Map<string, ResumePoint>;
}

/** Text of the task's current attempt as clients received it. */
export function outputText(store: TaskStore, task: TaskRecord): { text: string; messageId?: string } {
  // Text of the current attempt: deltas after its last response.created.
  let text = '';
  let messageId: string | undefined;
  for (const ev of store.readEvents(task.id, task.oldestSeq - 1)) {
    if (ev.type === 'response.created') {
      text = '';
      messageId = undefined;
    } else if (ev.type === 'response.output_item.added') {
      messageId = (ev.data.item as { id?: string } | undefined)?.id;
    } else if (ev.type === 'response.output_text.delta') {
      text += String(ev.data.delta ?? '');
    }
  }
  return { text, messageId };
}

export function recoverTasks(store: TaskStore, transitions: TaskTransitions, backend: ModelBackend): RecoveryOutcome {
  const out: RecoveryOutcome = { cancelled: 0, failed: 0, retried: 0, resumed: 0, requeued: 0, waitingForInput: 0, resumePoints: new Map() };
  for (const task of store.activeTasks()) {
    if (task.status === 'cancelling') {
      const { text, messageId } = outputText(store, task);
      finishCancelled(transitions, task.id, text, messageId);
      out.cancelled++;
      continue;
    }
    if (task.onRestart === 'fail') {
      const { text, messageId } = outputText(store, task);
      const detail =
        task.status === 'input_required'
          ? 'The server restarted while the task waited for input; its on_restart policy is "fail", so it was not run again.'
          : 'The server restarted before the task finished.';
      failTask(transitions, task.id, problem('server_restarted', detail), text, messageId);
      out.failed++;
      continue;
    }
    if (task.status === 'input_required') {
      out.waitingForInput++; // its questions stay open; answering them runs it again (runtime.provideInput)
      continue;
    }
    if (task.status === 'queued') {
      out.requeued++; // never started: it simply waits its turn again
      continue;
    }
    if (task.onRestart === 'resume' && backend.supportsResume(task.model)) {
      const snapshot = store.snapshotOf(task.id);
      const { text, messageId } = outputText(store, task);
      // Everything clients received is in the event log: the attempt continues in the same output item, from the
      // snapshot when it covers a prefix of that text, else from prompt + text evaluated again. Only a task that
      // never opened its output item (nothing delivered) starts a new attempt.
      if (messageId) {
        transitions.requeue(task, { statusMessage: 'resuming after restart' }, (t) => [
          { type: 'task_runtime:task.status', data: taskStatusSnapshot(t) },
        ]);
        out.resumePoints.set(task.id, {
          ...(snapshot ? { snapshot } : {}),
          text,
          outputTokens: task.outputTokens,
          messageId,
        });
        out.resumed++;
        continue;
      }
    }
    const attempt = task.attempt + 1;
    transitions.requeue(
      task,
      { attempt, statusMessage: `restarted: attempt ${attempt}`, outputTokens: 0, snapshot: null, response: null },
      (t) => [
        { type: 'task_runtime:task.status', data: taskStatusSnapshot(t) },
        { type: 'response.created', data: { response: responseObject(t, { status: 'queued' }) } },
        { type: 'response.queued', data: { response: responseObject(t, { status: 'queued' }) } },
      ],
    );
    out.retried++;
  }
  return out;
}
