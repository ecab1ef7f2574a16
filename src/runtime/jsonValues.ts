// Readers of loosely typed JSON (request bodies before validation, what engines send, what the runtime stored in an
// older version): one guard for "a plain object", and readers that take a member of the wrong type as empty instead
// of throwing. One set for the runtime, the doors, the backends and the editor. And the one deep freeze of values
// shared between readers (the store's finished-task cache, a request's echo in its responses).
export type Obj = Record<string, unknown>;

/** A plain object: not null, not an array. */
export function isObject(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The value as an object (not an array); anything else as {}. */
export const obj = (v: unknown): Obj => (isObject(v) ? v : {});
/** The value as an array; anything else as []. */
export const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
/** The value as a string; anything else as ''. */
export const str = (v: unknown): string => (typeof v === 'string' ? v : '');

/** Freezes `v` and everything reachable from it; returns it. */
export function deepFreeze<T>(v: T): T {
  if (v !== null && typeof v === 'object' && !Object.isFrozen(v)) {
    Object.freeze(v);
    for (const x of Object.values(v)) deepFreeze(x);
  }
  return v;
}
