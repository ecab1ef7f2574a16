// The one JSON request body reader, for both doors: a size cap and a content-type check; bad bodies are thrown as
// HttpProblems (400 unreadable, 413 too large, 415 not JSON), which each door answers in its own style.
import type { IncomingMessage } from 'node:http';
import { HttpProblem } from './problem';

/** The largest request body either door accepts (LMSP discovery advertises it as max_body_bytes). */
export const MAX_BODY_BYTES = 4 * 1024 * 1024;

export function isJsonContentType(value: string | undefined): boolean {
  if (!value) return false;
  const type = value.split(';')[0].trim().toLowerCase();
  return type === 'application/json' || (type.startsWith('application/') && type.endsWith('+json'));
}

export async function readJsonBody(req: IncomingMessage, maxBytes = MAX_BODY_BYTES): Promise<unknown> {
  if (!isJsonContentType(req.headers['content-type'])) {
    throw new HttpProblem(415, 'unsupported_media_type', 'The request body must be application/json.');
  }
  const chunks = await readUpTo(req, maxBytes);
  const text = Buffer.concat(chunks).toString('utf8');
  if (text.trim() === '') throw new HttpProblem(400, 'invalid_request', 'The request body is empty.');
  try {
    return JSON.parse(text);
  } catch {
    throw new HttpProblem(400, 'invalid_request', 'The request body is not valid JSON.');
  }
}

/**
 * The raw body, at most `maxBytes` (a file upload: multipart/form-data, larger than any JSON body). Over it: 413, the
 * body read and dropped up to `maxBytes` + DISCARD_LIMIT_BYTES so that the client sees the answer.
 */
export async function readRawBody(req: IncomingMessage, maxBytes: number): Promise<Buffer> {
  return Buffer.concat(await readUpTo(req, maxBytes, maxBytes + DISCARD_LIMIT_BYTES));
}

function tooLarge(maxBytes: number): HttpProblem {
  return new HttpProblem(413, 'payload_too_large', `The request body exceeds ${maxBytes} bytes.`);
}

// An oversized body is still read (and dropped) up to DISCARD_LIMIT_BYTES before the 413 goes out, so that a
// client that is still sending sees the answer instead of a broken pipe; beyond that the 413 goes out at once and
// the connection closes. Listeners rather than for-await: leaving a for-await loop destroys the socket.
const DISCARD_LIMIT_BYTES = 64 * 1024 * 1024;

function readUpTo(req: IncomingMessage, maxBytes: number, discardLimit = DISCARD_LIMIT_BYTES): Promise<Buffer[]> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const declared = Number(req.headers['content-length'] ?? 0);
    if (declared > discardLimit) {
      reject(tooLarge(maxBytes));
      return;
    }
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > discardLimit) {
        cleanup();
        reject(tooLarge(maxBytes));
      } else if (size <= maxBytes) {
        chunks.push(chunk);
      }
    };
    const onEnd = () => {
      cleanup();
      if (size > maxBytes) reject(tooLarge(maxBytes));
      else resolve(chunks);
    };
    const onError = (e: Error) => {
      cleanup();
      reject(e);
    };
    const cleanup = () => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
  });
}
