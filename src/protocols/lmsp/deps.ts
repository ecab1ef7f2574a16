// What the HTTP doors of the task family (LMSP, the OpenAI-compatible routes, Anthropic Messages) share: one stream
// gate, one reasoning seal, one body limit, one clock, and the open streams and timers closed with them.
import type { TaskRuntimeApi } from '../../runtime/api';
import { DEFAULT_CHANGE_STREAM_IDLE_MS, DEFAULT_MAX_STREAMS_PER_PRINCIPAL } from '../../runtime/shares';
import type { RestartPolicy } from '../../runtime/task';
import { SseGate, type SseWriter } from '../http/sse';
import { ReasoningSeal } from '../shared/reasoningSeal';
import { DEFAULTS } from './lmspConstants';

export interface LmspDoorOptions {
  /**
   * Principals that may mark a created task as made in the editor (`task_runtime.origin: "editor"` in the create
   * body): the editor's own token, used by its other windows. Nobody else may (403). Default: none.
   */
  editorPrincipals?: readonly string[];
  maxBodyBytes?: number;
  /**
   * on_restart of a `background: true` response (OpenAI background mode has no field for it): serve
   * --background-restart, setting taskRuntime.backgroundRestartPolicy. Default DEFAULTS.backgroundOnRestart; `resume`
   * falls back to `retry` for a model that cannot resume.
   */
  backgroundOnRestart?: RestartPolicy;
  heartbeatMs?: number;
  /** Shared stream slots of the door (default 256). */
  maxSseStreams?: number;
  /** Open streams of one principal, shared or not (default runtime/shares.ts DEFAULT_MAX_STREAMS_PER_PRINCIPAL). */
  maxSseStreamsPerPrincipal?: number;
  /** A change stream with no change for this long ends (default DEFAULT_CHANGE_STREAM_IDLE_MS; 0 = never). */
  changeStreamIdleMs?: number;
  /** Clock for idle timeouts (default Date.now); checked at every heartbeat. */
  now?: () => number;
  log?: (msg: string) => void;
  /** Seals reasoning handed to clients between turns (`encrypted_content`); absent: a key of this process. */
  seal?: ReasoningSeal;
  /** How long a `store: false` response's task stays after it ends (default DEFAULTS.unstoredRetentionMs). */
  unstoredRetentionMs?: number;
}

export interface LmspDeps {
  runtime: TaskRuntimeApi;
  /** Principals allowed to create tasks with origin "editor" (LmspDoorOptions.editorPrincipals). */
  editorPrincipals: ReadonlySet<string>;
  maxBodyBytes: number;
  /** on_restart of a `background: true` response (LmspDoorOptions.backgroundOnRestart). */
  backgroundOnRestart: RestartPolicy;
  heartbeatMs: number;
  sseGate: SseGate;
  /** A change stream that has told no change for this long ends (the client reconnects and re-reads the list). */
  changeStreamIdleMs: number;
  /** The door's clock, for idle timeouts (LmspDoorOptions.now). */
  now: () => number;
  /** Open streams, closed when the door closes. */
  streams: Set<SseWriter>;
  log: (msg: string) => void;
  /** Seals and opens reasoning a client carries between turns (`encrypted_content`). */
  seal: ReasoningSeal;
  /** How long a `store: false` response's task is kept after it ends (LmspDoorOptions.unstoredRetentionMs). */
  unstoredRetentionMs: number;
  /** Pending deletions of ended `store: false` tasks, cleared when the door closes. */
  timers: Set<NodeJS.Timeout>;
}

export function createDoorDeps(runtime: TaskRuntimeApi, options: LmspDoorOptions = {}): LmspDeps {
  return {
    runtime,
    editorPrincipals: new Set(options.editorPrincipals ?? []),
    maxBodyBytes: options.maxBodyBytes ?? DEFAULTS.maxBodyBytes,
    backgroundOnRestart: options.backgroundOnRestart ?? DEFAULTS.backgroundOnRestart,
    heartbeatMs: options.heartbeatMs ?? DEFAULTS.heartbeatMs,
    sseGate: new SseGate(options.maxSseStreams ?? DEFAULTS.maxSseStreams, options.maxSseStreamsPerPrincipal ?? DEFAULT_MAX_STREAMS_PER_PRINCIPAL),
    changeStreamIdleMs: options.changeStreamIdleMs ?? DEFAULT_CHANGE_STREAM_IDLE_MS,
    now: options.now ?? Date.now,
    streams: new Set<SseWriter>(),
    log: options.log ?? (() => {}),
    seal: options.seal ?? new ReasoningSeal(),
    unstoredRetentionMs: options.unstoredRetentionMs ?? DEFAULTS.unstoredRetentionMs,
    timers: new Set(),
  };
}

/** Ends the doors' open streams and pending timers (an unstored task left behind goes by the runtime's retention). */
export function closeDoorDeps(deps: LmspDeps): void {
  for (const writer of [...deps.streams]) writer.close();
  for (const t of deps.timers) clearTimeout(t);
  deps.timers.clear();
}
