// The typed messages between the events panel host and its webview. The host owns the contract; the webview bundle
// (webview-ui/) imports it. The only import is type-only (erased from both bundles), so each bundle takes only these
// types and the guards below.
import type { TaskStatus } from '../../runtime/task';

export const PROTOCOL_VERSION = 1;

/** The runtime status as the panel receives it (spelled out: it is part of the message contract). */
export type TaskViewStatus = 'queued' | 'loading' | 'running' | 'input_required' | 'cancelling' | 'succeeded' | 'failed' | 'cancelled';

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
  /** Prompt tokens served from a reused prefix (`usage.input_tokens_details.cached_tokens`), when reported. */
  cached_tokens?: number;
  /** Speculative decoding's drafted and accepted tokens (`usage.task_runtime.speculative`), when it drafted. */
  speculative?: { drafted: number; accepted: number };
}

/** One item of what went in (or a tool call that came out), already reduced to text for display. */
export type InputItemView =
  | { kind: 'message'; role: string; text: string }
  | { kind: 'function_call'; callId: string; name: string; arguments: string }
  | { kind: 'function_call_output'; callId: string; output: string };

/** What the task was asked: instructions, input items, the sampling and format options, the tools offered. */
export interface InputView {
  instructions: string | null;
  items: InputItemView[];
  /** Option name → value as shown (temperature, top_p, max_output_tokens, task_runtime.seed, text.format, …). */
  options: Array<[string, string]>;
  tools: Array<{ name: string; description: string; parameters: string }>;
  toolChoice: string | null;
}

/** The model the task runs on and where it runs (from the backend's ModelInfo). */
export interface ModelView {
  id: string;
  state: string;
  /** 'cpu', 'cuda', 'vulkan', 'metal', or 'remote' for a remote engine; '' when not loaded yet. */
  compute: string;
  devices: string[];
  gpuLayers: number | null;
  totalLayers: number | null;
  threads: number | null;
  contextLength: number | null;
  engine: string | null;
  /** One line as the log and tooltip say it. */
  summary: string;
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
  /** The request, when the source has it (local runtime: always). */
  input?: InputView;
}

export interface WireEvent {
  seq: number;
  type: string;
  data: Record<string, unknown>;
  /** When the store wrote the event (Unix ms); absent when the source does not say (an older remote owner). */
  at?: number;
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
export interface ModelMessage {
  type: 'model';
  model: ModelView;
}
export interface NoticeMessage {
  type: 'notice';
  level: 'info' | 'error';
  message: string;
}
export type HostMessage = SnapshotMessage | EventsMessage | TaskMessage | ModelMessage | DeletedMessage | NoticeMessage;

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
  /** Timings of each attempt, from the events' times (webview-ui/src/metrics.ts). */
  attempts?: AttemptTiming[];
  /** Tool calls and reasoning the model produced, by item id, in order. */
  outputItems?: OutputItemView[];
  model?: ModelView;
}

export interface TimelineEntry {
  seq: number;
  /** A status id (queued, running, succeeded, ...) or an event kind (created, retry, loading, first_token). */
  kind: string;
  detail?: string;
  /** When the event was written (Unix ms), when known. */
  at?: number;
}

/** A piece of output that is not the answer text: a function call (arguments streamed) or reasoning text. */
export interface OutputItemView {
  id: string;
  kind: 'function_call' | 'reasoning';
  name?: string;
  callId?: string;
  text: string;
  done: boolean;
}

/**
 * One attempt of the task (a retry or a resume starts another), with the times of its phases (Unix ms) and its
 * output over time: `points` are [ms since the attempt's first token, characters so far, exact tokens so far or -1],
 * thinned to at most POINT_LIMIT by merging neighbours.
 */
export interface AttemptTiming {
  attempt: number;
  startedAt?: number;
  queuedAt?: number;
  loadingAt?: number;
  runningAt?: number;
  firstTokenAt?: number;
  lastTokenAt?: number;
  endedAt?: number;
  /** How the attempt began: created (first), retry (from the start), resume (continuing its text). */
  how: 'created' | 'retry' | 'resume';
  chars: number;
  /** Exact tokens, counted from per-token log-probabilities when the stream carries them; -1 when not. */
  tokens: number;
  points: Array<[number, number, number]>;
  inputTokens?: number;
  outputTokens?: number;
  cachedTokens?: number;
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
  speed: 'Speed',
  speedChart: 'Tokens per second over the run',
  tokensPerSecond: '{0} tok/s',
  tokensSoFar: '{0} tokens',
  generation: 'Generation',
  promptProcessing: 'Prompt processing',
  timeToFirstToken: 'Time to first token',
  queuedFor: 'queued for {0}',
  loadingTook: 'loading took {0}',
  firstTokenAfter: 'first token after {0}',
  runningFor: 'running for {0}',
  ranFor: 'ran for {0}',
  elapsed: 'Elapsed',
  took: 'Took',
  estimated: 'estimated from the text (about {0} characters per token)',
  input: 'Input',
  instructions: 'Instructions',
  options: 'Options',
  tools: 'Tools',
  toolChoice: 'Tool choice',
  toolCall: 'Tool call',
  toolOutput: 'Tool output',
  reasoning: 'Reasoning',
  showMore: 'Show all',
  showLess: 'Show less',
  hardware: 'Hardware',
  compute: 'Compute',
  contextSize: 'Context size',
  cachedTokens: 'Cached prompt tokens',
  draftsAccepted: 'Drafts accepted',
  threads: 'CPU threads',
  gpuLayers: 'GPU layers',
  engine: 'Remote engine',
  noSpeedYet: 'No tokens yet',
  'kind.first_token': 'First token',
  'kind.resume': 'Resumed (continues its text)',
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
  'kind.webhook': 'Completion webhook',
} as const;
export type WebviewStringKey = keyof typeof WEBVIEW_STRINGS;
