// A raw 2026-07-28 client over fetch: the `_meta` envelope, MCP-Protocol-Version / Mcp-Method / Mcp-Name headers,
// and nothing else — an oracle independent of our own code, so that tests can also send what a client must not.
// An SSE answer (a synchronous call with a progressToken) is read whole by the tests' one SSE parser.
import { parseSse, sseJson } from '../../fixtures/sse';
export const V = '2026-07-28';
export const TASKS_EXT = 'io.modelcontextprotocol/tasks';

export interface ModernReply {
  status: number;
  /** The JSON-RPC answer: the whole JSON body, or the answer event of an SSE response. */
  body: any;
  headers: Headers;
  /** Every JSON-RPC message of an SSE response in order (notifications, then the answer); [body] for JSON. */
  messages: any[];
}

export class ModernClient {
  private nextId = 1;
  constructor(
    readonly mcpUrl: string,
    readonly token: string,
    /** Declare the tasks extension on every request. */
    readonly tasks = true,
  ) {}

  envelope(extra: Record<string, unknown> = {}): Record<string, unknown> {
    return {
      'io.modelcontextprotocol/protocolVersion': V,
      'io.modelcontextprotocol/clientInfo': { name: 'modern-raw', version: '1.0.0' },
      'io.modelcontextprotocol/clientCapabilities': this.tasks ? { extensions: { [TASKS_EXT]: {} } } : {},
      ...extra,
    };
  }

  headersFor(method: string, params: Record<string, unknown>): Record<string, string> {
    const h: Record<string, string> = {
      authorization: `Bearer ${this.token}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': V,
      'mcp-method': method,
    };
    const name = method === 'tools/call' ? params['name'] : /^tasks\/(get|update|cancel)$/.test(method) ? params['taskId'] : undefined;
    if (typeof name === 'string') h['mcp-name'] = name;
    return h;
  }

  /** A well-formed request; `headers` overrides (a value of null removes the header), `meta` is merged into _meta. */
  async request(
    method: string,
    params: Record<string, unknown> = {},
    opts: { headers?: Record<string, string | null>; meta?: Record<string, unknown>; id?: string | number } = {},
  ): Promise<ModernReply> {
    const id = opts.id ?? this.nextId++;
    const headers = this.headersFor(method, params);
    for (const [k, v] of Object.entries(opts.headers ?? {})) {
      if (v === null) delete headers[k.toLowerCase()];
      else headers[k.toLowerCase()] = v;
    }
    const body = { jsonrpc: '2.0', id, method, params: { ...params, _meta: this.envelope(opts.meta) } };
    return this.raw(body, headers);
  }

  async raw(body: unknown, headers: Record<string, string>): Promise<ModernReply> {
    const res = await fetch(this.mcpUrl, { method: 'POST', headers, body: typeof body === 'string' ? body : JSON.stringify(body) });
    const text = await res.text();
    if ((res.headers.get('content-type') ?? '').startsWith('text/event-stream')) {
      const messages = sseJson(parseSse(text).filter((e) => e.data !== ''));
      return { status: res.status, body: messages.find((m) => 'result' in m || 'error' in m), headers: res.headers, messages };
    }
    const parsed = text ? JSON.parse(text) : undefined;
    return { status: res.status, body: parsed, headers: res.headers, messages: parsed === undefined ? [] : [parsed] };
  }

  /** The result of a successful call; throws with the error body otherwise. */
  async result(method: string, params: Record<string, unknown> = {}): Promise<any> {
    const r = await this.request(method, params);
    if (r.status !== 200 || !r.body?.result) throw new Error(`${method} failed: ${r.status} ${JSON.stringify(r.body)}`);
    return r.body.result;
  }
}
