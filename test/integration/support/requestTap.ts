// Records the HTTP requests our endpoint's server receives, from inside the extension host it runs in, so a test
// can show what VS Code's own MCP client sent. Observes only: the server reads every request as before.
import * as http from 'node:http';

export interface TappedRequest {
  method: string;
  path: string;
  /** Parsed JSON body (undefined when empty or not JSON). */
  body: unknown;
}

export interface RequestTap {
  readonly requests: TappedRequest[];
  /** JSON-RPC messages (batches flattened) POSTed to a path. */
  rpc(path: string): { method?: string; id?: unknown; params?: Record<string, unknown> }[];
  close(): void;
}

export function tapServerRequests(port: number): RequestTap {
  const requests: TappedRequest[] = [];
  const proto = http.Server.prototype as unknown as { emit: (event: string, ...args: unknown[]) => boolean };
  const originalEmit = proto.emit;
  proto.emit = function (this: http.Server, event: string, ...args: unknown[]) {
    const address = this.address();
    if (event === 'request' && address && typeof address === 'object' && address.port === port) {
      record(args[0] as http.IncomingMessage);
    }
    return originalEmit.call(this, event, ...args);
  };

  function record(req: http.IncomingMessage): void {
    const chunks: Buffer[] = [];
    const entry: TappedRequest = { method: req.method ?? '', path: (req.url ?? '').split('?')[0]!, body: undefined };
    requests.push(entry);
    // The HTTP parser hands body bytes to push() after 'request' is emitted; see them on their way in.
    const push = req.push;
    req.push = function (this: http.IncomingMessage, chunk: unknown, encoding?: BufferEncoding) {
      if (chunk === null) {
        const text = Buffer.concat(chunks).toString('utf8');
        try {
          entry.body = text ? JSON.parse(text) : undefined;
        } catch {
          entry.body = undefined;
        }
      } else if (chunk) {
        chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as string, encoding));
      }
      return push.call(this, chunk, encoding);
    };
  }

  return {
    requests,
    rpc(path) {
      return requests
        .filter((r) => r.method === 'POST' && r.path === path)
        .flatMap((r) => (Array.isArray(r.body) ? r.body : [r.body]))
        .filter((m): m is { method?: string; id?: unknown; params?: Record<string, unknown> } => !!m && typeof m === 'object');
    },
    close() {
      proto.emit = originalEmit;
    },
  };
}
