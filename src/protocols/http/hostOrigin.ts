// DNS-rebinding defence: only loopback Host names with our port, and no browser Origin unless allowed.
import type { IncomingMessage } from 'node:http';

const LOOPBACK_HOSTS = ['127.0.0.1', 'localhost', '[::1]'];

export function isAllowedHost(host: string | undefined, port: number): boolean {
  if (!host) return false;
  const h = host.toLowerCase();
  return LOOPBACK_HOSTS.some((name) => h === `${name}:${port}`);
}

/** Requests without Origin (non-browser clients) pass; a present Origin must be on the allow list exactly. */
export function isAllowedOrigin(req: IncomingMessage, allowedOrigins: readonly string[]): boolean {
  const origin = req.headers.origin;
  if (origin === undefined) return true;
  return allowedOrigins.includes(origin);
}
