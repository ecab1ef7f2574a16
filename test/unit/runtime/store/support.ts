// What the store tests write and count: one idempotency-key row per batch (the smallest real batch), and a store
// with two images and journals behind them, the shape most damage cases start from.
import * as fs from 'node:fs';
import { DurableDatabase, type WriteOp } from '../../../../src/runtime/store/database';

/** Batch `i`: one row, key `k<i>`. */
export const insert = (i: number): WriteOp[] => [
  [
    `INSERT INTO idempotency_keys (principal, scope, key, fingerprint, task_id, created_at) VALUES ('p', 's', ?, ?, ?, ?)`,
    [`k${i}`, `f${i}`, `t${i}`, i],
  ],
];

export const count = (db: DurableDatabase): number => Number(db.get('SELECT COUNT(*) AS n FROM idempotency_keys')?.n);

/** Files of `dir` whose names match, sorted (images and journals sort by their sequence). */
export const named = (dir: string, re: RegExp): string[] =>
  fs
    .readdirSync(dir)
    .filter((n) => re.test(n))
    .sort();

/**
 * 45 batches in `dir` with images at 20 and 40 and the journals from 21 and from 41 behind them. Returns the open
 * store, not closed (as a kill would leave it).
 */
export async function twoImages(dir: string): Promise<DurableDatabase> {
  const a = await DurableDatabase.open(dir);
  for (let i = 0; i < 20; i++) a.write(insert(i));
  await a.checkpoint();
  for (let i = 20; i < 40; i++) a.write(insert(i));
  await a.checkpoint();
  for (let i = 40; i < 45; i++) a.write(insert(i));
  return a;
}
