// Priority with aging (issue #40), on the tiny model with one task at a time:
// - jump: principal A has 200 tasks queued; A's new priority-10 task should start within one task's time (the task
//   that holds the slot when it arrives: no other of A's tasks starts before it), where FIFO would put it behind all
//   200;
// - aging: a priority -10 task waits behind a steady stream of normal (0) tasks that A keeps adding; it should start
//   within the documented bound, (0 - -10) levels × the aging step (here 200 ms a level: 2 s), plus one task's time.
// The positions the runtime reports are checked against the order tasks really started.
import type { TaskRuntime } from '../src/runtime/runtime';
import { openTinyRuntime } from './tinyRuntime';
import { isTerminal, type TaskRecord } from '../src/runtime/task';

const round = (x: number, d = 1) => Math.round(x * 10 ** d) / 10 ** d;

export async function priorityBench(opts: {
  modelPath: string;
  backlog?: number;
  tokens?: number;
  agingMs?: number;
}): Promise<Record<string, number>> {
  const backlog = opts.backlog ?? 200;
  const tokens = opts.tokens ?? 16;
  const agingMs = opts.agingMs ?? 200;
  const { runtime, input, close } = await openTinyRuntime({
    modelPath: opts.modelPath,
    capacity: backlog + 50,
    tokens,
    prefix: 'tr-bench-priority-',
    options: { priorityAgingMs: agingMs },
  });
  const create = (text: string, priority?: number) => runtime.createTask({ origin: 'lmsp', principal: 'A', input: input(text), priority }).task.id;

  const started = new Map<string, number>();
  const ended = new Map<string, number>();
  const sub = runtime.onTaskChange((t: TaskRecord) => {
    if (t.status !== 'queued' && !started.has(t.id)) started.set(t.id, performance.now());
    if (isTerminal(t.status) && !ended.has(t.id)) ended.set(t.id, performance.now());
  });
  const running = (id: string) =>
    new Promise<void>((resolve) => {
      if (started.has(id)) return resolve();
      const s = runtime.onTaskChange((t) => {
        if (t.id === id && t.status !== 'queued') {
          s.close();
          resolve();
        }
      });
    });

  // 1. Jump the line.
  const a: string[] = [];
  for (let i = 0; i <= backlog; i++) a.push(create(`a ${i}`));
  await running(a[0]);
  const urgentCreated = performance.now();
  const urgent = create('urgent', 10);
  const reportedPosition = runtime.queueInfo(urgent)?.position ?? -1;
  await runtime.waitForTerminal(urgent);
  const urgentWait = started.get(urgent)! - urgentCreated;
  await runtime.waitForTerminal(a[8]);
  const starts = a
    .slice(0, 9)
    .map((id) => started.get(id)!)
    .sort((x, y) => x - y);
  const gaps = starts
    .slice(1)
    .map((t, i) => t - starts[i])
    .sort((x, y) => x - y);
  const oneTask = gaps[Math.floor(gaps.length / 2)];
  const aheadOfUrgent = a.filter((id) => started.has(id) && started.get(id)! < started.get(urgent)!).length;
  const holderMs = ended.get(a[0])! - started.get(a[0])!;
  const afterSlotFree = started.get(urgent)! - ended.get(a[0])!;
  runtime.cancelTasks({ principal: 'A', statuses: ['queued'] });
  await Promise.all(a.map((id) => runtime.waitForTerminal(id)));

  // 2. Aging: a low task against a stream that keeps 5 normal tasks queued.
  const stream: string[] = [create('stream 0'), create('stream 1')];
  await running(stream[0]);
  const lowCreated = performance.now();
  const low = create('low', -10);
  let normalsAhead = 0;
  const done = runtime.waitForTerminal(low);
  let lowDone = false;
  void done.then(() => (lowDone = true));
  while (!lowDone) {
    const queued = stream.filter((id) => !started.has(id)).length;
    for (let i = queued; i < 5; i++) stream.push(create(`stream ${stream.length}`));
    await runtime.waitForTerminal(stream.find((id) => !isTerminalNow(runtime, id))!).catch(() => undefined);
  }
  const lowWait = started.get(low)! - lowCreated;
  normalsAhead = stream.filter((id) => started.has(id) && started.get(id)! < started.get(low)! && started.get(id)! > lowCreated).length;
  runtime.cancelTasks({ principal: 'A', statuses: ['queued', 'running'] });
  sub.close();
  await close();
  const bound = 10 * agingMs + oneTask;
  return {
    a_queued: backlog,
    tokens_per_task: tokens,
    one_task_ms: round(oneTask),
    urgent_reported_position: reportedPosition,
    urgent_queue_wait_ms: round(urgentWait),
    urgent_wait_in_task_times: round(urgentWait / oneTask, 2),
    slot_holder_task_ms: round(holderMs),
    urgent_start_after_slot_free_ms: round(afterSlotFree),
    a_tasks_started_before_urgent: aheadOfUrgent,
    aging_step_ms: agingMs,
    low_queue_wait_ms: round(lowWait),
    low_aging_bound_ms: round(bound),
    low_wait_over_bound: round(lowWait / bound, 2),
    normal_tasks_started_before_low: normalsAhead,
  };
}

function isTerminalNow(runtime: TaskRuntime, id: string): boolean {
  const t = runtime.getTask(id);
  return !t || isTerminal(t.status);
}
