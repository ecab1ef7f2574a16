// The LMSP door: routes /lmsp/v1/* requests to their handlers. Holds no task state; everything is the runtime's.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { TaskRuntimeApi } from '../../runtime/api';
import type { RestartPolicy } from '../../runtime/task';
import { DEFAULT_CHANGE_STREAM_IDLE_MS, DEFAULT_MAX_STREAMS_PER_PRINCIPAL } from '../../runtime/shares';
import { SseGate, type SseWriter } from '../http/sse';
import { ReasoningSeal } from '../shared/reasoningSeal';
import type { DoorHandler, RequestContext } from '../http/types';
import { getCounts, streamChanges } from './vendorRoutes';
import { createChatCompletion } from './chatCompletionsRoutes';
import type { LmspDeps } from './deps';
import { getCapabilities, getModel, listModels } from './discoveryRoutes';
import { DEFAULTS, LMSP_PREFIX, PATHS, RESPONSE_PATHS, TASK_PATHS } from './lmspConstants';
import { lmspProblem } from './problems';
import { cancelResponse, createResponse, deleteResponse, getInputItems, getResponse } from './responsesRoutes';
import { cancelTask, createTask, deleteTask, getTask, listTasks, taskEvents } from './tasksRoutes';
import { checkResponseId, checkTaskId } from './wire';

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

export interface LmspDoor {
  handle: DoorHandler;
  /** What its routes share: the Anthropic door runs its tasks and streams through the same (one stream gate, one seal). */
  deps: LmspDeps;
  close(): Promise<void>;
}

type Handler = (req: IncomingMessage, res: ServerResponse, ctx: RequestContext, param: string) => void | Promise<void>;
interface Route {
  pattern: RegExp;
  methods: Record<string, Handler>;
}

export function createLmspDoor(runtime: TaskRuntimeApi, options: LmspDoorOptions = {}): LmspDoor {
  const deps: LmspDeps = {
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
  const seg = '([^/]+)';
  const routes: Route[] = [
    { pattern: exact(PATHS.capabilities), methods: { GET: (_q, r) => getCapabilities(deps, r) } },
    { pattern: exact(PATHS.models), methods: { GET: (_q, r) => listModels(deps, r) } },
    { pattern: exact(`${PATHS.models}/(.+)`), methods: { GET: (_q, r, _c, id) => getModel(deps, r, id) } },
    { pattern: exact(PATHS.responses), methods: { POST: (q, r, c) => createResponse(deps, q, r, c) } },
    { pattern: exact(PATHS.chatCompletions), methods: { POST: (q, r, c) => createChatCompletion(deps, q, r, c) } },
    {
      pattern: exact(`${PATHS.responses}/${seg}`),
      methods: {
        GET: (_q, r, c, id) => getResponse(deps, r, c, checkResponseId(id)),
        DELETE: (_q, r, c, id) => deleteResponse(deps, r, c, checkResponseId(id)),
      },
    },
    { pattern: exact(`${PATHS.responses}/${seg}${RESPONSE_PATHS.cancel}`), methods: { POST: (_q, r, c, id) => cancelResponse(deps, r, c, checkResponseId(id)) } },
    { pattern: exact(`${PATHS.responses}/${seg}${RESPONSE_PATHS.inputItems}`), methods: { GET: (_q, r, c, id) => getInputItems(deps, r, c, checkResponseId(id)) } },
    {
      pattern: exact(PATHS.tasks),
      methods: { POST: (q, r, c) => createTask(deps, q, r, c), GET: (_q, r, c) => listTasks(deps, r, c) },
    },
    {
      pattern: exact(`${PATHS.tasks}/${seg}`),
      methods: {
        GET: (_q, r, c, id) => getTask(deps, r, c, checkTaskId(id)),
        DELETE: (_q, r, c, id) => deleteTask(deps, r, c, checkTaskId(id)),
      },
    },
    { pattern: exact(`${PATHS.tasks}/${seg}${TASK_PATHS.cancel}`), methods: { POST: (_q, r, c, id) => cancelTask(deps, r, c, checkTaskId(id)) } },
    { pattern: exact(`${PATHS.tasks}/${seg}${TASK_PATHS.events}`), methods: { GET: (q, r, c, id) => taskEvents(deps, q, r, c, checkTaskId(id)) } },
    { pattern: exact(PATHS.changes), methods: { GET: (_q, r, c) => streamChanges(deps, r, c) } },
    { pattern: exact(PATHS.counts), methods: { GET: (_q, r, c) => getCounts(deps, r, c) } },
  ];

  const handle: DoorHandler = async (req, res, ctx) => {
    const path = ctx.url.pathname.slice(LMSP_PREFIX.length) || '/';
    for (const route of routes) {
      const m = route.pattern.exec(path);
      if (!m) continue;
      const method = req.method ?? 'GET';
      const handler = route.methods[method];
      if (!handler) {
        throw lmspProblem('method_not_allowed', `${req.method} is not allowed here.`, { headers: { Allow: Object.keys(route.methods).join(', ') } });
      }
      let param = '';
      if (m[1] !== undefined) {
        try {
          param = decodeURIComponent(m[1]);
        } catch {
          throw lmspProblem('invalid_request', 'The path is not validly encoded.');
        }
      }
      await handler(req, res, ctx, param);
      return;
    }
    throw lmspProblem('not_found', 'No such endpoint.');
  };

  return {
    handle,
    deps,
    async close() {
      for (const writer of [...deps.streams]) writer.close();
      // An unstored task left behind goes by the runtime's retention instead.
      for (const t of deps.timers) clearTimeout(t);
      deps.timers.clear();
    },
  };
}

function exact(path: string): RegExp {
  return new RegExp(`^${path}$`);
}
