// A loopback proxy that adds our bearer token to every request, for clients that send none (the conformance
// suite). Host and Origin naming the proxy are rewritten to name the server, so the server's own Host/Origin
// checks still decide: a foreign Host or Origin stays foreign (dns-rebinding-protection is tested through it).
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface TokenProxy {
  url: string;
  close(): Promise<void>;
}

export async function startTokenProxy(target: string, token: string): Promise<TokenProxy> {
  const t = new URL(target);
  let port = 0;
  const server: Server = createServer((req, res) => {
    const loopback = '(127\\.0\\.0\\.1|localhost|\\[::1\\])';
    const host = new RegExp(`^${loopback}:${port}$`, 'i');
    const origin = new RegExp(`^(https?://)${loopback}:${port}$`, 'i');
    const headers = { ...req.headers, authorization: `Bearer ${token}` };
    if (headers.host) headers.host = headers.host.replace(host, `$1:${t.port}`);
    if (typeof headers.origin === 'string') headers.origin = headers.origin.replace(origin, `$1$2:${t.port}`);
    const upstream = request({ host: t.hostname, port: t.port, path: req.url, method: req.method, headers }, (r) => {
      res.writeHead(r.statusCode ?? 502, r.headers);
      r.pipe(res);
    });
    upstream.on('error', () => res.destroy());
    res.on('close', () => upstream.destroy());
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
  return {
    url: `http://localhost:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
