// Splits a file's text into the chunks the workspace index embeds: runs of whole lines of about `maxTokens` tokens
// (estimated at 4 characters a token: the index must not load a tokenizer to plan work, and the estimate only needs
// to keep chunks well inside an embedding context), each overlapping the previous one by a few lines so that a
// passage cut at a boundary is still whole in one of them. Line numbers are 1-based and inclusive, as editors show.
// A single line longer than a chunk (minified code, a data line) is cut into pieces that all carry its line number.

export interface Chunk {
  /** 1-based, inclusive. */
  startLine: number;
  endLine: number;
  text: string;
}

export interface ChunkOptions {
  /** Tokens per chunk, estimated (default 200). */
  maxTokens?: number;
  /** Tokens of trailing lines repeated at the start of the next chunk (default 30). */
  overlapTokens?: number;
}

/** Characters per token of the estimate (English and code average 3.5–4.5 with BPE tokenizers). */
export const CHARS_PER_TOKEN = 4;
export const DEFAULT_CHUNK_TOKENS = 200;
export const DEFAULT_OVERLAP_TOKENS = 30;

export function chunkText(text: string, options: ChunkOptions = {}): Chunk[] {
  const maxTokens = options.maxTokens ?? DEFAULT_CHUNK_TOKENS;
  const overlapTokens = options.overlapTokens ?? DEFAULT_OVERLAP_TOKENS;
  if (!Number.isInteger(maxTokens) || maxTokens < 1) throw new RangeError('maxTokens must be a positive integer');
  if (!Number.isInteger(overlapTokens) || overlapTokens < 0 || overlapTokens >= maxTokens) {
    throw new RangeError('overlapTokens must be an integer from 0 to maxTokens - 1');
  }
  const maxChars = maxTokens * CHARS_PER_TOKEN;
  const overlapChars = overlapTokens * CHARS_PER_TOKEN;
  const lines = text.split(/\r?\n/);
  if (lines.length > 0 && lines[lines.length - 1] === '') lines.pop(); // the newline that ends the file
  const chunks: Chunk[] = [];
  let start = 0; // index of the current chunk's first line
  while (start < lines.length) {
    const first = lines[start];
    if (first.length > maxChars) {
      for (let at = 0; at < first.length; at += maxChars) {
        const piece = first.slice(at, at + maxChars);
        if (piece.trim()) chunks.push({ startLine: start + 1, endLine: start + 1, text: piece });
      }
      start += 1;
      continue;
    }
    let end = start; // inclusive
    let chars = first.length;
    while (end + 1 < lines.length && lines[end + 1].length <= maxChars && chars + 1 + lines[end + 1].length <= maxChars) {
      end += 1;
      chars += 1 + lines[end].length;
    }
    const body = lines.slice(start, end + 1).join('\n');
    if (body.trim()) chunks.push({ startLine: start + 1, endLine: end + 1, text: body });
    if (end + 1 >= lines.length) break;
    // The next chunk starts with the trailing lines of this one that fit the overlap, always moving forward.
    let next = end + 1;
    let carried = 0;
    while (next - 1 > start && carried + lines[next - 1].length + 1 <= overlapChars) {
      next -= 1;
      carried += lines[next].length + 1;
    }
    start = next;
  }
  return chunks;
}
