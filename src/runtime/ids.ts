import { randomBytes } from 'node:crypto';

// 128 random bits, base32-like lowercase: unguessable, URL-safe, also valid as MCP task ids.
const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';

export function randomId(prefix: string, bits = 130): string {
  const chars = Math.ceil(bits / 5);
  const bytes = randomBytes(chars);
  let out = prefix;
  for (let i = 0; i < chars; i++) out += ALPHABET[bytes[i] & 31];
  return out;
}

export const newTaskId = () => randomId('task_');
export const newResponseId = () => randomId('resp_');
export const newMessageId = () => randomId('msg_');
