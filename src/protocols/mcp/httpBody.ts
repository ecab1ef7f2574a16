// Reading and answering raw HTTP for the MCP door (before the SDK transport sees a request).
import type { IncomingMessage, ServerResponse } from 'node:http';

export type BodyResult = { ok: true; value: unknown } | { ok: false; status: number; code: number; message: string };

export async function readJsonBody(req: IncomingMessage, maxBytes: number): Promise<BodyResult> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > maxBytes) {
    return { ok: false, status: 413, code: -32600, message: `Request body too large: limit is ${maxBytes} bytes` };
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > maxBytes) {
      return { ok: false, status: 413, code: -32600, message: `Request body too large: limit is ${maxBytes} bytes` };
    }
    chunks.push(chunk);
  }
  try {
    return { ok: true, value: JSON.parse(Buffer.concat(chunks).toString('utf8')) };
  } catch {
    return { ok: false, status: 400, code: -32700, message: 'Parse error: body is not valid JSON' };
  }
}

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  if (res.headersSent) {
    res.end();
    return;
  }
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

export function sendJsonRpcError(
  res: ServerResponse,
  status: number,
  code: number,
  message: string,
  id: string | number | null = null,
  headers: Record<string, string> = {},
): void {
  sendJson(res, status, { jsonrpc: '2.0', id, error: { code, message } }, headers);
}
