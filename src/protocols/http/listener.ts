// The one loopback HTTP listener shared by the LMSP and MCP doors: Host/Origin checks, bearer auth, routing by
// path prefix, connection limits against slow clients, and an orderly shutdown.
//
// Connection slots: every client here is on loopback, so a per-address cap would cap everyone together. Instead a
// connection that has not yet made a request with a valid token is the first to go: when the slots are full, a new
// connection evicts the oldest such socket, else the authenticated socket idle longest (no request in flight), and
// is refused itself only when every slot holds a request under way. A local process holding sockets open without
// a token cannot keep others out; and no principal holds more than maxConnectionsPerPrincipal sockets (its next
// request on another is answered 429 and the socket closed), so one principal cannot take every slot either.
// Header and request timeouts are checked every `connectionsCheckingInterval` (Node's default, 30 s, made a 10 s
// header limit act after ~30 s).
// A request cut there (or refused as malformed) is answered and then closed: http.Server keeps sockets half-open, so
// end() alone left a client that kept trickling bytes its socket until it stopped (99 s measured). With the defaults a
// request head still unfinished is closed at most headersTimeoutMs + 1 s check + 1 s flush (12 s) after it began.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { authenticate, TokenTable, WWW_AUTHENTICATE } from './auth';
import { isAllowedHost, isAllowedOrigin, normalizeOrigin } from './hostOrigin';
import { HttpProblem, problemBody, writeProblem, type ProblemStyle } from './problem';
import type { DoorHandler, RequestContext } from './types';
import { REFUSALS, retryAfterHeader } from '../shared/refusals';
import { LARGE_BODY_BYTES, REFUSAL_BURST, RefusalBudget } from './refusalBudget';

/** How long an answer to a refused connection (408, 400, 431, CONNECT) may take to flush before the socket is cut. */
const FLUSH_BEFORE_CLOSE_MS = 1_000;

/**
 * Writes `text` and closes the socket once it is flushed (at most FLUSH_BEFORE_CLOSE_MS later). Not end() alone:
 * http.Server allows half-open sockets, and a client that never ends its side kept one open while it trickled bytes.
 */
function answerAndClose(socket: import('node:stream').Duplex, text: string): void {
  const cut = setTimeout(() => socket.destroy(), FLUSH_BEFORE_CLOSE_MS);
  cut.unref();
  socket.end(text, () => {
    clearTimeout(cut);
    socket.destroy();
  });
}

/** Why a request's signal aborts: its response closed (finished, or the client went away). */
const RESPONSE_CLOSED = Object.assign(new Error('The response was closed.'), { name: 'AbortError' });

export interface MountedDoor {
  /** Path prefix without a trailing slash, e.g. `/lmsp/v1`. */
  prefix: string;
  handler: DoorHandler;
  problemStyle: ProblemStyle;
}

/** Mounts ordered for findMount: the longest prefix first, so `/v1/messages` wins over `/v1`. */
export function longestPrefixFirst(mounts: readonly MountedDoor[]): MountedDoor[] {
  return [...mounts].sort((a, b) => b.prefix.length - a.prefix.length);
}

/** The mount a path belongs to, from mounts ordered by longestPrefixFirst. */
export function findMount(mounts: readonly MountedDoor[], pathname: string): MountedDoor | undefined {
  return mounts.find((d) => pathname === d.prefix || pathname.startsWith(d.prefix + '/'));
}

export interface ListenerLimits {
  /** Time allowed to receive the request headers (slow-loris). */
  headersTimeoutMs: number;
  /** Time allowed to receive a whole request (headers and body). */
  requestTimeoutMs: number;
  /** A socket with no traffic for this long is closed (SSE heartbeats keep live streams open). */
  idleTimeoutMs: number;
  keepAliveTimeoutMs: number;
  maxConnections: number;
  /** Sockets one principal may hold (counted from its first authenticated request on each). */
  maxConnectionsPerPrincipal: number;
  /** Time the shutdown waits for in-flight requests before cutting connections. */
  shutdownGraceMs: number;
}

export const DEFAULT_LISTENER_LIMITS: ListenerLimits = {
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  idleTimeoutMs: 120_000,
  keepAliveTimeoutMs: 5_000,
  maxConnections: 1024,
  maxConnectionsPerPrincipal: 256,
  shutdownGraceMs: 2_000,
};

export interface ListenerOptions {
  host?: '127.0.0.1' | '::1';
  /** 0 picks a free port. */
  port: number;
  /** Bearer token → principal. */
  tokens: Map<string, string>;
  /** Browser origins allowed besides our own loopback origins (see hostOrigin.ts); anything else is 403. */
  allowedOrigins?: string[];
  doors: MountedDoor[];
  limits?: Partial<ListenerLimits>;
  log?: (msg: string) => void;
  /** The clock of the refusal budget (refusalBudget.ts). */
  now?: () => number;
}

export interface Listener {
  port: number;
  url: string;
  setTokens(tokens: Map<string, string>): void;
  close(): Promise<void>;
}

export async function startListener(options: ListenerOptions): Promise<Listener> {
  const limits = { ...DEFAULT_LISTENER_LIMITS, ...options.limits };
  const host = options.host ?? '127.0.0.1';
  const tokens = new TokenTable(options.tokens);
  // Canonical form, so `http://LocalHost:5173/` on the list matches the `http://localhost:5173` a browser sends.
  const allowedOrigins = (options.allowedOrigins ?? []).map((o) => {
    const n = normalizeOrigin(o);
    if (n instanceof Error) throw n;
    return n;
  });
  const log = options.log ?? (() => {});
  const refusals = new RefusalBudget(options.now);
  const doors = longestPrefixFirst(options.doors);
  // Aborted at shutdown: long requests (SSE, synchronous generations) end instead of holding the port.
  const inFlight = new Set<AbortController>();
  let closing = false;
  let port = 0;

  const server = createServer({
    requestTimeout: limits.requestTimeoutMs,
    headersTimeout: limits.headersTimeoutMs,
    connectionsCheckingInterval: Math.max(100, Math.min(1000, Math.floor(limits.headersTimeoutMs / 4))),
  });
  server.keepAliveTimeout = limits.keepAliveTimeoutMs;
  server.setTimeout(limits.idleTimeoutMs, (socket) => socket.destroy());
  // Open sockets that have not made an authenticated request yet, oldest first; authenticated ones with no request
  // in flight, idle longest first; each authenticated socket's principal and requests in flight (see the header).
  const unauthenticated = new Set<Socket>();
  const idle = new Set<Socket>();
  const sockets = new Set<Socket>();
  const owners = new Map<Socket, string>();
  const owned = new Map<string, number>();
  const busy = new Map<Socket, number>();
  const disown = (socket: Socket) => {
    const owner = owners.get(socket);
    if (owner === undefined) return;
    owners.delete(socket);
    const n = (owned.get(owner) ?? 1) - 1;
    if (n > 0) owned.set(owner, n);
    else owned.delete(owner);
  };
  server.on('connection', (socket: Socket) => {
    if (sockets.size >= limits.maxConnections) {
      const oldest = unauthenticated.values().next().value ?? idle.values().next().value;
      if (!oldest) {
        socket.destroy();
        return;
      }
      unauthenticated.delete(oldest);
      idle.delete(oldest);
      sockets.delete(oldest);
      disown(oldest);
      oldest.destroy();
    }
    sockets.add(socket);
    unauthenticated.add(socket);
    socket.once('close', () => {
      sockets.delete(socket);
      unauthenticated.delete(socket);
      idle.delete(socket);
      busy.delete(socket);
      disown(socket);
    });
  });

  /** Counts the socket against `principal`; false when that principal already holds its share of sockets. */
  function claim(socket: Socket, principal: string): boolean {
    if (owners.get(socket) === principal) return true;
    const held = owned.get(principal) ?? 0;
    if (held >= limits.maxConnectionsPerPrincipal) return false;
    disown(socket);
    owners.set(socket, principal);
    owned.set(principal, held + 1);
    unauthenticated.delete(socket);
    return true;
  }

  /** A request under way on `socket` until `res` closes: the socket is not idle meanwhile. */
  function track(socket: Socket, res: ServerResponse): void {
    if (socket.destroyed) return;
    busy.set(socket, (busy.get(socket) ?? 0) + 1);
    idle.delete(socket);
    res.once('close', () => {
      const n = (busy.get(socket) ?? 1) - 1;
      if (n > 0) return void busy.set(socket, n);
      busy.delete(socket);
      if (owners.has(socket) && !socket.destroyed) idle.add(socket);
    });
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let url: URL;
    try {
      url = new URL(req.url ?? '/', 'http://127.0.0.1');
    } catch {
      writeProblem(res, new HttpProblem(400, 'invalid_request', 'The request target is not a valid path.'), 'problem+json');
      return;
    }
    const door = findMount(doors, url.pathname);
    const style: ProblemStyle = door?.problemStyle ?? 'problem+json';
    const instance = url.pathname;
    if (closing) {
      res.setHeader('Connection', 'close');
      writeProblem(
        res,
        new HttpProblem(503, 'unavailable', REFUSALS.shuttingDown.text, { headers: retryAfterHeader(REFUSALS.shuttingDown) }),
        style,
        instance,
      );
      return;
    }
    if (!isAllowedHost(req.headers.host, port)) {
      writeProblem(res, new HttpProblem(403, 'forbidden', 'The Host header is not a loopback address of this server.'), style, instance);
      return;
    }
    if (!isAllowedOrigin(req, allowedOrigins, port)) {
      writeProblem(res, new HttpProblem(403, 'forbidden', 'Requests from this Origin are not allowed.'), style, instance);
      return;
    }
    if (isProbe(req.method, url.pathname)) {
      res.statusCode = 200;
      res.end();
      return;
    }
    if (!door) {
      writeProblem(res, new HttpProblem(404, 'not_found', 'No such endpoint.'), style, instance);
      return;
    }
    const auth = authenticate(req, tokens);
    if (!auth.ok) {
      const challenge = auth.presented ? `${WWW_AUTHENTICATE}, error="invalid_token"` : WWW_AUTHENTICATE;
      const detail = auth.presented ? 'The bearer token is not valid.' : 'A bearer token is required.';
      writeProblem(res, new HttpProblem(401, 'unauthorized', detail, { headers: { 'WWW-Authenticate': challenge } }), style, instance);
      return;
    }
    /** A 429 naming a per-principal limit of the listener's; the connection closes after it (its body unread). */
    const refuseAndClose = (detail: string, limit: string, max: number, retryAfterS: number) => {
      res.setHeader('Connection', 'close');
      res.once('finish', () => req.socket.destroy());
      const members = { limit: { name: limit, max, current: max } };
      writeProblem(
        res,
        new HttpProblem(429, 'limit_exceeded', detail, { headers: { 'Retry-After': String(retryAfterS) }, members }),
        style,
        instance,
      );
    };
    if (!claim(req.socket, auth.principal)) {
      const max = limits.maxConnectionsPerPrincipal;
      const detail = `This client already holds ${max} connections (max_connections_per_principal); reuse one or close some.`;
      return refuseAndClose(detail, 'max_connections_per_principal', max, 1);
    }
    // A principal whose large requests keep being refused: its next large one is refused unread (refusalBudget.ts).
    const declared = Number(req.headers['content-length'] ?? 0);
    const wait = declared >= LARGE_BODY_BYTES || req.headers['transfer-encoding'] ? refusals.waitMs(auth.principal) : 0;
    if (wait > 0) {
      const s = Math.ceil(wait / 1000);
      const detail = `Too many large requests from this client were refused lately (refused_large_requests); send a valid one again in ${s} s.`;
      return refuseAndClose(detail, 'refused_large_requests', REFUSAL_BURST, s);
    }
    track(req.socket, res);
    const bodyStart = req.socket.bytesRead;
    res.once('finish', () => {
      const refused = res.statusCode >= 400 && res.statusCode < 500 && res.statusCode !== 429 && res.statusCode !== 401;
      if (refused && Math.max(declared, req.socket.bytesRead - bodyStart) >= LARGE_BODY_BYTES) refusals.charge(auth.principal);
    });
    try {
      await door.handler(req, res, new Scope(auth.principal, url, res));
    } catch (e) {
      if (e instanceof HttpProblem) {
        writeProblem(res, e, style, instance);
      } else {
        log(`listener: ${req.method} ${url.pathname} failed: ${e instanceof Error ? e.message : String(e)}`);
        writeProblem(res, new HttpProblem(500, 'internal_error', 'The server could not complete the request.'), style, instance);
      }
    }
  }

  /**
   * A request's context. Its abort signal is made on first use: a poll answered at once (MCP tasks/get, an LMSP GET)
   * never asks for one, and an AbortController with a 'close' listener and an abort per request were about 5–8 % of
   * the server's busy CPU under 100 pollers (a profile).
   */
  class Scope implements RequestContext {
    private controller: AbortController | undefined;

    constructor(
      readonly principal: string,
      readonly url: URL,
      private readonly res: ServerResponse,
    ) {}

    get signal(): AbortSignal {
      if (this.controller) return this.controller.signal;
      const c = new AbortController();
      this.controller = c;
      // Asked for after the response closed or the listener began to shut down: aborted already.
      if (this.res.closed || closing) {
        c.abort(RESPONSE_CLOSED);
        return c.signal;
      }
      inFlight.add(c);
      this.res.once('close', () => {
        inFlight.delete(c);
        // A shared reason: abort() without one builds a DOMException with a stack for every finished response
        // (~8 % of busy CPU in a profile of 100 MCP pollers).
        c.abort(RESPONSE_CLOSED);
      });
      return c.signal;
    }
  }

  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    void handle(req, res).catch((e) => {
      log(`listener: unhandled ${e instanceof Error ? e.message : String(e)}`);
      if (!res.headersSent) res.statusCode = 500;
      res.end();
    });
  });
  // CONNECT bypasses 'request'; without this Node drops the socket with no answer at all.
  server.on('connect', (req: IncomingMessage, socket: import('node:net').Socket) => {
    const body = JSON.stringify(problemBody(new HttpProblem(405, 'method_not_allowed', 'CONNECT is not supported.')));
    answerAndClose(
      socket,
      `HTTP/1.1 405 Method Not Allowed\r\nContent-Type: application/problem+json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  });
  server.on('clientError', (err: NodeJS.ErrnoException, socket) => {
    if (err.code === 'ECONNRESET' || !socket.writable) {
      socket.destroy();
      return;
    }
    const status =
      err.code === 'HPE_HEADER_OVERFLOW'
        ? '431 Request Header Fields Too Large'
        : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
          ? '408 Request Timeout'
          : '400 Bad Request';
    answerAndClose(socket, `HTTP/1.1 ${status}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host, port: options.port, exclusive: true }, () => {
      server.off('error', reject);
      resolve();
    });
  });
  port = (server.address() as AddressInfo).port;
  const hostInUrl = host === '::1' ? '[::1]' : host;
  let closed: Promise<void> | undefined;

  return {
    port,
    url: `http://${hostInUrl}:${port}`,
    setTokens: (map) => tokens.set(map),
    close() {
      closed ??= new Promise<void>((resolve) => {
        closing = true;
        server.close(() => resolve());
        for (const c of [...inFlight]) c.abort();
        server.closeIdleConnections();
        const cut = setTimeout(() => server.closeAllConnections(), limits.shutdownGraceMs);
        cut.unref();
      });
      return closed;
    },
  };
}

/**
 * Reachability probes answered 200 with no body and no token: `HEAD /`, and `HEAD`/`GET /api/hello`, which Claude Code
 * sends to its base URL before its first request (docs/anthropic.md). Nothing is told but that the server is up.
 */
function isProbe(method: string | undefined, path: string): boolean {
  if (path === '/api/hello') return method === 'HEAD' || method === 'GET';
  return path === '/' && method === 'HEAD';
}
