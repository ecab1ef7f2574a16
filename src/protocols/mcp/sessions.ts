// MCP sessions: one SDK Server + StreamableHTTPServerTransport per session, each bound to the principal that
// opened it. Sessions carry only the connection (for notifications); tasks belong to the principal.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { randomBytes } from 'node:crypto';
import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { RequestId } from '@modelcontextprotocol/sdk/types.js';
import type { McpContext } from './context';
import { createSessionServer } from './server';

export interface SessionLimits {
  /** Close a session after this long without a request. */
  idleMs: number;
  /** Oldest-idle sessions of a principal are closed beyond this count. */
  maxPerPrincipal: number;
}

export class McpSession {
  lastSeen = Date.now();
  private readonly httpSignals = new Map<RequestId, AbortSignal>();
  private readonly cleanups = new Set<() => void>();
  private closed = false;
  readonly server: Server;
  readonly transport: StreamableHTTPServerTransport;

  constructor(
    ctx: McpContext,
    readonly principal: string,
    onInitialized: (s: McpSession) => void,
    private readonly onClosed: (s: McpSession) => void,
  ) {
    this.transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomBytes(16).toString('hex'),
      onsessioninitialized: () => onInitialized(this),
    });
    this.transport.onclose = () => this.cleanup();
    this.server = createSessionServer(ctx, {
      principal,
      httpSignal: (id) => this.httpSignals.get(id),
      onClose: (fn) => {
        if (this.closed) {
          fn();
          return () => {};
        }
        this.cleanups.add(fn);
        return () => this.cleanups.delete(fn);
      },
    });
  }

  get id(): string | undefined {
    return this.transport.sessionId;
  }

  async start(): Promise<void> {
    await this.server.connect(this.transport);
  }

  /** Hands an HTTP request to the SDK transport, tying each JSON-RPC request id to the HTTP request's lifetime. */
  async dispatch(req: IncomingMessage, res: ServerResponse, signal: AbortSignal, body?: unknown): Promise<void> {
    this.lastSeen = Date.now();
    const ids = requestIds(body);
    if (ids.length) {
      const gone = new AbortController();
      const abort = () => gone.abort();
      signal.addEventListener('abort', abort, { once: true });
      res.once('close', () => {
        if (!res.writableFinished) abort();
        signal.removeEventListener('abort', abort);
        for (const id of ids) if (this.httpSignals.get(id) === gone.signal) this.httpSignals.delete(id);
      });
      for (const id of ids) this.httpSignals.set(id, gone.signal);
    }
    await this.transport.handleRequest(req, res, body);
  }

  async close(): Promise<void> {
    await this.transport.close().catch(() => {});
    this.cleanup();
  }

  private cleanup(): void {
    if (this.closed) return;
    this.closed = true;
    for (const fn of this.cleanups) fn();
    this.cleanups.clear();
    this.onClosed(this);
  }
}

function requestIds(body: unknown): RequestId[] {
  const messages = Array.isArray(body) ? body : [body];
  const ids: RequestId[] = [];
  for (const m of messages) {
    const id = (m as { id?: unknown; method?: unknown } | null)?.id;
    if ((typeof id === 'string' || typeof id === 'number') && typeof (m as { method?: unknown }).method === 'string') ids.push(id);
  }
  return ids;
}

export class McpSessions {
  private readonly byId = new Map<string, McpSession>();
  private readonly pending = new Set<McpSession>();
  private readonly sweeper: NodeJS.Timeout;

  constructor(
    private readonly ctx: McpContext,
    private readonly limits: SessionLimits,
  ) {
    this.sweeper = setInterval(() => this.sweep(), Math.min(60_000, limits.idleMs)).unref();
  }

  get size(): number {
    return this.byId.size;
  }

  /** The session with this id if it belongs to this principal; another principal's session does not exist. */
  get(id: string, principal: string): McpSession | undefined {
    const s = this.byId.get(id);
    return s && s.principal === principal ? s : undefined;
  }

  async open(principal: string): Promise<McpSession> {
    const session = new McpSession(
      this.ctx,
      principal,
      (s) => {
        this.pending.delete(s);
        if (s.id) this.byId.set(s.id, s);
        this.enforceCap(principal);
      },
      (s) => {
        this.pending.delete(s);
        if (s.id && this.byId.get(s.id) === s) this.byId.delete(s.id);
      },
    );
    this.pending.add(session);
    await session.start();
    return session;
  }

  async closeAll(): Promise<void> {
    clearInterval(this.sweeper);
    const all = [...this.byId.values(), ...this.pending];
    await Promise.all(all.map((s) => s.close()));
  }

  private enforceCap(principal: string): void {
    const mine = [...this.byId.values()].filter((s) => s.principal === principal);
    if (mine.length <= this.limits.maxPerPrincipal) return;
    mine.sort((a, b) => a.lastSeen - b.lastSeen);
    for (const s of mine.slice(0, mine.length - this.limits.maxPerPrincipal)) void s.close();
  }

  private sweep(): void {
    const cutoff = Date.now() - this.limits.idleMs;
    for (const s of [...this.byId.values(), ...this.pending]) if (s.lastSeen < cutoff) void s.close();
  }
}
