// Answering raw HTTP for the MCP door (before the SDK transport sees a request): the one place that writes a JSON
// answer's status and headers for it. Bodies are read by http/body.ts.
import type { ServerResponse } from 'node:http';
import { endWithText } from '../http/bodyWriter';

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  sendJsonText(res, status, JSON.stringify(body), headers);
}

/** `text` is JSON already (the tasks/get fast path keeps each view's JSON text and splices it in). */
export function sendJsonText(res: ServerResponse, status: number, text: string, headers: Record<string, string> = {}): void {
  if (res.headersSent) {
    res.end();
    return;
  }
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
  endWithText(res, text);
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
