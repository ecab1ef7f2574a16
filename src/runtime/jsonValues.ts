// Readers of loosely typed JSON (request bodies before validation, what engines send, what the runtime stored in an
// older version): one guard for "a plain object", and readers that take a member of the wrong type as empty instead
// of throwing. One set for the runtime, the doors, the backends and the editor.
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
