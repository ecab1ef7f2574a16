// The webview's pure state machine: applies a snapshot and incremental events, dropping duplicates and
// reporting a gap (the webview then asks the host to resync). No DOM, so it is unit-tested on Node.
import type { PanelState, ProblemView, SnapshotMessage, TaskView, TimelineEntry, UsageView, WireEvent } from './protocol';

export const TIMELINE_LIMIT = 200;
const TEXT_LIMIT = 2_000_000;

export function initialState(taskId: string): PanelState {
  return { taskId, lastSeq: -1, text: '', timeline: [], problem: null, usage: null };
}

export interface ApplyResult {
  state: PanelState;
  /** Events newer than the state but not contiguous: the caller must resync. */
  gap: boolean;
  /** How many events were applied (the rest were duplicates or after a gap). */
  applied: number;
}

export function applySnapshot(taskId: string, snapshot: SnapshotMessage): PanelState {
  let state: PanelState = { ...initialState(taskId), task: snapshot.task };
  if (snapshot.truncated) {
    state.text = snapshot.text ?? '';
    state.timeline = [{ seq: -1, kind: 'history_expired' }];
    state.lastSeq = (snapshot.events.length ? snapshot.events[0]!.seq : snapshot.lastSeq + 1) - 1;
  }
  const r = applyEvents(state, snapshot.events);
  state = r.state;
  if (snapshot.truncated && !snapshot.events.length) {
    state.usage = snapshot.task.usage;
    state.problem = snapshot.task.error;
  }
  if (snapshot.task.error && !state.problem) state.problem = snapshot.task.error;
  if (snapshot.task.usage && !state.usage) state.usage = snapshot.task.usage;
  return state;
}

export function applyEvents(previous: PanelState, events: readonly WireEvent[]): ApplyResult {
  const state: PanelState = { ...previous, timeline: previous.timeline.slice() };
  let applied = 0;
  for (const e of events) {
    if (e.seq <= state.lastSeq) continue; // duplicate
    if (e.seq !== state.lastSeq + 1) return { state, gap: true, applied };
    applyOne(state, e);
    state.lastSeq = e.seq;
    applied++;
  }
  if (state.timeline.length > TIMELINE_LIMIT) state.timeline = state.timeline.slice(-TIMELINE_LIMIT);
  return { state, gap: false, applied };
}

/**
 * Adds a timeline entry. One phase is one entry: an entry of the same kind as the last one (the status event and
 * the progress events of one model load, say) updates that entry's detail instead of adding a second line.
 */
function push(state: PanelState, entry: TimelineEntry): void {
  const last = state.timeline[state.timeline.length - 1];
  if (last && last.kind === entry.kind) {
    if (entry.detail !== undefined && entry.detail !== last.detail) {
      state.timeline[state.timeline.length - 1] = { ...last, detail: entry.detail };
    }
    return;
  }
  state.timeline.push(entry);
}

function responseOf(data: Record<string, unknown>): Record<string, unknown> | undefined {
  const r = data['response'];
  return r && typeof r === 'object' ? (r as Record<string, unknown>) : undefined;
}

function usageOf(response: Record<string, unknown> | undefined): UsageView | undefined {
  const u = response?.['usage'];
  if (!u || typeof u !== 'object') return undefined;
  const o = u as Record<string, unknown>;
  if (typeof o['output_tokens'] !== 'number') return undefined;
  return {
    input_tokens: Number(o['input_tokens'] ?? 0),
    output_tokens: Number(o['output_tokens']),
    total_tokens: Number(o['total_tokens'] ?? 0),
  };
}

function applyOne(state: PanelState, e: WireEvent): void {
  switch (e.type) {
    case 'response.created':
      // A second `created` announces a retry from the start: partial output is dropped.
      if (state.timeline.some((t) => t.kind === 'created')) {
        state.text = '';
        push(state, { seq: e.seq, kind: 'retry' });
      } else push(state, { seq: e.seq, kind: 'created' });
      break;
    case 'response.queued':
      push(state, { seq: e.seq, kind: 'queued' });
      break;
    case 'response.in_progress':
      push(state, { seq: e.seq, kind: 'running' });
      break;
    case 'response.output_text.delta':
      if (typeof e.data['delta'] === 'string' && state.text.length < TEXT_LIMIT) state.text += e.data['delta'];
      break;
    case 'response.output_text.done':
      if (typeof e.data['text'] === 'string' && e.data['text'].length >= state.text.length) state.text = e.data['text'];
      break;
    case 'task_runtime:task.status': {
      const task = e.data['task'] as Record<string, unknown> | undefined;
      const status = task && typeof task['status'] === 'string' ? task['status'] : undefined;
      if (status) push(state, { seq: e.seq, kind: status, detail: typeof task?.['status_message'] === 'string' ? (task['status_message'] as string) : undefined });
      break;
    }
    case 'task_runtime:model.loading': {
      const progress = e.data['progress'];
      const detail = typeof progress === 'number' && Number.isFinite(progress) ? `${Math.round(Math.min(1, Math.max(0, progress)) * 100)}%` : undefined;
      push(state, { seq: e.seq, kind: 'loading', detail });
      break;
    }
    case 'error': {
      const err = e.data['error'] as Record<string, unknown> | undefined;
      if (err) state.problem = { code: String(err['code'] ?? 'error'), message: String(err['message'] ?? '') };
      break;
    }
    case 'response.completed':
    case 'response.incomplete':
    case 'response.failed':
    case 'response.cancelled': {
      const kind = e.type === 'response.failed' ? 'failed' : e.type === 'response.cancelled' ? 'cancelled' : 'succeeded';
      const response = responseOf(e.data);
      push(state, { seq: e.seq, kind, detail: e.type === 'response.incomplete' ? 'incomplete' : undefined });
      const usage = usageOf(response);
      if (usage) state.usage = usage;
      const err = response?.['error'];
      if (err && typeof err === 'object' && !state.problem) {
        const o = err as Record<string, unknown>;
        state.problem = { code: String(o['code'] ?? 'error'), message: String(o['message'] ?? '') };
      }
      break;
    }
    default:
      break; // unknown events are ignored, as LMSP asks of clients
  }
}

/** The task view after an update: keeps the more recent of the two. */
export function mergeTask(state: PanelState, task: TaskView): PanelState {
  if (state.task && state.task.updatedAt > task.updatedAt) return state;
  const next: PanelState = { ...state, task };
  if (task.error) next.problem = task.error as ProblemView;
  if (task.usage) next.usage = task.usage;
  return next;
}
