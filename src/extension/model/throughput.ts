// Tokens per second, per task and across the runtime, from the task changes every source already sends (each
// carries the task's output token count). Pure: no vscode; the clock is passed in.
//
// Per task: a moving window (WINDOW_MS) over the recent (time, tokens) samples, for the tree row's live figure.
// Across tasks: tokens added per BUCKET_MS bucket over HISTORY_MS, for the overview's chart. Only growth of a
// task's count is counted, so a retry (count back to 0) or a replayed change never adds negative or double tokens.
import { isTerminal, type TaskStatus } from '../../runtime/task';

export const WINDOW_MS = 5_000;
export const BUCKET_MS = 5_000;
export const HISTORY_MS = 5 * 60_000;
const TASK_LIMIT = 1_000;

interface TaskSamples {
  /** [ms, tokens], oldest first, within WINDOW_MS of the newest. */
  samples: Array<[number, number]>;
  last: number;
  active: boolean;
}

export class Throughput {
  private readonly tasks = new Map<string, TaskSamples>();
  /** bucket index (floor(ms / BUCKET_MS)) → tokens added in it. */
  private readonly buckets = new Map<number, number>();

  /** A task changed: its status and output token count now. */
  record(id: string, status: TaskStatus, outputTokens: number, now: number): void {
    let t = this.tasks.get(id);
    if (!t) {
      if (this.tasks.size >= TASK_LIMIT) this.prune();
      // The first sight of a task gives its starting count: tokens made before we watched are not this minute's.
      t = { samples: [], last: outputTokens, active: false };
      this.tasks.set(id, t);
    }
    const active = status === 'running' || status === 'input_required';
    if (outputTokens > t.last) {
      const b = Math.floor(now / BUCKET_MS);
      this.buckets.set(b, (this.buckets.get(b) ?? 0) + (outputTokens - t.last));
    }
    t.last = outputTokens;
    t.active = active;
    if (active) {
      t.samples.push([now, outputTokens]);
      while (t.samples.length > 2 && now - t.samples[1]![0] > WINDOW_MS) t.samples.shift();
    } else t.samples = [];
    if (isTerminal(status)) this.tasks.delete(id);
    this.trim(now);
  }

  forget(id: string): void {
    this.tasks.delete(id);
  }

  /** The task's tokens/s over the last WINDOW_MS, while it runs; undefined before two samples or when it is idle. */
  rate(id: string, now: number): number | undefined {
    const t = this.tasks.get(id);
    if (!t?.active || t.samples.length < 2) return undefined;
    const [t0, n0] = t.samples[0]!;
    const [, n1] = t.samples[t.samples.length - 1]!;
    const span = Math.max(now - t0, 1);
    if (span > WINDOW_MS * 3) return 0; // stalled: nothing written for a while
    return ((n1 - n0) / span) * 1000;
  }

  /** Tasks running now with their rates (for the overview's list). */
  running(now: number): Array<{ id: string; rate: number | undefined }> {
    return [...this.tasks.entries()].filter(([, t]) => t.active).map(([id]) => ({ id, rate: this.rate(id, now) }));
  }

  /** Tokens/s across all tasks per bucket, oldest first, covering the last HISTORY_MS up to now (the bucket now filling is left out). */
  series(now: number): number[] {
    const end = Math.floor(now / BUCKET_MS);
    const n = Math.floor(HISTORY_MS / BUCKET_MS);
    const out: number[] = [];
    for (let b = end - n; b < end; b++) out.push(((this.buckets.get(b) ?? 0) / BUCKET_MS) * 1000);
    return out;
  }

  private trim(now: number): void {
    const oldest = Math.floor((now - HISTORY_MS) / BUCKET_MS) - 1;
    for (const b of this.buckets.keys()) if (b < oldest) this.buckets.delete(b);
  }

  private prune(): void {
    for (const [id, t] of this.tasks) if (!t.active) this.tasks.delete(id);
  }
}
