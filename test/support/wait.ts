// The one place tests wait. Wait for a state or an event, never for an amount of time: on the shared 2-core
// machine a 1 s TTL task expired before it was seen running, and 200–400 ms sleeps against 0.2–0.6 s windows
// failed under load (issue #11). The bounds here are generous and only stop a hung test; nothing asserts on them.
import type { Subscription } from '../../src/runtime/api';
import type { TaskRecord } from '../../src/runtime/task';

/** Long enough for any wait on a loaded machine; a wait that runs into it is a hang, not a slow pass. */
export const WAIT_LIMIT_MS = 120_000;

/**
 * Calls `check` until it returns a value other than undefined/false and returns it. For states only reachable by
 * polling (another process over HTTP); `intervalMs` is the polling pace, not a guess at how long something takes.
 */
export async function until<T>(
  check: () => T | undefined | false | Promise<T | undefined | false>,
  what: string,
  { timeoutMs = WAIT_LIMIT_MS, intervalMs = 20 }: { timeoutMs?: number; intervalMs?: number } = {},
): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(intervalMs);
  }
}

/** Pacing only (a load shape, a slow writer, a client honouring pollInterval); never to let something happen. */
export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Resolves with the first value `listen` hands to `pick` that `pick` maps to something, then unsubscribes. */
export function nextEvent<E, T>(
  listen: (listener: (e: E) => void) => Subscription,
  pick: (e: E) => T | undefined | false,
  what: string,
  timeoutMs = WAIT_LIMIT_MS,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let done = false;
    let sub: Subscription | undefined;
    const timer = setTimeout(() => finish(() => reject(new Error(`timed out waiting for ${what}`))), timeoutMs);
    const finish = (settle: () => void) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      sub?.close();
      settle();
    };
    sub = listen((e) => {
      const v = pick(e);
      if (v !== undefined && v !== false) finish(() => resolve(v));
    });
    if (done) sub.close();
  });
}

interface TaskSource {
  getTask(id: string): TaskRecord | undefined;
  onTaskChange(listener: (task: TaskRecord, deleted: boolean) => void): Subscription;
}

/**
 * Resolves with the task once `pred` holds for it: at once if it already does, else on the task change that makes
 * it so (changes are told after each durable write, token progress included).
 */
export function taskReaches(rt: TaskSource, id: string, pred: (t: TaskRecord) => boolean, what: string): Promise<TaskRecord> {
  const now = rt.getTask(id);
  if (now && pred(now)) return Promise.resolve(now);
  return nextEvent<[TaskRecord, boolean], TaskRecord>(
    (l) => rt.onTaskChange((t, deleted) => l([t, deleted])),
    ([t, deleted]) => t.id === id && !deleted && pred(t) && t,
    what,
  );
}

/** Resolves when the task is deleted (retention, ttl, delete). */
export function taskDeleted(rt: TaskSource, id: string): Promise<void> {
  return nextEvent<[TaskRecord, boolean], true>(
    (l) => rt.onTaskChange((t, deleted) => l([t, deleted])),
    ([t, deleted]) => t.id === id && deleted,
    `task ${id} to be deleted`,
  ).then(() => undefined);
}

/** Polls a synchronous predicate (in-process state that tells no event, e.g. a collected list or a log). */
export async function waitFor(pred: () => boolean, what: string, timeoutMs = WAIT_LIMIT_MS): Promise<void> {
  await until(() => pred(), what, { timeoutMs, intervalMs: 5 });
}
