// The LMSP door at /lmsp/v1: tasks, models and capabilities, and the vendor routes the editor's windows use. The
// OpenAI-compatible routes below the same prefix (/responses, /chat/completions) are their own door (openai/).
// Holds no task state; everything is the runtime's.
import type { Door } from '../door';
import { dispatch, exact, type Route } from '../http/router';
import type { DoorHandler } from '../http/types';
import type { LmspDeps } from './deps';
import { getCapabilities, getModel, listModels } from './discoveryRoutes';
import { LMSP_PREFIX, PATHS, TASK_PATHS } from './lmspConstants';
import { cancelTask, cancelTasksByFilter, createTask, deleteTask, getTask, listTasks, runNextTask, taskEvents } from './tasksRoutes';
import { getCounts, streamChanges } from './vendorRoutes';
import { checkTaskId } from './wire';

export interface LmspDoor extends Door {
  handle: DoorHandler;
}

export function createLmspDoor(deps: LmspDeps): LmspDoor {
  const seg = '([^/]+)';
  const routes: Route[] = [
    { pattern: exact(PATHS.capabilities), methods: { GET: (_q, r) => getCapabilities(deps, r) } },
    { pattern: exact(PATHS.models), methods: { GET: (_q, r) => listModels(deps, r) } },
    { pattern: exact(`${PATHS.models}/(.+)`), methods: { GET: (_q, r, _c, id) => getModel(deps, r, id) } },
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
    { pattern: exact(`${PATHS.tasks}/${seg}${TASK_PATHS.runNext}`), methods: { POST: (_q, r, c, id) => runNextTask(deps, r, c, checkTaskId(id)) } },
    { pattern: exact(PATHS.cancelTasks), methods: { POST: (q, r, c) => cancelTasksByFilter(deps, q, r, c) } },
    { pattern: exact(`${PATHS.tasks}/${seg}${TASK_PATHS.events}`), methods: { GET: (q, r, c, id) => taskEvents(deps, q, r, c, checkTaskId(id)) } },
    { pattern: exact(PATHS.changes), methods: { GET: (_q, r, c) => streamChanges(deps, r, c) } },
    { pattern: exact(PATHS.counts), methods: { GET: (_q, r, c) => getCounts(deps, r, c) } },
  ];
  const handle: DoorHandler = (req, res, ctx) => dispatch(routes, ctx.url.pathname.slice(LMSP_PREFIX.length) || '/', req, res, ctx);
  return {
    handle,
    mounts: [{ prefix: LMSP_PREFIX, handler: handle, problemStyle: 'problem+json' }],
    close: async () => {},
  };
}
