// DNS-rebinding defence: only loopback Host names with our port; a browser Origin passes only when it is one of
// the server's own loopback origins (http://127.0.0.1:PORT, http://localhost:PORT, http://[::1]:PORT — a page
// served by this server, or a client such as the MCP conformance suite that sends Origin = the URL it talks to)
// or is on the configured allow-list (`serve --allow-origin`, setting taskRuntime.server.allowedOrigins).
// Everything else is 403. Before this, our own origin was refused too (conformance 0.1.16 dns-rebinding-protection
// failed on it).
import type { IncomingMessage } from 'node:http';

const LOOPBACK_HOSTS = ['127.0.0.1', 'localhost', '[::1]'];

export function isAllowedHost(host: string | undefined, port: number): boolean {
  if (!host) return false;
  const h = host.toLowerCase();
  return LOOPBACK_HOSTS.some((name) => h === `${name}:${port}`);
}

/** The origins a page served by this listener would send: `http://<loopback name>:<port>`. */
export function ownOrigins(port: number): string[] {
  return LOOPBACK_HOSTS.map((name) => `http://${name}:${port}`);
}

/**
 * Requests without Origin (non-browser clients) pass; a present Origin must be one of our own loopback origins or
 * on the allow-list (entries in the canonical form `normalizeOrigin` returns). The comparison is exact after
 * lower-casing: browsers send origins in canonical form, and `null` (opaque origins) never matches.
 */
export function isAllowedOrigin(req: IncomingMessage, allowedOrigins: readonly string[], port?: number): boolean {
  const origin = req.headers.origin;
  if (origin === undefined) return true;
  const o = origin.toLowerCase();
  if (port !== undefined && ownOrigins(port).includes(o)) return true;
  return allowedOrigins.includes(o);
}

/**
 * An allow-list entry → its canonical origin (`scheme://host[:port]`, lower case, default port dropped), or an
 * Error whose message says what is wrong. Wildcards, paths, queries and credentials are refused: an allow-list
 * entry names exactly one origin.
 */
export function normalizeOrigin(raw: string): string | Error {
  const s = raw.trim();
  if (s === '' || s.includes('*')) return new Error(`"${raw}" is not an origin: give scheme://host[:port], no wildcards`);
  let url: URL;
  try {
    url = new URL(s);
  } catch {
    return new Error(`"${raw}" is not an origin: give scheme://host[:port], e.g. http://localhost:5173`);
  }
  // http(s) pages, plus hosts of browser extensions and webviews (chrome-extension://id, vscode-webview://id).
  const special = ['ftp:', 'file:', 'ws:', 'wss:', 'data:', 'blob:', 'javascript:', 'about:'];
  if ((url.protocol !== 'http:' && url.protocol !== 'https:' && special.includes(url.protocol)) || !url.host) {
    return new Error(`"${raw}": only http(s) origins and extension/webview origins (scheme://id) can be allowed`);
  }
  if (url.username || url.password || url.search || url.hash || (url.pathname !== '/' && url.pathname !== '')) {
    return new Error(`"${raw}" is not an origin: drop the path, query or credentials (scheme://host[:port] only)`);
  }
  return url.origin === 'null' ? `${url.protocol}//${url.host}`.toLowerCase() : url.origin.toLowerCase();
}
