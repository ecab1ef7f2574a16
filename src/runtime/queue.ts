// The queue as clients see it: a task's priority (its range, how waiting raises it), its place in the order the fair
// scheduler will really start tasks, and when it is expected to start, from measured run times. Pure functions and
// one small table of durations; the scheduler (scheduler.ts) owns the queue and calls these.
//
// Priority orders one principal's own tasks: higher first, ties in queue order. Aging raises a waiting task one level
// per `agingMs` (default 10 s) up to the top of the range, so a task of priority p is overtaken by no newcomer after
// (PRIORITY.max - p) × agingMs of waiting (100 s for p = 0 against a stream of priority-10 tasks, 200 s for -10).
// Between principals the scheduler's fair turns still decide, so no priority lets one principal starve another.
import { RuntimeError } from './errors';

export const PRIORITY = { min: -10, max: 10, default: 0 } as const;
export const DEFAULT_PRIORITY_AGING_MS = 10_000;

/** A priority from a request, checked: an integer in the range (absent: the default). */
export function checkPriority(value: unknown, param = 'priority'): number {
  if (value === undefined || value === null) return PRIORITY.default;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < PRIORITY.min || value > PRIORITY.max) {
    throw new RuntimeError(
      'invalid_request',
      `${param} must be an integer from ${PRIORITY.min} to ${PRIORITY.max} (higher runs first among your own tasks; default ${PRIORITY.default}).`,
      param,
    );
  }
  return value;
}

/** The priority a queued task competes with after waiting `waitedMs` (`agingMs` 0: no aging). */
export function effectivePriority(priority: number, waitedMs: number, agingMs: number): number {
  if (priority >= PRIORITY.max || !(agingMs > 0)) return priority;
  return Math.min(PRIORITY.max, priority + Math.floor(Math.max(0, waitedMs) / agingMs));
}

/** Where a queued task stands. */
export interface QueueInfo {
  /** 1-based place in the order its capacity group will start tasks (every principal's tasks counted). */
  position: number;
  /** The task's own priority (as created, or raised by "run next"). */
  priority: number;
  /** Unix ms when it is expected to start, from measured run times; null until some run of its model was timed. */
  expectedStartAt: number | null;
  /** The same as a wait from when it was worked out (ms), or null. */
  expectedWaitMs: number | null;
}

/**
 * A queue place on the wire, the same on every door (LMSP task object, `/responses` vendor member, the queue event):
 * `position`, `priority`, `expected_start_at` (Unix seconds, as `created_at`) and `expected_start_at_ms`, both null
 * until a run of the model was timed.
 */
export function queueObject(info: QueueInfo): Record<string, unknown> {
  return {
    position: info.position,
    priority: info.priority,
    expected_start_at: info.expectedStartAt === null ? null : Math.ceil(info.expectedStartAt / 1000),
    expected_start_at_ms: info.expectedStartAt === null ? null : Math.round(info.expectedStartAt),
  };
}

/** Recent run times per model (ms, from start to end of a run), for expected start times. */
export class RunDurations {
  private readonly byModel = new Map<string, number[]>();

  constructor(private readonly keep = 32) {}

  record(model: string, ms: number): void {
    let d = this.byModel.get(model);
    if (!d) this.byModel.set(model, (d = []));
    d.push(Math.max(0, ms));
    if (d.length > this.keep) d.shift();
  }

  /** The median of the model's recent runs, or null when none was timed. */
  typical(model: string): number | null {
    const d = this.byModel.get(model);
    if (!d?.length) return null;
    const s = [...d].sort((a, b) => a - b);
    return s[Math.floor(s.length / 2)];
  }
}

/**
 * Start times of tasks taken in order by `limit` slots: `busyUntil` says when each slot that is taken now frees up
 * (relative ms), `durations` each waiting task's expected run time, in start order (null: unknown, and so is every
 * later start). Returns each task's expected start (relative ms), or null.
 */
export function expectedStarts(busyUntil: number[], limit: number, durations: Array<number | null>): Array<number | null> {
  // More runs than slots (runs that answered their client's input) simply free later ones: each slot is a time.
  const slots = busyUntil.map((b) => Math.max(0, b));
  while (slots.length < Math.max(1, limit)) slots.push(0);
  slots.sort((a, b) => a - b);
  const out: Array<number | null> = [];
  let known = true;
  for (const d of durations) {
    const at = slots.shift()!;
    out.push(known ? at : null);
    if (d === null) known = false;
    insertSorted(slots, at + (d ?? 0));
  }
  return out;
}

function insertSorted(a: number[], v: number): void {
  let i = a.length;
  while (i > 0 && a[i - 1] > v) i--;
  a.splice(i, 0, v);
}

/** 1st, 2nd, 3rd, 4th, 11th, 21st… */
export function ordinal(n: number): string {
  const tens = n % 100;
  const suffix = tens >= 11 && tens <= 13 ? 'th' : n % 10 === 1 ? 'st' : n % 10 === 2 ? 'nd' : n % 10 === 3 ? 'rd' : 'th';
  return `${n}${suffix}`;
}

/** A wait in words: "under a second", "about 12 s", "about 3 min", "about 2 h". */
export function formatWait(ms: number): string {
  if (ms < 1000) return 'under a second';
  if (ms < 90_000) return `about ${Math.round(ms / 1000)} s`;
  if (ms < 90 * 60_000) return `about ${Math.round(ms / 60_000)} min`;
  return `about ${Math.round(ms / 3_600_000)} h`;
}

/** "queued: 3rd, about 12 s" — the status line every door and the editor show for a queued task. */
export function queueSummary(info: QueueInfo | null): string {
  if (!info) return 'queued: waiting for the model';
  const wait = info.expectedWaitMs;
  const when = wait === null ? '' : `, ${wait < 1000 ? 'starting soon' : formatWait(wait)}`;
  return `queued: ${ordinal(info.position)}${when}`;
}
