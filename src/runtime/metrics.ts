// Aggregate runtime metrics (what `/metrics` serves, protocols/metrics/prometheus.ts): tasks created and finished by
// door and outcome, tokens generated, time to first token and generation speed by model, queue wait, journal sync
// latency. Fed from the runtime's own task-change stream (TaskEventBus.onTaskChange: one call per committed change,
// a running task's progress is one change per delta batch, not per token), from the store's sync hook, and from the
// two create paths. Nothing per task leaves this file: the per-task state it keeps (to time a task's steps) is
// dropped when the task finishes, and a snapshot holds counts, sums and buckets only, no prompts, ids or paths.
//
// Durations are measured with the monotonic clock when the change is told (after its batch is durable), not with the
// runtime's `now` (which tests may stop). Time to first token counts from the moment the attempt was queued (its
// creation, or its requeue), as vLLM's `time_to_first_token_seconds` counts from arrival; the queue wait is a
// histogram of its own. Generation speed is the attempt's output tokens over the time from `running` to its end, for
// succeeded tasks. Tasks first seen after a restart (queued by recovery before the runtime listens) count their
// tokens from then on, and have no queue wait or first-token time.
//
// Embeddings calls (runtime/embeddings.ts) are direct calls, not tasks: each one that named a model served here is
// counted by model and outcome (succeeded, or failed: refused or broken), with the inputs and tokens it embedded.
import type { TaskOrigin, TaskRecord, TaskStatus } from './task';
import { isTerminal } from './task';

/** Bucket upper bounds (seconds, or tokens per second), the `le` labels of each histogram. */
export const METRIC_BUCKETS = {
  timeToFirstTokenSeconds: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
  tokensPerSecond: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000],
  queueWaitSeconds: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 60, 300],
  journalSyncSeconds: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5],
} as const;

export interface HistogramSnapshot {
  /** Upper bounds, ascending (the +Inf bucket is `count`). */
  bounds: readonly number[];
  /** Cumulative counts, one per bound. */
  cumulative: number[];
  sum: number;
  count: number;
}

export interface MetricsSnapshot {
  /** Tasks in the store by status, every principal (expired ones not counted). */
  tasksByStatus: Record<TaskStatus, number>;
  created: Array<{ origin: TaskOrigin; n: number }>;
  finished: Array<{ origin: TaskOrigin; outcome: TaskStatus; n: number }>;
  outputTokens: number;
  timeToFirstToken: Array<{ model: string; h: HistogramSnapshot }>;
  tokensPerSecond: Array<{ model: string; h: HistogramSnapshot }>;
  queueWait: HistogramSnapshot;
  journalSync: HistogramSnapshot;
  /** Checkpoints and journals on disk. */
  storeBytes: number;
  /** The queue now: tasks waiting per model and per principal, and how long the oldest has waited. */
  queue: QueueDepths;
  /** Embeddings calls by model: answered and failed calls, inputs and tokens embedded (succeeded calls'). */
  embeddings: EmbeddingCounts[];
}

export interface EmbeddingCounts {
  model: string;
  succeeded: number;
  failed: number;
  inputs: number;
  tokens: number;
}

export interface QueueDepths {
  byModel: Array<{ model: string; n: number }>;
  byPrincipal: Array<{ principal: string; n: number }>;
  oldestWaitSeconds: number;
}

export class Histogram {
  private readonly counts: number[];
  private sum = 0;
  private count = 0;

  constructor(private readonly bounds: readonly number[]) {
    this.counts = bounds.map(() => 0);
  }

  observe(v: number): void {
    this.sum += v;
    this.count++;
    const i = this.bounds.findIndex((b) => v <= b);
    if (i >= 0) this.counts[i]++;
  }

  snapshot(): HistogramSnapshot {
    let acc = 0;
    return { bounds: this.bounds, cumulative: this.counts.map((c) => (acc += c)), sum: this.sum, count: this.count };
  }
}

/** What is kept per unfinished task while it is watched; dropped at its end. */
interface Watch {
  status: TaskStatus;
  attempt: number;
  /** Output tokens of the attempt already counted. */
  tokens: number;
  /** When the attempt was queued (monotonic ms), until it leaves the queue. */
  queuedAt?: number;
  /** Until its first token: the attempt's queue time, for time to first token. */
  arrivedAt?: number;
  runningAt?: number;
}

export class RuntimeMetrics {
  private readonly watched = new Map<string, Watch>();
  private readonly created = new Map<TaskOrigin, number>();
  private readonly finished = new Map<string, { origin: TaskOrigin; outcome: TaskStatus; n: number }>();
  private outputTokens = 0;
  private readonly ttft = new Map<string, Histogram>();
  private readonly tps = new Map<string, Histogram>();
  private readonly queueWait = new Histogram(METRIC_BUCKETS.queueWaitSeconds);
  private readonly journalSync = new Histogram(METRIC_BUCKETS.journalSyncSeconds);
  private readonly embeddings = new Map<string, EmbeddingCounts>();

  constructor(private readonly clock: () => number = () => performance.now()) {}

  /** A task was created (once it is durable). */
  taskCreated(task: TaskRecord): void {
    this.created.set(task.origin, (this.created.get(task.origin) ?? 0) + 1);
  }

  /** One journal sync took `ms`. */
  syncTook(ms: number): void {
    this.journalSync.observe(ms / 1000);
  }

  /** An embeddings call on `model` ended: answered with `inputs` vectors of `tokens` tokens in all, or failed. */
  embeddingCall(model: string, outcome: { inputs: number; tokens: number } | 'failed'): void {
    let c = this.embeddings.get(model);
    if (!c) this.embeddings.set(model, (c = { model, succeeded: 0, failed: 0, inputs: 0, tokens: 0 }));
    if (outcome === 'failed') {
      c.failed++;
      return;
    }
    c.succeeded++;
    c.inputs += outcome.inputs;
    c.tokens += outcome.tokens;
  }

  /** Every committed task change (TaskEventBus.onTaskChange). */
  taskChanged(task: TaskRecord, deleted: boolean): void {
    let w = this.watched.get(task.id);
    if (deleted) {
      if (w) this.watched.delete(task.id);
      return;
    }
    const now = this.clock();
    if (!w) {
      if (isTerminal(task.status)) return;
      // First seen: a new task (0 tokens, queued), or one queued by recovery before the runtime listened.
      w = { status: task.status, attempt: task.attempt, tokens: task.outputTokens };
      if (task.status === 'queued') w.queuedAt = w.arrivedAt = now;
      this.watched.set(task.id, w);
      return;
    }
    if (task.attempt !== w.attempt || (task.status === 'queued' && w.status !== 'queued')) {
      // Back in the queue (a new attempt, or the same one requeued): its clocks start again.
      w.attempt = task.attempt;
      w.tokens = Math.min(w.tokens, task.outputTokens);
      w.queuedAt = w.arrivedAt = now;
      w.runningAt = undefined;
    }
    if (w.queuedAt !== undefined && task.status !== 'queued') {
      this.queueWait.observe((now - w.queuedAt) / 1000);
      w.queuedAt = undefined;
    }
    if (task.status === 'running' && w.runningAt === undefined) w.runningAt = now;
    if (task.outputTokens > w.tokens) {
      if (w.arrivedAt !== undefined && w.tokens === 0)
        histogramOf(this.ttft, task.model, METRIC_BUCKETS.timeToFirstTokenSeconds).observe((now - w.arrivedAt) / 1000);
      w.arrivedAt = undefined;
      this.outputTokens += task.outputTokens - w.tokens;
      w.tokens = task.outputTokens;
    } else if (task.outputTokens < w.tokens) {
      w.tokens = task.outputTokens;
    }
    w.status = task.status;
    if (!isTerminal(task.status)) return;
    this.watched.delete(task.id);
    const key = `${task.origin} ${task.status}`;
    const f = this.finished.get(key);
    if (f) f.n++;
    else this.finished.set(key, { origin: task.origin, outcome: task.status, n: 1 });
    if (task.status === 'succeeded' && w.runningAt !== undefined && task.outputTokens > 0 && now > w.runningAt) {
      histogramOf(this.tps, task.model, METRIC_BUCKETS.tokensPerSecond).observe(task.outputTokens / ((now - w.runningAt) / 1000));
    }
  }

  snapshot(tasksByStatus: Record<TaskStatus, number>, storeBytes: number, queue: QueueDepths): MetricsSnapshot {
    const byModel = (m: Map<string, Histogram>) => [...m].sort(([a], [b]) => (a < b ? -1 : 1)).map(([model, h]) => ({ model, h: h.snapshot() }));
    return {
      tasksByStatus,
      created: [...this.created].map(([origin, n]) => ({ origin, n })),
      finished: [...this.finished.values()].map((f) => ({ ...f })),
      outputTokens: this.outputTokens,
      timeToFirstToken: byModel(this.ttft),
      tokensPerSecond: byModel(this.tps),
      queueWait: this.queueWait.snapshot(),
      journalSync: this.journalSync.snapshot(),
      storeBytes,
      queue,
      embeddings: [...this.embeddings.values()].sort((a, b) => (a.model < b.model ? -1 : 1)).map((c) => ({ ...c })),
    };
  }
}

function histogramOf(m: Map<string, Histogram>, model: string, bounds: readonly number[]): Histogram {
  let h = m.get(model);
  if (!h) m.set(model, (h = new Histogram(bounds)));
  return h;
}
