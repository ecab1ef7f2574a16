// Which task runs when: the queue, concurrency per model (or capacity group), the runs in progress, deadlines, and
// tasks whose run died because the store could not be written.
// The queue is fair between principals: each principal's tasks wait in their own FIFO, and a free slot of a capacity
// group goes to the principal that group served least recently (one that never was, or not since its tasks last
// drained, first; ties in queue order). So a client's backlog delays another client's first task by at most the one
// task that holds the slot; with one principal it is the plain FIFO it always was (bench `fair_share`).
// Within one principal's line, priority decides (higher first, raised by waiting: queue.ts), then queue order. The
// same order, simulated, gives each queued task its position and expected start (queueInfo), and a task whose place
// moved hears of it on its event stream (`task_runtime:task.queue`, at most every QUEUE_NOTICE_MIN_MS per task).
import { join } from 'node:path';
import type { ModelBackend } from './backend';
import { GenerationRun, type GenerationSettings, type RequeueRequest, type ResumePoint, type StopReason } from './generation';
import { problem } from './problems';
import { DEFAULT_PRIORITY_AGING_MS, effectivePriority, expectedStarts, PRIORITY, RunDurations, type QueueInfo } from './queue';
import type { TaskStore } from './taskStore';
import type { TaskTransitions } from './transitions';
import { isTerminal, type TaskRecord } from './task';

const MAX_TIMER_MS = 2 ** 31 - 1;
/** How often tasks orphaned by a failed store write are retried while writes keep failing. */
const ORPHAN_RETRY_MS = 1000;
/** Queue positions are simulated again at most this often while nothing in the queue changed (aging moves them). */
const QUEUE_SNAPSHOT_MS = 1000;
/** A queued task whose place moved is told (an event) at most this often, and at most so many tasks per tick. */
const QUEUE_NOTICE_TICK_MS = 1000;
const QUEUE_NOTICE_MIN_MS = 5000;
const QUEUE_NOTICES_PER_TICK = 64;

export interface SchedulerOptions {
  store: TaskStore;
  transitions: TaskTransitions;
  backend: ModelBackend;
  dataDir: string;
  maxConcurrentPerModel: number;
  deltaFlushMs?: number;
  snapshotEveryMs?: number;
  snapshotMinReevalMs?: number;
  /** The runtime's clock (task times); deadlines are compared against it. */
  now: () => number;
  backendRetry?: Partial<BackendRetryPolicy>;
  /** Waiting this long raises a queued task's priority one level (queue.ts; default 10 s, 0 = never). */
  priorityAgingMs?: number;
  log?: (msg: string) => void;
}

/**
 * How long a task waits, queued, for a backend that is unavailable (a remote engine that does not answer) before it
 * fails with `backend_unavailable`: `attempts` runs after the first, `baseMs` doubling up to `maxMs` between them (a
 * backend's Retry-After raises the wait, up to `maxMs`). Defaults 8 × 1 s … 30 s: about 2 minutes, long enough for a
 * llama.cpp server restart (seconds) and most vLLM restarts of small models, short enough that a dead engine shows.
 * The same budget bounds re-runs after an engine died mid-output (on_restart `retry`).
 */
export interface BackendRetryPolicy {
  attempts: number;
  baseMs: number;
  maxMs: number;
}
export const DEFAULT_BACKEND_RETRY: BackendRetryPolicy = { attempts: 8, baseMs: 1000, maxMs: 30_000 };

/**
 * A resume never needs a snapshot (prompt + delivered text can always be evaluated again), so one is only worth
 * its cost when evaluating again would be slow. Measured (2-core machine, CPU, 1 thread; docs/runtime.md): demo
 * model 1 024 tokens re-evaluated in 150 ms vs a 0.5 MB state; 85 MB model 8.7 s vs a 16.8 MB state saved in
 * 88 ms; a 643 MB model on a GPU re-evaluates thousands of tokens/s while its state is 131 KB per token. So a
 * snapshot is taken (at most every snapshotEveryMs) only once re-evaluating what the last one does not cover
 * would take longer than this: resume then costs at most about this much on top of loading the state.
 */
export const DEFAULT_SNAPSHOT_MIN_REEVAL_MS = 1000;

interface Queued {
  id: string;
  model: string;
  principal: string;
  /** Queue order: tasks put back at the front of their principal's line (retries, orphans) get lower numbers. */
  seq: number;
  priority: number;
  /** When it was created (the runtime's clock): aging counts from here. */
  since: number;
}

/** What a queued task was last told of its place (the `task_runtime:task.queue` event). */
interface Told {
  at: number;
  position: number;
  expectedStartAt: number | null;
}

export class Scheduler {
  /** Queued tasks by id, and each principal's in order: scheduling needs no store read per queued task. */
  private readonly queued = new Map<string, Queued>();
  private readonly lines = new Map<string, Queued[]>();
  private lastSeq = 0;
  private firstSeq = 0;
  /** Per capacity group, when each principal was last served there (a tick); forgotten once it holds nothing. */
  private readonly served = new Map<string, Map<string, number>>();
  private tick = 0;
  private readonly running = new Map<string, GenerationRun>();
  /** The principal of each running task (for per-principal counts). */
  private readonly runningOwners = new Map<string, string>();
  /** When each run started (the runtime's clock), and how long recent runs of each model took. */
  private readonly startedAt = new Map<string, number>();
  private readonly durations = new RunDurations();
  /** Bumped by every change of the queue or the runs: the position snapshot is simulated again after one. */
  private version = 0;
  private snapshot: { at: number; version: number; infos: Map<string, QueueInfo> } | undefined;
  private readonly told = new Map<string, Told>();
  private noticeTimer: NodeJS.Timeout | undefined;
  private readonly resumePoints = new Map<string, ResumePoint>();
  private readonly deadlines = new Map<string, NodeJS.Timeout>();
  /** Tasks whose run ended because the store could not be written: settled once writes work again. */
  private readonly orphaned = new Set<string>();
  private orphanTimer: NodeJS.Timeout | undefined;
  /** Tasks waiting (queued) for an unavailable backend: how many times they were put back, and the timer. */
  private readonly backendRetries = new Map<string, number>();
  private readonly retryTimers = new Map<string, NodeJS.Timeout>();
  private readonly retryOwners = new Map<string, string>();
  private readonly retryPolicy: BackendRetryPolicy;
  private readonly settings: GenerationSettings;
  private readonly agingMs: number;
  private closed = false;

  constructor(private readonly o: SchedulerOptions) {
    this.settings = {
      deltaFlushMs: o.deltaFlushMs ?? 16,
      snapshotDir: join(o.dataDir, 'snapshots'),
      snapshotEveryMs: o.snapshotEveryMs ?? 2000,
      snapshotMinReevalMs: o.snapshotMinReevalMs ?? DEFAULT_SNAPSHOT_MIN_REEVAL_MS,
      now: o.now,
      log: o.log,
    };
    this.retryPolicy = { ...DEFAULT_BACKEND_RETRY, ...o.backendRetry };
    this.agingMs = o.priorityAgingMs ?? DEFAULT_PRIORITY_AGING_MS;
    o.backend.onCapacityChange?.(() => this.poke());
  }

  get queueLength(): number {
    return this.queued.size + this.retryTimers.size;
  }

  /**
   * A principal's tasks held here: queued, waiting to retry an unavailable backend, or running (a run waiting for
   * its client's input included). A task waiting for input with no run behind it (after a restart) holds nothing.
   */
  unfinishedOf(principal: string): number {
    let n = this.lines.get(principal)?.length ?? 0;
    for (const p of this.runningOwners.values()) if (p === principal) n++;
    for (const p of this.retryOwners.values()) if (p === principal) n++;
    return n;
  }

  /** Queues a task (with the snapshot to resume from, after a restart) and arms its deadline. */
  enqueue(task: TaskRecord, resume?: ResumePoint): void {
    if (resume) this.resumePoints.set(task.id, resume);
    this.push(task, false);
    this.armDeadline(task);
    queueMicrotask(() => this.pump());
  }

  /** Into its principal's line: at the end, or at the front (a task that already had its turn). */
  private push(task: Pick<TaskRecord, 'id' | 'model' | 'principal' | 'priority' | 'createdAt'>, front: boolean): void {
    if (this.queued.has(task.id)) return;
    const q: Queued = {
      id: task.id,
      model: task.model,
      principal: task.principal,
      seq: front ? --this.firstSeq : ++this.lastSeq,
      priority: task.priority,
      since: task.createdAt,
    };
    this.version++;
    this.scheduleNotices();
    this.queued.set(q.id, q);
    const line = this.lines.get(q.principal);
    if (!line) this.lines.set(q.principal, [q]);
    else if (front) line.unshift(q);
    else line.push(q);
  }

  private unqueue(id: string): void {
    const q = this.queued.get(id);
    if (!q) return;
    this.version++;
    this.queued.delete(id);
    this.told.delete(id);
    if (this.queued.size) this.scheduleNotices();
    const line = this.lines.get(q.principal)!;
    line.splice(line.indexOf(q), 1);
    if (line.length === 0) this.lines.delete(q.principal);
  }

  /**
   * A task waiting for input with no run behind it (after a restart): nothing to schedule until its answers are in
   * (runtime.provideInput queues it then); only its deadline is armed.
   */
  park(task: TaskRecord): void {
    this.armDeadline(task);
  }

  /** Whether a run of this task is waiting for its client's input right now. */
  hasInputWaiter(id: string): boolean {
    return this.running.get(id)?.awaitingInput === true;
  }

  /** Hands the answered round to the run waiting for it (after the runtime recorded it); false when none waits. */
  inputAnswered(id: string): boolean {
    return this.running.get(id)?.inputAnswered() ?? false;
  }

  /**
   * Where a queued task stands: its place in the order its capacity group will start tasks, every principal's
   * counted (how many are ahead says no more than /metrics' queue depth), and its expected start; null when it is
   * not queued here (also while it waits to retry an unavailable backend).
   */
  queueInfo(id: string): QueueInfo | null {
    if (!this.queued.has(id)) return null;
    return this.positions().get(id) ?? null;
  }

  /**
   * A queued task of the principal goes to the front of its line with the highest priority ("run next"); stored by
   * the caller. False when it is not queued here.
   */
  runNext(id: string): boolean {
    const q = this.queued.get(id);
    if (!q) return false;
    const line = this.lines.get(q.principal)!;
    line.splice(line.indexOf(q), 1);
    q.seq = --this.firstSeq;
    q.priority = PRIORITY.max;
    line.unshift(q);
    this.version++;
    this.scheduleNotices();
    return true;
  }

  /** Queued tasks per model and per principal, and the oldest wait's start (for /metrics). */
  queueDepths(): { byModel: Map<string, number>; byPrincipal: Map<string, number>; oldestSince: number | null } {
    const byModel = new Map<string, number>();
    const byPrincipal = new Map<string, number>();
    let oldestSince: number | null = null;
    for (const q of this.queued.values()) {
      byModel.set(q.model, (byModel.get(q.model) ?? 0) + 1);
      byPrincipal.set(q.principal, (byPrincipal.get(q.principal) ?? 0) + 1);
      if (oldestSince === null || q.since < oldestSince) oldestSince = q.since;
    }
    return { byModel, byPrincipal, oldestSince };
  }

  /** The competing priority of a queued task now. */
  private effective(q: Queued, now: number): number {
    return effectivePriority(q.priority, now - q.since, this.agingMs);
  }

  /** Negative when `a` goes before `b` in their principal's line now: higher competing priority, then queue order. */
  private compare(a: Queued, b: Queued, now: number): number {
    return this.effective(b, now) - this.effective(a, now) || a.seq - b.seq;
  }

  /**
   * The order each capacity group will start its queued tasks, as pump picks them while slots free one at a time:
   * principals take turns (least recently served first, ties by their first task's queue order), each giving its
   * best task for the group (priority, then queue order).
   */
  private startOrder(now: number): Map<string, { limit: number; order: Queued[] }> {
    const groups = new Map<string, { limit: number; lines: Map<string, Queued[]> }>();
    for (const [principal, line] of this.lines) {
      for (const q of line) {
        const { group, limit } = this.slot(q.model);
        let g = groups.get(group);
        if (!g) groups.set(group, (g = { limit, lines: new Map() }));
        let l = g.lines.get(principal);
        if (!l) g.lines.set(principal, (l = []));
        l.push(q);
      }
    }
    const out = new Map<string, { limit: number; order: Queued[] }>();
    for (const [group, g] of groups) {
      const lines = [...g.lines.entries()].map(([principal, l]) => ({
        last: this.served.get(group)?.get(principal) ?? -1,
        l: l.sort((a, b) => this.compare(a, b, now)),
      }));
      lines.sort((a, b) => a.last - b.last || a.l[0].seq - b.l[0].seq);
      const order: Queued[] = [];
      for (let round = 0; ; round++) {
        let any = false;
        for (const { l } of lines) {
          if (round < l.length) {
            order.push(l[round]);
            any = true;
          }
        }
        if (!any) break;
      }
      out.set(group, { limit: g.limit, order });
    }
    return out;
  }

  /** Every queued task's place and expected start, simulated again when the queue changed or time moved on. */
  private positions(): Map<string, QueueInfo> {
    const now = this.o.now();
    const s = this.snapshot;
    if (s && s.version === this.version && now >= s.at && now - s.at < QUEUE_SNAPSHOT_MS) return s.infos;
    const infos = new Map<string, QueueInfo>();
    const runsByGroup = new Map<string, Array<number | null>>();
    for (const [id, run] of this.running) {
      if (run.awaitingInput) continue;
      const group = this.slot(run.model).group;
      const typical = this.durations.typical(run.model);
      const left = typical === null ? null : typical - (now - (this.startedAt.get(id) ?? now));
      let r = runsByGroup.get(group);
      if (!r) runsByGroup.set(group, (r = []));
      r.push(left);
    }
    for (const [group, { limit, order }] of this.startOrder(now)) {
      const busy = runsByGroup.get(group) ?? [];
      const starts = busy.includes(null)
        ? order.map(() => null)
        : expectedStarts(
            busy as number[],
            limit,
            order.map((q) => this.durations.typical(q.model)),
          );
      order.forEach((q, i) => {
        const at = starts[i];
        infos.set(q.id, { position: i + 1, priority: q.priority, expectedStartAt: at === null ? null : now + at, expectedWaitMs: at });
      });
    }
    this.snapshot = { at: now, version: this.version, infos };
    return infos;
  }

  /** Queued tasks whose place moved hear of it, a tick after the queue changed (batched, rate-limited per task). */
  private scheduleNotices(): void {
    if (this.noticeTimer || this.closed) return;
    this.noticeTimer = setTimeout(() => {
      this.noticeTimer = undefined;
      this.tellPlaces();
    }, QUEUE_NOTICE_TICK_MS);
    this.noticeTimer.unref();
  }

  private tellPlaces(): void {
    if (this.closed || this.queued.size === 0) return;
    const now = this.o.now();
    const infos = [...this.positions()].sort((a, b) => a[1].position - b[1].position);
    const moves: Array<{ id: string; info: QueueInfo }> = [];
    let pending = false;
    for (const [id, info] of infos) {
      const last = this.told.get(id);
      const moved =
        !last ||
        last.position !== info.position ||
        (last.expectedStartAt === null) !== (info.expectedStartAt === null) ||
        Math.abs((last.expectedStartAt ?? 0) - (info.expectedStartAt ?? 0)) > Math.max(2000, 0.25 * Math.max(0, (info.expectedStartAt ?? now) - now));
      if (!moved) continue;
      if ((last && now - last.at < QUEUE_NOTICE_MIN_MS) || moves.length >= QUEUE_NOTICES_PER_TICK) {
        pending = true;
        continue;
      }
      moves.push({ id, info });
    }
    try {
      this.o.transitions.queueMoved(moves);
    } catch (e) {
      this.o.log?.(`queue notices not written: ${(e as Error).message}`);
      return;
    }
    for (const { id, info } of moves) this.told.set(id, { at: now, position: info.position, expectedStartAt: info.expectedStartAt });
    if (pending) this.scheduleNotices();
  }

  /** Forgets a task that will not run (cancelled while queued, expired, deleted). */
  remove(id: string): void {
    this.unqueue(id);
    this.resumePoints.delete(id);
    this.clearDeadline(id);
    this.clearRetry(id);
  }

  private clearRetry(id: string): void {
    const timer = this.retryTimers.get(id);
    if (timer) clearTimeout(timer);
    this.retryTimers.delete(id);
    this.retryOwners.delete(id);
    this.backendRetries.delete(id);
  }

  /** Stops a run in progress; false when nothing runs the task here. */
  stop(id: string, reason: StopReason): boolean {
    const run = this.running.get(id);
    run?.stop(reason);
    return run !== undefined;
  }

  /** How many runs of this model may run at once (its capacity group's slots). */
  capacityOf(model: string): number {
    return this.slot(model).limit;
  }

  /** The capacity a model's runs count against: its own (per-model limit) or its backend's group (an engine). */
  private slot(model: string): { group: string; limit: number } {
    return this.o.backend.concurrency?.(model) ?? { group: `model:${model}`, limit: this.o.maxConcurrentPerModel };
  }

  private busyGroups(): Map<string, number> {
    const m = new Map<string, number>();
    for (const run of this.running.values()) {
      // A run waiting for its client holds no slot: clients may take minutes to answer, or never (the run may then
      // briefly exceed the limit when its answers arrive).
      if (run.awaitingInput) continue;
      const g = this.slot(run.model).group;
      m.set(g, (m.get(g) ?? 0) + 1);
    }
    return m;
  }

  /**
   * Starts what fits: while some capacity group has a free slot and a queued task, the slot goes to the principal
   * that group served least recently, and of that principal's tasks for the group the first in its line.
   */
  private pump(): void {
    if (this.closed) return;
    const busy = this.busyGroups();
    const slots = new Map<string, { group: string; limit: number }>();
    const slotOf = (model: string) => {
      let s = slots.get(model);
      if (!s) slots.set(model, (s = this.slot(model)));
      return s;
    };
    const free = (group: string, limit: number) => (busy.get(group) ?? 0) < Math.max(1, limit);
    for (;;) {
      let best: { q: Queued; group: string; last: number } | undefined;
      const now = this.o.now();
      for (const line of this.lines.values()) {
        // Each principal's best task per group with a free slot (priority, then queue order); a busy group does not
        // hold up its other tasks.
        const first = new Map<string, Queued>();
        for (const q of line) {
          const { group, limit } = slotOf(q.model);
          if (!free(group, limit)) continue;
          const f = first.get(group);
          if (!f || this.compare(q, f, now) < 0) first.set(group, q);
        }
        for (const [group, q] of first) {
          const last = this.served.get(group)?.get(q.principal) ?? -1;
          if (!best || last < best.last || (last === best.last && q.seq < best.q.seq)) best = { q, group, last };
        }
      }
      if (!best) break;
      const { q, group } = best;
      this.unqueue(q.id);
      const task = this.o.store.getTask(q.id);
      if (!task || task.status !== 'queued') continue;
      busy.set(group, (busy.get(group) ?? 0) + 1);
      let served = this.served.get(group);
      if (!served) this.served.set(group, (served = new Map()));
      served.set(q.principal, ++this.tick);
      this.start(task);
    }
    this.forgetIdlePrincipals();
  }

  /** A principal holding nothing here starts afresh next time: its turn is not held against it. */
  private forgetIdlePrincipals(): void {
    for (const [group, served] of this.served) {
      for (const principal of served.keys()) {
        if (this.lines.has(principal)) continue;
        if ([...this.runningOwners.values()].includes(principal)) continue;
        served.delete(principal);
      }
      if (served.size === 0) this.served.delete(group);
    }
  }

  /** Capacity may have grown (an engine endpoint came back): start what now fits. */
  poke(): void {
    queueMicrotask(() => this.pump());
  }

  private start(task: TaskRecord): void {
    const resume = this.resumePoints.get(task.id);
    this.resumePoints.delete(task.id);
    const run = new GenerationRun(task.id, task.model, this.o.store, this.o.transitions, this.o.backend, this.settings, resume);
    run.onWaitChange = () => this.poke();
    this.running.set(task.id, run);
    this.runningOwners.set(task.id, task.principal);
    this.startedAt.set(task.id, this.o.now());
    this.version++;
    run
      .run()
      .then(() => {
        if (run.requeue) this.requeueAfterBackendError(task.id, run.requeue);
      })
      .catch((e) => {
        // A store failure mid-run left the task non-terminal with nothing running it: settle it when writes work.
        this.o.log?.(`task ${task.id}: run aborted: ${(e as Error).message}`);
        this.orphaned.add(task.id);
        this.scheduleOrphanRetry();
      })
      .finally(() => {
        this.running.delete(task.id);
        this.runningOwners.delete(task.id);
        const began = this.startedAt.get(task.id);
        this.startedAt.delete(task.id);
        this.version++;
        const t = this.o.store.getTask(task.id);
        if (!t || isTerminal(t.status)) {
          this.clearDeadline(task.id);
          this.clearRetry(task.id);
        }
        // A run that ended its task times its model (a run put back for a retry or a shutdown does not).
        if (t && isTerminal(t.status) && began !== undefined) this.durations.record(task.model, this.o.now() - began);
        if (this.queued.size) this.scheduleNotices();
        this.pump();
      });
  }

  /**
   * The backend could not run the task (unreachable engine) or was cut off: back to `queued` with a status message
   * saying why and when it is tried again, up to the retry policy's attempts; then failed with `backend_unavailable`.
   */
  private requeueAfterBackendError(id: string, r: RequeueRequest): void {
    const { transitions, store } = this.o;
    const current = store.getTask(id);
    if (!current || isTerminal(current.status) || this.closed) return;
    if (current.status === 'cancelling') {
      transitions.cancelled(id, r.delivered);
      return;
    }
    const n = (this.backendRetries.get(id) ?? 0) + 1;
    const { attempts, baseMs, maxMs } = this.retryPolicy;
    if (n > attempts) {
      const detail = `${r.reason} Gave up after ${attempts} retries.`;
      transitions.fail(id, problem('backend_unavailable', detail), r.delivered);
      this.clearRetry(id);
      return;
    }
    this.backendRetries.set(id, n);
    const waitMs = Math.min(maxMs, Math.max(baseMs * 2 ** (n - 1), r.retryAfterMs ?? 0));
    const statusMessage = `waiting for the backend: ${r.reason} (retry ${n} of ${attempts} in ${formatWait(waitMs)})`;
    if (r.newAttempt) {
      transitions.newAttempt(current, () => statusMessage);
    } else {
      transitions.requeue(current, statusMessage);
      const { text, tokens, messageId, logprobs, segments } = r.delivered;
      if (r.resume && messageId)
        this.resumePoints.set(id, { text, outputTokens: tokens, messageId, ...(logprobs ? { logprobs } : {}), ...(segments ? { segments } : {}) });
    }
    const timer = setTimeout(() => {
      this.retryTimers.delete(id);
      this.retryOwners.delete(id);
      const t = store.getTask(id);
      if (!t || t.status !== 'queued' || this.closed) return;
      this.push(t, true);
      this.pump();
    }, waitMs);
    timer.unref();
    this.retryTimers.set(id, timer);
    this.retryOwners.set(id, current.principal);
  }

  private scheduleOrphanRetry(): void {
    if (this.orphanTimer || this.closed) return;
    this.orphanTimer = setTimeout(() => {
      this.orphanTimer = undefined;
      this.settleOrphans();
    }, ORPHAN_RETRY_MS);
    this.orphanTimer.unref();
  }

  /**
   * Resolves orphaned tasks: one that never left the queue in the store waits its turn again, a stopping one is
   * cancelled, a started one fails with `store_unwritable` (its received text kept). Retried while writes fail.
   */
  private settleOrphans(): void {
    const { store, transitions } = this.o;
    for (const id of [...this.orphaned]) {
      if (this.closed) return;
      if (this.running.has(id)) continue;
      const t = store.getTask(id);
      try {
        if (t && t.status === 'queued') {
          this.push(t, true);
        } else if (t && t.status === 'cancelling') {
          transitions.cancelled(id, transitions.delivered(t));
        } else if (t && !isTerminal(t.status)) {
          const detail = 'The task store could not be written while the task ran (disk full or not writable); the run was stopped.';
          transitions.fail(id, problem('store_unwritable', detail), transitions.delivered(t));
        }
        this.orphaned.delete(id);
        const settled = store.getTask(id);
        if (!settled || isTerminal(settled.status)) this.clearDeadline(id);
      } catch (e) {
        this.o.log?.(`task ${id}: still cannot be settled: ${(e as Error).message}`);
        this.scheduleOrphanRetry();
        return;
      }
    }
    this.pump();
  }

  private armDeadline(task: TaskRecord): void {
    if (task.deadlineAt === null || isTerminal(task.status)) return;
    // One timer per task (a task waiting for input after a restart is armed when parked and again when queued).
    this.clearDeadline(task.id);
    const fire = () => {
      this.deadlines.delete(task.id);
      const t = this.o.store.getTask(task.id);
      if (!t || isTerminal(t.status)) return;
      if (t.deadlineAt !== null && t.deadlineAt > this.o.now()) return this.armDeadline(t);
      if (this.stop(task.id, 'deadline')) return;
      const { transitions } = this.o;
      if (t.status === 'queued') {
        this.remove(t.id);
        transitions.fail(t.id, problem('deadline_exceeded', 'The task did not start before its deadline.'));
      } else if (t.status === 'input_required') {
        // Waiting for input with no run behind it (after a restart).
        transitions.fail(t.id, problem('deadline_exceeded', 'The task did not finish before its deadline.'), transitions.delivered(t));
      }
    };
    const timer = setTimeout(fire, Math.min(Math.max(task.deadlineAt - this.o.now(), 0), MAX_TIMER_MS));
    timer.unref();
    this.deadlines.set(task.id, timer);
  }

  private clearDeadline(id: string): void {
    const t = this.deadlines.get(id);
    if (t) clearTimeout(t);
    this.deadlines.delete(id);
  }

  /** Stops every run (their tasks stay non-terminal, for restart recovery) and waits for them to end. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.orphanTimer) clearTimeout(this.orphanTimer);
    if (this.noticeTimer) clearTimeout(this.noticeTimer);
    for (const t of this.deadlines.values()) clearTimeout(t);
    for (const t of this.retryTimers.values()) clearTimeout(t);
    const runs = [...this.running.values()];
    for (const run of runs) run.stop('shutdown');
    await Promise.allSettled(runs.map((r) => r.done));
  }
}

function formatWait(ms: number): string {
  return ms < 1000 ? `${Math.round(ms)} ms` : `${Math.round(ms / 1000)} s`;
}
