// What every LMSP route needs from the door.
import type { TaskRuntimeApi } from '../../runtime/api';
import type { RestartPolicy } from '../../runtime/task';
import type { SseGate, SseWriter } from '../http/sse';
import type { ReasoningSeal } from '../shared/reasoningSeal';

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
