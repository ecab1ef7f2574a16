// Vendor feed GET /lmsp/v1/task_runtime/changes: every change of the caller's tasks, for editor windows that
// mirror the task list. Live only; a reconnecting client re-reads GET /tasks.
import type { ServerResponse } from 'node:http';
import type { RequestContext } from '../http/types';
import type { LmspDeps } from './deps';
import { toTaskObject } from './format';
import { EVENT_TASK_CHANGED } from './lmspConstants';
import { acquireStreamSlot, openWriter } from './streams';

export async function streamChanges(deps: LmspDeps, res: ServerResponse, ctx: RequestContext): Promise<void> {
  const release = acquireStreamSlot(deps);
  const writer = openWriter(deps, res, ctx.signal, release);
  const subscription = deps.runtime.onTaskChange((task, deleted) => {
    if (task.principal !== ctx.principal) return;
    const data = { type: EVENT_TASK_CHANGED, task: toTaskObject(task), deleted };
    writer.send({ event: EVENT_TASK_CHANGED, data: JSON.stringify(data) });
  });
  writer.comment('subscribed');
  await new Promise<void>((resolve) =>
    writer.onClose(() => {
      subscription.close();
      resolve();
    }),
  );
}
