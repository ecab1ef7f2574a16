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
import { problem } from './problems';
import type { TaskStore } from './taskStore';
import type { TaskTransitions } from './transitions';

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

export function recoverTasks(store: TaskStore, transitions: TaskTransitions, backend: ModelBackend): RecoveryOutcome {
  const out: RecoveryOutcome = { cancelled: 0, failed: 0, retried: 0, resumed: 0, requeued: 0, waitingForInput: 0, resumePoints: new Map() };
  for (const task of store.activeTasks()) {
    if (task.status === 'cancelling') {
      transitions.cancelled(task.id, transitions.delivered(task));
      out.cancelled++;
      continue;
    }
    if (task.onRestart === 'fail') {
      const detail =
        task.status === 'input_required'
          ? 'The server restarted while the task waited for input; its on_restart policy is "fail", so it was not run again.'
          : 'The server restarted before the task finished.';
      transitions.fail(task.id, problem('server_restarted', detail), transitions.delivered(task));
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
      const { text, messageId, logprobs, segments } = transitions.delivered(task);
      // Everything clients received is in the event log: the attempt continues in the same output item, from the
      // snapshot when it covers a prefix of that text, else from prompt + text evaluated again. Only a task that
      // never opened its output item (nothing delivered) starts a new attempt.
      if (messageId) {
        transitions.requeue(task, 'resuming after restart');
        out.resumePoints.set(task.id, {
          ...(snapshot ? { snapshot } : {}),
          text,
          outputTokens: task.outputTokens,
          messageId,
          ...(logprobs ? { logprobs } : {}),
          ...(segments ? { segments } : {}),
        });
        out.resumed++;
        continue;
      }
    }
    transitions.newAttempt(task, (attempt) => `restarted: attempt ${attempt}`);
    out.retried++;
  }
  return out;
}
