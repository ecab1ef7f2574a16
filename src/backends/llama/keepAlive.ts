// How long a loaded model stays in memory with no task on it (`--keep-alive`, `taskRuntime.keepAlive`): like
// Ollama's keep_alive, default 5 minutes, `0` = never unload. In the editor a loaded model is the extension host's
// memory, held for every other extension; the next task loads it again (the load's costs, calibration cached).
// The timers are injected (`KeepAliveTimers`) so that a test drives the clock instead of sleeping.

/** Ollama's default. */
export const DEFAULT_KEEP_ALIVE_MS = 5 * 60_000;
/** Longest keep-alive that can be set (a timer's range is ~24.8 days). */
export const MAX_KEEP_ALIVE_MS = 24 * 3_600_000;

export interface KeepAliveTimers {
  setTimeout(callback: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export const REAL_TIMERS: KeepAliveTimers = {
  setTimeout: (callback, ms) => {
    const t = setTimeout(callback, ms);
    t.unref();
    return t;
  },
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/**
 * `0` (never unload), a number of seconds (Ollama's meaning of a bare number), or a number with a unit: `500ms`,
 * `30s`, `5m`, `1h`. Milliseconds, 0 = never; undefined when invalid or above MAX_KEEP_ALIVE_MS.
 */
export function parseKeepAlive(v: unknown): number | undefined {
  if (typeof v === 'number') return Number.isFinite(v) && v >= 0 && v * 1000 <= MAX_KEEP_ALIVE_MS ? Math.round(v * 1000) : undefined;
  if (typeof v !== 'string') return undefined;
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$/.exec(v);
  if (!m) return undefined;
  const ms = Math.round(Number(m[1]) * UNIT_MS[m[2] ?? 's']!);
  return ms <= MAX_KEEP_ALIVE_MS ? ms : undefined;
}

/** Per model: a timer started when its last task ends, cancelled when one starts; when it fires, `unload` runs. */
export class KeepAlive {
  private readonly timers = new Map<string, unknown>();

  constructor(
    private readonly ms: number,
    private readonly clock: KeepAliveTimers,
    private readonly unload: (modelId: string) => void,
  ) {}

  /** The model has no task now. */
  idle(modelId: string): void {
    this.busy(modelId);
    if (this.ms <= 0) return;
    this.timers.set(
      modelId,
      this.clock.setTimeout(() => {
        this.timers.delete(modelId);
        this.unload(modelId);
      }, this.ms),
    );
  }

  /** The model has a task (or is gone): no unload pending. */
  busy(modelId: string): void {
    const t = this.timers.get(modelId);
    if (t === undefined) return;
    this.timers.delete(modelId);
    this.clock.clearTimeout(t);
  }

  clear(): void {
    for (const id of [...this.timers.keys()]) this.busy(id);
  }
}
