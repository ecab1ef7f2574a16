// Per-principal guards on task creation (docs/mcp.md): a token bucket and a cap on unfinished tasks.
import type { TaskRuntimeApi } from '../../runtime/api';
import { tooManyTasks } from './errors';

export interface CreationLimits {
  /** Unfinished (non-terminal) tasks a principal may have at once, all doors together. */
  maxActiveTasksPerPrincipal: number;
  /** Token bucket: burst size and refill per second. */
  createBurst: number;
  createPerSecond: number;
}

export const DEFAULT_CREATION_LIMITS: CreationLimits = {
  maxActiveTasksPerPrincipal: 32,
  createBurst: 60,
  createPerSecond: 20,
};

interface Bucket {
  tokens: number;
  at: number;
}

export class CreationGuard {
  private readonly buckets = new Map<string, Bucket>();

  constructor(
    private readonly runtime: TaskRuntimeApi,
    readonly limits: CreationLimits,
  ) {}

  /** Throws the -32029 error when the principal may not create another task now; otherwise takes a token. */
  admit(principal: string): void {
    const counts = this.runtime.countTasks(principal).byStatus;
    const active = counts.queued + counts.loading + counts.running + counts.input_required + counts.cancelling;
    if (active >= this.limits.maxActiveTasksPerPrincipal) {
      throw tooManyTasks(
        `Too many unfinished tasks: ${active} of at most ${this.limits.maxActiveTasksPerPrincipal} per client; ` +
          'wait for some to finish or cancel them',
      );
    }
    const now = Date.now();
    const b = this.buckets.get(principal) ?? { tokens: this.limits.createBurst, at: now };
    b.tokens = Math.min(this.limits.createBurst, b.tokens + ((now - b.at) / 1000) * this.limits.createPerSecond);
    b.at = now;
    if (b.tokens < 1) {
      this.buckets.set(principal, b);
      const retryAfterMs = Math.ceil(((1 - b.tokens) / this.limits.createPerSecond) * 1000);
      throw tooManyTasks(
        `Task creation rate limit: at most ${this.limits.createPerSecond}/s (burst ${this.limits.createBurst}); retry in ${retryAfterMs} ms`,
        retryAfterMs,
      );
    }
    b.tokens -= 1;
    this.buckets.set(principal, b);
  }
}
