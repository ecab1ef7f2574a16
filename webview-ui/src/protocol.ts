// The typed messages between the events panel host (src/extension) and its webview. Shared by both sides; the
// only import is type-only (erased from both bundles), so each bundle takes only these types and the guards below.
import type { TaskStatus } from '../../src/runtime/task';

export const PROTOCOL_VERSION = 1;

/** The runtime status as the panel receives it (spelled out: it is part of the message contract). */
export type TaskViewStatus =
  | 'queued'
  | 'loading'
  | 'running'
  | 'input_required'
  | 'cancelling'
  | 'succeeded'
  | 'failed'
  | 'cancelled';

type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
type Assert<T extends true> = T;
/** Compile-time check: this fails to type-check (`npm run typecheck`) when the runtime's statuses change. */
export type TaskViewStatusMatchesRuntime = Assert<Same<TaskViewStatus, TaskStatus>>;

export interface ProblemView {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: string;
}

export interface UsageView {
  input_tokens: number;
  output_tokens: number;
  total_tokens: number;
}

/** What the panel shows about a task (no prompt or output body: those travel as events/text). */
export interface TaskView {
  id: string;
  title: string;
  status: TaskViewStatus;
  statusMessage: string | null;
  origin: string;
  model: string;
  createdAt: number;
  updatedAt: number;
  attempt: number;
  outputTokens: number;
  usage: UsageView | null;
  error: ProblemView | null;
}

export interface WireEvent {
  seq: number;
  type: string;
  data: Record<string, unknown>;
}

// Host → webview.
export interface SnapshotMessage {
  type: 'snapshot';
  task: TaskView;
  /** Stored events from the first retained one, in order. */
  events: WireEvent[];
  /** When events were purged: the final text from the stored response, used instead of replaying deltas. */
  text?: string;
  /** True when history before events[0] was purged. */
  truncated: boolean;
  /** The last sequence number the snapshot covers (-1 when the task has no event yet). */
  lastSeq: number;
}
export interface EventsMessage {
  type: 'events';
  events: WireEvent[];
}
export interface TaskMessage {
  type: 'task';
  task: TaskView;
}
export interface DeletedMessage {
  type: 'deleted';
}
export interface NoticeMessage {
  type: 'notice';
  level: 'info' | 'error';
  message: string;
}
export type HostMessage = SnapshotMessage | EventsMessage | TaskMessage | DeletedMessage | NoticeMessage;

// Webview → host.
export interface ReadyMessage {
  type: 'ready';
  version: number;
  /** Last sequence the webview has applied (restored state), or -1 for none: the host then sends a snapshot. */
  lastSeq: number;
}
export interface ResyncMessage {
  type: 'resync';
  /** Why: 'gap' when a sequence number was skipped. */
  reason: string;
}
export interface ActionMessage {
  type: 'action';
  action: 'cancel' | 'copyText' | 'copyId' | 'openResult' | 'retry';
}
export type WebviewMessage = ReadyMessage | ResyncMessage | ActionMessage;

const ACTIONS: ReadonlySet<string> = new Set(['cancel', 'copyText', 'copyId', 'openResult', 'retry']);

/** Validates a message from the webview (the host treats the webview as untrusted input). */
export function parseWebviewMessage(value: unknown): WebviewMessage | undefined {
  if (!value || typeof value !== 'object') return undefined;
  const m = value as Record<string, unknown>;
  switch (m['type']) {
    case 'ready':
      if (typeof m['version'] !== 'number' || typeof m['lastSeq'] !== 'number' || !Number.isInteger(m['lastSeq'])) return undefined;
      if (m['lastSeq'] < -1) return undefined;
      return { type: 'ready', version: m['version'], lastSeq: m['lastSeq'] };
    case 'resync':
      return { type: 'resync', reason: typeof m['reason'] === 'string' ? m['reason'].slice(0, 100) : 'unknown' };
    case 'action':
      if (typeof m['action'] !== 'string' || !ACTIONS.has(m['action'])) return undefined;
      return { type: 'action', action: m['action'] as ActionMessage['action'] };
    default:
      return undefined;
  }
}

/** State the webview saves with setState; the serializer hands it back after a reload. */
export interface PanelState {
  taskId: string;
  lastSeq: number;
  text: string;
  task?: TaskView;
  timeline: TimelineEntry[];
  problem?: ProblemView | { code: string; message: string } | null;
  usage?: UsageView | null;
}

export interface TimelineEntry {
  seq: number;
  /** A status id (queued, running, succeeded, ...) or an event kind (created, retry, loading). */
  kind: string;
  detail?: string;
}

export function isPanelState(value: unknown): value is PanelState {
  if (!value || typeof value !== 'object') return false;
  const s = value as Record<string, unknown>;
  return typeof s['taskId'] === 'string' && typeof s['lastSeq'] === 'number' && typeof s['text'] === 'string' && Array.isArray(s['timeline']);
}

/** Every string the webview shows, in English; the host localizes them and hands them over in the HTML. */
export const WEBVIEW_STRINGS = {
  title: 'Task events',
  timeline: 'Timeline',
  output: 'Output',
  usage: 'Usage',
  problem: 'Problem',
  cancel: 'Cancel',
  copyText: 'Copy text',
  copyId: 'Copy id',
  openResult: 'Open result',
  retry: 'Retry',
  waiting: 'Waiting for output…',
  inputTokens: 'Input tokens',
  outputTokens: 'Output tokens',
  totalTokens: 'Total tokens',
  model: 'Model',
  origin: 'Origin',
  attempt: 'Attempt',
  deleted: 'This task was deleted.',
  historyExpired: 'Earlier events are no longer stored.',
  'kind.created': 'Created',
  'kind.retry': 'Restarted (new attempt)',
  'kind.queued': 'Queued',
  'kind.loading': 'Loading model',
  'kind.running': 'Running',
  'kind.input_required': 'Needs input',
  'kind.cancelling': 'Cancelling',
  'kind.succeeded': 'Succeeded',
  'kind.failed': 'Failed',
  'kind.cancelled': 'Cancelled',
  'kind.history_expired': 'History expired',
} as const;
export type WebviewStringKey = keyof typeof WEBVIEW_STRINGS;
