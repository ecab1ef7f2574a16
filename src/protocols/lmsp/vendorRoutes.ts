// Vendor routes for editor windows that mirror the task list of the window owning the store:
//   GET /lmsp/v1/task_runtime/changes  every change of the caller's tasks (SSE, live only: a client re-reads
//                                      GET /tasks on every connect, the first one included). It counts only
//                                      against its owner's streams, and ends after changeStreamIdleMs without a
//                                      change (checked every heartbeat), so an abandoned one frees its slot

//   GET /lmsp/v1/task_runtime/counts   the caller's task counts by runtime status
import type { ServerResponse } from 'node:http';
import type { RequestContext } from '../http/types';
import type { LmspDeps } from './deps';
import { toTaskObject } from './format';
import { taskObject } from './tasksRoutes';
import { EVENT_TASK_CHANGED, OBJECTS } from './lmspConstants';
import { sendJson } from './wire';
import { acquireStreamSlot, openWriter } from './streams';

export async function streamChanges(deps: LmspDeps, res: ServerResponse, ctx: RequestContext): Promise<void> {
  const release = acquireStreamSlot(deps, ctx.principal, false);
  // Headers and the subscription in one synchronous step: once a client has the headers, no change is missed.
  const writer = openWriter(deps, res, ctx.signal, release);
  let lastChange = deps.now();
  const subscription = deps.runtime.onTaskChange((task, deleted) => {
    if (task.principal !== ctx.principal) return;
    lastChange = deps.now();
    const data = { type: EVENT_TASK_CHANGED, task: deleted ? toTaskObject(task) : taskObject(deps, task), deleted };
    writer.send({ event: EVENT_TASK_CHANGED, data: JSON.stringify(data) });
  });
  writer.comment('subscribed');
  const idleMs = deps.changeStreamIdleMs;
  const idleCheck =
    idleMs > 0
      ? setInterval(
          () => {
            if (deps.now() - lastChange < idleMs) return;
            writer.comment('idle: reconnect to follow changes');
            writer.close();
          },
          Math.max(1, Math.min(deps.heartbeatMs || idleMs, idleMs)),
        )
      : undefined;
  idleCheck?.unref();
  await new Promise<void>((resolve) =>
    writer.onClose(() => {
      if (idleCheck) clearInterval(idleCheck);
      subscription.close();
      resolve();
    }),
  );
}

export function getCounts(deps: LmspDeps, res: ServerResponse, ctx: RequestContext): void {
  const counts = deps.runtime.countTasks(ctx.principal);
  sendJson(res, 200, { object: OBJECTS.counts, by_status: counts.byStatus, total: counts.total });
}
