// What the editor UI needs from the tasks, whether this window owns the store (local) or talks to the owner's
// LMSP endpoint (remote). Pure: no vscode.
import type { ModelHardware } from '../../runtime/backend';
import { withSampling, type Sampling } from '../../runtime/requestFields';
import {
  TASK_STATUSES,
  type Problem,
  type ResponseFunctionTool,
  type ResponseRequest,
  type ResponseToolChoice,
  type RestartPolicy,
  type TaskOrigin,
  type TaskStatus,
  type Usage,
} from '../../runtime/task';
import type { IDisposable } from '../lifecycle';

/** A task as the editor shows it; both sources map their own shape onto it. */
export interface TaskInfo {
  id: string;
  responseId: string | null;
  status: TaskStatus;
  /** undefined when the remote owner did not say (older endpoint). */
  origin: TaskOrigin | undefined;
  title: string;
  model: string;
  statusMessage: string | null;
  /** Unix milliseconds. */
  createdAt: number;
  updatedAt: number;
  onRestart: RestartPolicy;
  attempt: number;
  outputTokens: number;
  usage: Usage | null;
  error: Problem | null;
  response: Record<string, unknown> | null;
  /** The full prompt text, when the source has it (local always; remote with the vendor member). */
  prompt?: string;
  /** The request as stored, when the source has it (local). */
  input?: ResponseRequest;
  /** Oldest stored event sequence, when the source knows it (local). */
  oldestSeq?: number;
  /** Next event sequence to be assigned, when the source knows it (local). */
  nextSeq?: number;
  /** Order among its client's queued tasks (higher first), when the source says. */
  priority?: number;
  /** A queued task's place in the order tasks start, and when it is expected to start (Unix ms, null: not yet known). */
  queue?: { position: number; expectedStartAt: number | null };
}

/** One stored or live event of a task's stream. */
export interface TaskEventInfo {
  seq: number;
  type: string;
  data: Record<string, unknown>;
  /** When the store wrote it (Unix ms), when the source knows (local). */
  createdAt?: number;
}

export interface CreateTaskRequest {
  prompt: string;
  model?: string;
  onRestart?: RestartPolicy;
  /** Prompt + this must fit the model's context (else the create fails with context_length_exceeded)... */
  maxOutputTokens?: number;
  /** ...unless it is an "up to" budget, capped to the room the prompt leaves (the chat provider's reserve). */
  capMaxOutputTokens?: boolean;
  /** Sampling (temperature, seed, …; runtime/requestFields.ts), checked by whoever creates the task. */
  sampling?: Sampling;
  instructions?: string;
  /** Responses input items (messages, `function_call`, `function_call_output`); when given, `prompt` is not sent. */
  input?: unknown[];
  tools?: ResponseFunctionTool[];
  toolChoice?: ResponseToolChoice;
  /** Short title for the tree; default: an excerpt of the last user message. */
  title?: string;
}

export interface TaskPage {
  tasks: TaskInfo[];
  nextCursor: string | null;
}

export interface TaskListQuery {
  statuses?: readonly TaskStatus[];
  cursor?: string;
  limit?: number;
}

export interface ModelSummary {
  id: string;
  source: string;
  state: string;
  demo: boolean;
  /** What the loaded model runs on, in one line (GPU/CPU, layers, threads, fallback reason); absent before load. */
  hardware?: string;
  /** The same in parts, when the source has them (local). */
  hardwareInfo?: ModelHardware;
  /** The context the model runs with (tokens), once known (a local model after its load). */
  contextLength?: number | null;
  /** The trained context (tokens), when known. */
  maxContextLength?: number | null;
  /** The remote engine serving it; absent for in-process models. */
  engine?: string;
  /** What its generation supports (GET /models `capabilities`); absent: not known yet. */
  capabilities?: { tools: boolean; reasoning: boolean };
}

export interface EventStreamHandlers {
  onEvent(event: TaskEventInfo): void;
  /** The stream failed (history expired, task deleted, owner gone); the caller falls back to a snapshot. */
  onError?(error: Error): void;
  /** The stream ended normally (terminal task, everything delivered). */
  onEnd?(): void;
}

export interface TaskSource extends IDisposable {
  readonly kind: 'local' | 'remote';
  list(query: TaskListQuery): Promise<TaskPage>;
  counts(): Promise<Record<TaskStatus, number>>;
  get(id: string): Promise<TaskInfo | undefined>;
  create(request: CreateTaskRequest): Promise<TaskInfo>;
  cancel(id: string): Promise<TaskInfo>;
  /** Cancels the editor's client's queued tasks (or running ones, or both) in one batch; the tasks it changed. */
  cancelMany(statuses: ReadonlyArray<'queued' | 'running'>): Promise<TaskInfo[]>;
  /** A queued task of the editor's client goes first among its queued tasks ("run next"). */
  runNext(id: string): Promise<TaskInfo>;
  delete(id: string): Promise<void>;
  /** Stored events after afterSeq (undefined = from the first), then live ones, in order, without duplicates. */
  subscribeEvents(id: string, afterSeq: number | undefined, handlers: EventStreamHandlers): IDisposable;
  /** Every change of any visible task. */
  onDidChangeTask(listener: (task: TaskInfo, deleted: boolean) => void): IDisposable;
  listModels(): Promise<ModelSummary[]>;
  /**
   * Tokens `text` takes in the model's own tokenizer, or null when it is not at hand (model not loaded, remote engine,
   * or a window that does not own the runtime): the caller estimates then.
   */
  countTokens(model: string, text: string): Promise<number | null>;
  /** Fired when changes may have been missed (a change feed connected or reconnected): reload everything. */
  onDidInvalidate?(listener: () => void): IDisposable;
  /**
   * Resolves once changes flow to onDidChangeTask listeners: at once for the local runtime; for the owner's endpoint,
   * when its change feed is connected (and listeners were told to reload). Tests wait on this instead of sleeping.
   */
  connected(): Promise<void>;
}

/** A zero for every runtime status. */
export function emptyCounts(): Record<TaskStatus, number> {
  return Object.fromEntries(TASK_STATUSES.map((s) => [s, 0])) as Record<TaskStatus, number>;
}

/**
 * The request a create sends, built the same for the local runtime and for another window's endpoint (the one
 * builder of both sources); the runtime checks it at create either way, so both refuse the same values.
 */
export function toResponseRequest(request: CreateTaskRequest): ResponseRequest {
  const out: ResponseRequest = { input: request.input ?? request.prompt };
  if (request.model) out.model = request.model;
  if (request.tools?.length) {
    out.tools = request.tools;
    if (request.toolChoice) out.tool_choice = request.toolChoice;
  }
  if (request.instructions) out.instructions = request.instructions;
  if (request.maxOutputTokens) {
    out.max_output_tokens = request.maxOutputTokens;
    if (request.capMaxOutputTokens) out.task_runtime = { cap_max_output_tokens: true };
  }
  return withSampling(out, request.sampling ?? {});
}
