// The events panel's pure state machine, run by the webview and by the host (for the state it restores): applies a snapshot and incremental events, dropping duplicates and
// reporting a gap (the webview then asks the host to resync). No DOM, so it is unit-tested on Node.
import type {
  AttemptTiming,
  OutputItemView,
  PanelState,
  ProblemView,
  SnapshotMessage,
  TaskView,
  TimelineEntry,
  UsageView,
  WireEvent,
} from './protocol';

export const TIMELINE_LIMIT = 200;
const TEXT_LIMIT = 2_000_000;
/** Speed samples kept per attempt: enough for a smooth 60-bar chart, small enough for setState (a few KB). */
export const POINT_LIMIT = 240;
const ATTEMPT_LIMIT = 20;
const ITEM_TEXT_LIMIT = 200_000;
const ITEM_LIMIT = 100;

export function initialState(taskId: string): PanelState {
  return { taskId, lastSeq: -1, text: '', timeline: [], problem: null, usage: null, attempts: [], outputItems: [] };
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
  const state: PanelState = {
    ...previous,
    timeline: previous.timeline.slice(),
    attempts: (previous.attempts ?? []).map((a) => ({ ...a, points: a.points.slice() })),
    outputItems: (previous.outputItems ?? []).map((i) => ({ ...i })),
  };
  let applied = 0;
  for (const e of events) {
    if (e.seq <= state.lastSeq) continue; // duplicate
    if (e.seq !== state.lastSeq + 1) return { state, gap: true, applied };
    applyOne(state, e);
    state.lastSeq = e.seq;
    applied++;
  }
  if (state.timeline.length > TIMELINE_LIMIT) state.timeline = state.timeline.slice(-TIMELINE_LIMIT);
  if (state.attempts!.length > ATTEMPT_LIMIT) state.attempts = state.attempts!.slice(-ATTEMPT_LIMIT);
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

/** The attempt events now belong to (one is opened on the first event if the stream starts mid-attempt). */
function current(state: PanelState, e: WireEvent): AttemptTiming {
  const attempts = state.attempts!;
  let a = attempts[attempts.length - 1];
  if (!a) {
    a = newAttempt(1, 'created', e.at);
    attempts.push(a);
  }
  return a;
}

function newAttempt(attempt: number, how: AttemptTiming['how'], at: number | undefined): AttemptTiming {
  return { attempt, how, ...(at !== undefined ? { startedAt: at } : {}), chars: 0, tokens: 0, points: [] };
}

/** Generated text on any channel (answer, tool arguments, reasoning): counts toward the attempt's speed. */
function generated(state: PanelState, e: WireEvent, delta: string): void {
  const a = current(state, e);
  const firstOfAttempt = a.chars === 0 && a.firstTokenAt === undefined;
  a.chars += delta.length;
  const logprobs = e.data['logprobs'];
  if (a.tokens >= 0 && Array.isArray(logprobs) && logprobs.length > 0) a.tokens += logprobs.length;
  else a.tokens = -1;
  if (e.at === undefined) return;
  if (firstOfAttempt) {
    a.firstTokenAt = e.at;
    push(state, { seq: e.seq, kind: 'first_token', at: e.at });
  }
  a.lastTokenAt = e.at;
  a.points.push([e.at - (a.firstTokenAt ?? e.at), a.chars, a.tokens]);
  if (a.points.length > POINT_LIMIT) {
    // Points are cumulative, so dropping every other one only lowers the resolution; the last one always stays.
    a.points = a.points.filter((_, i) => i % 2 === 1 || i === a.points.length - 1);
  }
}

function outputItem(state: PanelState, id: string): OutputItemView | undefined {
  return state.outputItems!.find((i) => i.id === id);
}

function itemId(data: Record<string, unknown>): string {
  if (typeof data['item_id'] === 'string') return data['item_id'];
  return `#${String(data['output_index'] ?? 0)}`;
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
  const details = o['input_tokens_details'];
  const cached = details && typeof details === 'object' ? (details as Record<string, unknown>)['cached_tokens'] : undefined;
  return {
    input_tokens: Number(o['input_tokens'] ?? 0),
    output_tokens: Number(o['output_tokens']),
    total_tokens: Number(o['total_tokens'] ?? 0),
    ...(typeof cached === 'number' && cached > 0 ? { cached_tokens: cached } : {}),
    ...speculativeOf(o['task_runtime']),
  };
}

/** `usage.task_runtime.speculative` ({drafted, accepted}), when well-formed. */
function speculativeOf(vendor: unknown): { speculative?: { drafted: number; accepted: number } } {
  const s = vendor && typeof vendor === 'object' ? (vendor as Record<string, unknown>)['speculative'] : undefined;
  if (!s || typeof s !== 'object') return {};
  const { drafted, accepted } = s as Record<string, unknown>;
  return typeof drafted === 'number' && typeof accepted === 'number' ? { speculative: { drafted, accepted } } : {};
}

function applyOne(state: PanelState, e: WireEvent): void {
  const at = e.at;
  const stamp = at !== undefined ? { at } : {};
  switch (e.type) {
    case 'response.created': {
      // A second `created` announces a retry from the start: partial output is dropped.
      const attempts = state.attempts!;
      if (state.timeline.some((t) => t.kind === 'created')) {
        state.text = '';
        state.outputItems = [];
        push(state, { seq: e.seq, kind: 'retry', ...stamp });
        const last = attempts[attempts.length - 1];
        // The status event of the new attempt came first and opened it as a resume: it is a retry.
        if (last && last.how === 'resume' && last.chars === 0 && last.runningAt === undefined) {
          last.how = 'retry';
          const i = state.timeline.map((t) => t.kind).lastIndexOf('resume');
          if (i >= 0) state.timeline.splice(i, 1);
        } else attempts.push(newAttempt((last?.attempt ?? 0) + 1, 'retry', at));
      } else {
        push(state, { seq: e.seq, kind: 'created', ...stamp });
        if (!attempts.length) attempts.push(newAttempt(1, 'created', at));
      }
      break;
    }
    case 'response.queued': {
      push(state, { seq: e.seq, kind: 'queued', ...stamp });
      const a = current(state, e);
      a.queuedAt ??= at;
      break;
    }
    case 'response.in_progress': {
      push(state, { seq: e.seq, kind: 'running', ...stamp });
      const a = current(state, e);
      a.runningAt ??= at;
      break;
    }
    case 'response.output_text.delta':
      if (typeof e.data['delta'] === 'string') {
        if (state.text.length < TEXT_LIMIT) state.text += e.data['delta'];
        generated(state, e, e.data['delta']);
      }
      break;
    case 'response.output_text.done':
      if (typeof e.data['text'] === 'string' && e.data['text'].length >= state.text.length) state.text = e.data['text'];
      break;
    case 'response.output_item.added':
    case 'response.output_item.done': {
      const item = e.data['item'];
      if (!item || typeof item !== 'object') break;
      const o = item as Record<string, unknown>;
      if (o['type'] !== 'function_call' && o['type'] !== 'reasoning') break;
      const id = typeof o['id'] === 'string' ? o['id'] : `#${String(e.data['output_index'] ?? 0)}`;
      let view = outputItem(state, id);
      if (!view) {
        if (state.outputItems!.length >= ITEM_LIMIT) break;
        view = { id, kind: o['type'], text: '', done: false };
        state.outputItems!.push(view);
      }
      if (typeof o['name'] === 'string') view.name = o['name'];
      if (typeof o['call_id'] === 'string') view.callId = o['call_id'];
      if (typeof o['arguments'] === 'string' && o['arguments'].length >= view.text.length) view.text = o['arguments'].slice(0, ITEM_TEXT_LIMIT);
      if (o['type'] === 'reasoning') {
        const text = reasoningText(o);
        if (text.length >= view.text.length) view.text = text.slice(0, ITEM_TEXT_LIMIT);
      }
      if (e.type === 'response.output_item.done') view.done = true;
      break;
    }
    case 'response.function_call_arguments.delta':
    case 'response.reasoning_text.delta': {
      const delta = e.data['delta'];
      if (typeof delta !== 'string') break;
      const id = itemId(e.data);
      let view = outputItem(state, id);
      if (!view && state.outputItems!.length < ITEM_LIMIT) {
        view = { id, kind: e.type === 'response.reasoning_text.delta' ? 'reasoning' : 'function_call', text: '', done: false };
        state.outputItems!.push(view);
      }
      if (view && view.text.length < ITEM_TEXT_LIMIT) view.text += delta;
      generated(state, e, delta);
      break;
    }
    case 'task_runtime:task.status': {
      const task = e.data['task'] as Record<string, unknown> | undefined;
      const status = task && typeof task['status'] === 'string' ? task['status'] : undefined;
      if (!status) break;
      const attemptNo = typeof task?.['attempt'] === 'number' ? (task['attempt'] as number) : undefined;
      const attempts = state.attempts!;
      const last = attempts[attempts.length - 1];
      let resumed = false;
      if (last && attemptNo !== undefined && attemptNo > last.attempt) {
        // A new attempt after a restart; it is a resume unless a `response.created` follows (then a retry).
        if (last.endedAt === undefined && at !== undefined) last.endedAt = at;
        attempts.push(newAttempt(attemptNo, 'resume', at));
        resumed = true;
      } else if (last && attemptNo !== undefined && last.attempt < attemptNo) last.attempt = attemptNo;
      if (resumed) push(state, { seq: e.seq, kind: 'resume', ...stamp });
      push(state, {
        seq: e.seq,
        kind: status,
        detail: typeof task?.['status_message'] === 'string' ? (task['status_message'] as string) : undefined,
        ...stamp,
      });
      const a = current(state, e);
      if (attemptNo !== undefined && a.attempt < attemptNo) a.attempt = attemptNo;
      if (status === 'queued') a.queuedAt ??= at;
      else if (status === 'loading') a.loadingAt ??= at;
      else if (status === 'running') a.runningAt ??= at;
      break;
    }
    case 'task_runtime:task.queue': {
      // The place of a queued task moved (docs/queue.md): the queued row says where it stands now.
      const position = e.data['position'];
      if (typeof position !== 'number') break;
      const startAt = e.data['expected_start_at_ms'];
      const wait = typeof startAt === 'number' && at !== undefined ? Math.max(0, Math.round((startAt - at) / 1000)) : undefined;
      push(state, { seq: e.seq, kind: 'queued', detail: `#${position} in queue${wait === undefined ? '' : `, about ${wait} s to start`}`, ...stamp });
      break;
    }
    case 'task_runtime:model.loading': {
      const progress = e.data['progress'];
      const detail =
        typeof progress === 'number' && Number.isFinite(progress) ? `${Math.round(Math.min(1, Math.max(0, progress)) * 100)}%` : undefined;
      push(state, { seq: e.seq, kind: 'loading', detail, ...stamp });
      const a = current(state, e);
      a.loadingAt ??= at;
      break;
    }
    case 'task_runtime:webhook.delivery': {
      // The completion webhook's tries (runtime/webhooks.ts): one entry, its detail the latest try's outcome.
      const d = e.data;
      const answer = typeof d['status_code'] === 'number' ? `HTTP ${d['status_code']}` : typeof d['error'] === 'string' ? d['error'] : '';
      const next = typeof d['next_retry_at'] === 'number' ? `, next try ${new Date(d['next_retry_at'] * 1000).toISOString()}` : '';
      const outcome = d['outcome'] === 'delivered' ? 'delivered' : d['outcome'] === 'gave_up' ? 'given up' : `failed${next}`;
      push(state, { seq: e.seq, kind: 'webhook', detail: `try ${String(d['attempt'] ?? '?')}: ${answer} (${outcome})`.slice(0, 300), ...stamp });
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
      push(state, { seq: e.seq, kind, detail: e.type === 'response.incomplete' ? 'incomplete' : undefined, ...stamp });
      const usage = usageOf(response);
      if (usage) state.usage = usage;
      const a = current(state, e);
      a.endedAt ??= at;
      if (usage) {
        a.inputTokens = usage.input_tokens;
        a.outputTokens = usage.output_tokens;
        if (usage.cached_tokens !== undefined) a.cachedTokens = usage.cached_tokens;
      }
      const err = response?.['error'];
      if (err && typeof err === 'object' && !state.problem) {
        const o = err as Record<string, unknown>;
        state.problem = { code: String(o['code'] ?? 'error'), message: String(o['message'] ?? '') };
      }
      for (const item of Array.isArray(response?.['output']) ? (response['output'] as unknown[]) : []) {
        if (item && typeof item === 'object') applyOne(state, { seq: e.seq, type: 'response.output_item.done', data: { item } });
      }
      break;
    }
    default:
      break; // unknown events are ignored, as LMSP asks of clients
  }
}

/** A reasoning item's text: its `content` parts (reasoning_text) or, failing that, its summary. */
function reasoningText(item: Record<string, unknown>): string {
  const parts = Array.isArray(item['content']) ? item['content'] : Array.isArray(item['summary']) ? item['summary'] : [];
  return parts
    .map((p) => (p && typeof p === 'object' && typeof (p as { text?: unknown }).text === 'string' ? (p as { text: string }).text : ''))
    .join('');
}

/** The task view after an update: keeps the more recent of the two. */
export function mergeTask(state: PanelState, task: TaskView): PanelState {
  if (state.task && state.task.updatedAt > task.updatedAt) return state;
  const next: PanelState = { ...state, task };
  if (task.error) next.problem = task.error as ProblemView;
  if (task.usage) next.usage = task.usage;
  return next;
}
