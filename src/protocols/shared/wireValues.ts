// Readers of loosely typed JSON the doors translate from what the runtime stored (a Responses object, its events'
// data): a member of the wrong type reads as empty instead of throwing, since a stored object written by an older
// version may lack it. One set for every door that re-tells the runtime's Responses vocabulary in its own.
export type Obj = Record<string, unknown>;

/** The value as an object (not an array); anything else as {}. */
export const obj = (v: unknown): Obj => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Obj) : {});
/** The value as an array; anything else as []. */
export const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
/** The value as a string; anything else as ''. */
export const str = (v: unknown): string => (typeof v === 'string' ? v : '');
