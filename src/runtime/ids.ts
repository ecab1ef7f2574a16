import { randomFillSync } from 'node:crypto';

// 128 random bits, base32-like lowercase: unguessable, URL-safe, also valid as MCP task ids.
const ALPHABET = Buffer.from('0123456789abcdefghjkmnpqrstvwxyz', 'latin1');

// Random bytes are drawn 4 KiB at a time (as Node's crypto.randomUUID buffers its entropy) and the id is built in one
// buffer: a create makes two ids, and a fresh randomBytes() plus 26 string concatenations per id were a tenth of the
// garbage a durable create leaves ( create p99).
const pool = Buffer.alloc(4096);
let poolAt = pool.length;
const scratch = Buffer.alloc(64);

export function randomId(prefix: string, bits = 130): string {
  const chars = Math.ceil(bits / 5);
  if (chars > scratch.length) throw new RangeError('id too long');
  if (poolAt + chars > pool.length) {
    randomFillSync(pool);
    poolAt = 0;
  }
  for (let i = 0; i < chars; i++) scratch[i] = ALPHABET[pool[poolAt + i] & 31];
  // Used bytes are wiped, so the pool never holds an issued id's randomness.
  pool.fill(0, poolAt, poolAt + chars);
  poolAt += chars;
  return prefix + scratch.toString('latin1', 0, chars);
}

export const newTaskId = () => randomId('task_');
export const newResponseId = () => randomId('resp_');
export const newMessageId = () => randomId('msg_');
