// A new task's record, built in one place for the runtime's create and for tests that write tasks directly. Apart
// from task.ts, which the webview bundle imports too: ids come from node:crypto.
import { newResponseId, newTaskId } from './ids';
import { PRIORITY } from './queue';
import type { ResponseRequest, RestartPolicy, TaskOrigin, TaskRecord } from './task';

/** What a new task is made of, already checked and resolved by the runtime (`input.model` is a known model id). */
export interface NewTaskFields {
  origin: TaskOrigin;
  principal: string;
  title: string;
  input: ResponseRequest & { model: string };
  onRestart: RestartPolicy;
  ttlMs: number | null;
  deadlineAt: number | null;
  meta: Record<string, unknown>;
  /** Checked already (queue.ts checkPriority); default PRIORITY.default. */
  priority?: number;
  now: number;
}

/** A new task record, queued, before its first events (response.created, response.queued: sequence 0 and 1). */
export function newTaskRecord(f: NewTaskFields): TaskRecord {
  return {
    id: newTaskId(),
    responseId: newResponseId(),
    origin: f.origin,
    principal: f.principal,
    title: f.title.slice(0, 200),
    model: f.input.model,
    request: f.input,
    status: 'queued',
    statusMessage: 'queued',
    createdAt: f.now,
    updatedAt: f.now,
    onRestart: f.onRestart,
    attempt: 1,
    ttlMs: f.ttlMs,
    expiresAt: f.ttlMs === null ? null : f.now + f.ttlMs,
    deadlineAt: f.deadlineAt,
    response: null,
    error: null,
    usage: null,
    outputTokens: 0,
    meta: f.meta,
    priority: f.priority ?? PRIORITY.default,
    nextSeq: 2,
    oldestSeq: 0,
    inputRequests: null,
  };
}
