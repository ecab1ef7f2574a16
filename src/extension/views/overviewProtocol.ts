// The typed messages between the runtime overview view (src/extension/views/overviewView.ts) and its webview.
// Same pattern as the events panel: nothing is posted before the webview's `ready`; then a full state on every
// change (it is small: a few models, eight counts, 60 numbers).
import type { ModelView } from '../webview/protocol';
import type { TaskViewStatus } from '../webview/protocol';

export const OVERVIEW_PROTOCOL_VERSION = 2;
/** How many queued tasks the overview lists. */
export const NEXT_IN_QUEUE = 5;

export interface OverviewEndpoints {
  lmsp: string;
  mcp: string;
  /** OpenAI-compatible base URL (the LMSP base: /v1/responses, /v1/chat/completions, /v1/models). */
  openai: string;
}

export interface OverviewState {
  /** owner: this window runs the store; attached: it talks to another window's endpoint; starting/stopped. */
  role: string;
  models: ModelView[];
  counts: Record<TaskViewStatus, number>;
  /** Tokens/s across all running tasks, one value per `bucketMs`, oldest first, ending now. */
  series: number[];
  bucketMs: number;
  /** The running tasks' current tokens/s summed. */
  liveTps: number;
  running: Array<{ id: string; title: string; rate: number | null; tokens: number }>;
  /** The next queued tasks in the order they will start (at most NEXT_IN_QUEUE), with their expected wait (ms). */
  next: Array<{ id: string; title: string; position: number; waitMs: number | null }>;
  endpoints: OverviewEndpoints | null;
}

export interface OverviewStateMessage {
  type: 'state';
  state: OverviewState;
}
export type OverviewHostMessage = OverviewStateMessage;

export const OVERVIEW_ACTIONS = ['copyLmsp', 'copyOpenAi', 'copyMcpConfig', 'openTask', 'selectModel', 'showLog'] as const;
export type OverviewAction = (typeof OVERVIEW_ACTIONS)[number];

export interface OverviewReadyMessage {
  type: 'ready';
  version: number;
}
export interface OverviewActionMessage {
  type: 'action';
  action: OverviewAction;
  /** openTask: the task id. */
  taskId?: string;
}
export type OverviewWebviewMessage = OverviewReadyMessage | OverviewActionMessage;

/** Validates a message from the overview webview (untrusted input). */
export function parseOverviewMessage(value: unknown): OverviewWebviewMessage | undefined {
  if (!value || typeof value !== 'object') return undefined;
  const m = value as Record<string, unknown>;
  if (m['type'] === 'ready') return typeof m['version'] === 'number' ? { type: 'ready', version: m['version'] } : undefined;
  if (m['type'] === 'action') {
    if (typeof m['action'] !== 'string' || !(OVERVIEW_ACTIONS as readonly string[]).includes(m['action'])) return undefined;
    const action = m['action'] as OverviewAction;
    if (action === 'openTask') {
      const id = m['taskId'];
      if (typeof id !== 'string' || !/^task_[A-Za-z0-9_-]{1,200}$/.test(id)) return undefined;
      return { type: 'action', action, taskId: id };
    }
    return { type: 'action', action };
  }
  return undefined;
}

/** Every string the overview shows, in English; the host localizes them. */
export const OVERVIEW_STRINGS = {
  title: 'Runtime',
  models: 'Models',
  noModels: 'No model configured yet.',
  queue: 'Tasks',
  throughput: 'Throughput',
  throughputChart: 'Tokens per second across all running tasks over the last {0} minutes',
  running: 'Running now',
  nothingRunning: 'Nothing running.',
  nextInQueue: 'Next in queue',
  startsIn: 'in about {0} s',
  startingSoon: 'starting soon',
  endpoints: 'Endpoints',
  notListening: 'The runtime is not listening yet.',
  lmsp: 'LMSP',
  openai: 'OpenAI-compatible',
  mcp: 'MCP',
  copy: 'Copy',
  copyMcpConfig: 'Copy MCP configuration (contains the access token)',
  selectModel: 'Select model',
  showLog: 'Show log',
  tokensPerSecond: '{0} tok/s',
  minutesAgo: '−{0} min',
  now: 'now',
  contextSize: '{0} ctx',
  remote: 'remote',
  'state.loaded': 'loaded',
  'state.loading': 'loading',
  'state.unloaded': 'not loaded',
  'state.error': 'error',
  'role.owner': 'This window runs the runtime',
  'role.client': 'Attached to another window’s runtime',
  'status.queued': 'Queued',
  'status.loading': 'Loading',
  'status.running': 'Running',
  'status.input_required': 'Needs input',
  'status.cancelling': 'Cancelling',
  'status.succeeded': 'Succeeded',
  'status.failed': 'Failed',
  'status.cancelled': 'Cancelled',
} as const;
export type OverviewStringKey = keyof typeof OVERVIEW_STRINGS;
