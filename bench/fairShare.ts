// Fair shares (issue #20): how long principal B's first task waits in the queue while principal A has 200 queued,
// on the tiny model with one task at a time (the default concurrency), against one task's own time. Before the
// round-robin scheduler B waited behind all of A's backlog; the goal is at most one task's time (the task that
// holds the slot when B arrives).
import { openTinyRuntime } from './tinyRuntime';
import { isTerminal, type TaskRecord } from '../src/runtime/task';

const round = (x: number, d = 1) => Math.round(x * 10 ** d) / 10 ** d;

export async function fairShareBench(opts: { modelPath: string; backlog?: number; tokens?: number }): Promise<Record<string, number>> {
  const backlog = opts.backlog ?? 200;
  const tokens = opts.tokens ?? 16;
  const { runtime, input, close } = await openTinyRuntime({ modelPath: opts.modelPath, capacity: backlog + 10, tokens, prefix: 'tr-bench-fair-' });

  const started = new Map<string, number>();
  const ended = new Map<string, number>();
  const sub = runtime.onTaskChange((t: TaskRecord) => {
    if (t.status !== 'queued' && !started.has(t.id)) started.set(t.id, performance.now());
    if (isTerminal(t.status) && !ended.has(t.id)) ended.set(t.id, performance.now());
  });
  // A's backlog: one running, `backlog` queued behind it.
  const a: string[] = [];
  for (let i = 0; i <= backlog; i++) a.push(runtime.createTask({ origin: 'lmsp', principal: 'A', input: input(`a ${i}`) }).task.id);
  await new Promise<void>((resolve) => {
    const s = runtime.onTaskChange((t) => {
      if (t.id === a[0] && t.status === 'running') {
        s.close();
        resolve();
      }
    });
  });
  const bCreated = performance.now();
  const b = runtime.createTask({ origin: 'lmsp', principal: 'B', input: input('b') }).task.id;
  await runtime.waitForTerminal(b);
  const bWait = started.get(b)! - bCreated;
  // Let a few more of A's run: one task's time is how long one holds the slot, start to the next start (its run
  // and the hand-over, as B's wait counts them), the median over those.
  const more = a.slice(1, 12);
  await Promise.all(more.map((id) => runtime.waitForTerminal(id)));
  const starts = [...a.slice(0, 12), b].map((id) => started.get(id)!).sort((x, y) => x - y);
  const gaps = starts
    .slice(1)
    .map((t, i) => t - starts[i])
    .sort((x, y) => x - y);
  const oneTask = gaps[Math.floor(gaps.length / 2)];
  const aAheadOfB = a.filter((id) => started.has(id) && started.get(id)! < started.get(b)!).length;
  sub.close();
  for (const id of a) {
    try {
      runtime.cancelTask(id);
    } catch {
      /* finished */
    }
  }
  await close();
  return {
    a_queued: backlog,
    tokens_per_task: tokens,
    b_first_task_queue_wait_ms: round(bWait),
    one_task_ms: round(oneTask),
    b_wait_in_task_times: round(bWait / oneTask, 2),
    slot_holder_task_ms: round(ended.get(a[0])! - started.get(a[0])!),
    b_start_after_slot_free_ms: round(started.get(b)! - ended.get(a[0])!),
    a_tasks_started_before_b: aAheadOfB,
  };
}
