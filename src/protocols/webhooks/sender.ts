// The completion webhooks' wire: one POST per try over node:http(s), for the runtime's delivery worker
// (runtime/webhooks.ts), which may not import node:http. The address rules live here, where the connection is made:
//   - only http and https;
//   - a redirect is an answer (3xx), never followed (node:http does not follow, and nothing here does);
//   - private, loopback, link-local and other special-use addresses are refused unless `allowPrivate`: an IP literal
//     before connecting, a name in the lookup that the connection itself uses (so the address checked is the address
//     connected to, not one a second resolution could change), and the socket's peer once connected;
//   - each try is bounded (its signal, plus a socket idle timeout) and reads at most 64 KiB of the answer.
// It never sees the secret: the worker hands it signed headers. Errors are a few words (code or reason), never the
// headers or body.
import * as dns from 'node:dns';
import * as http from 'node:http';
import * as https from 'node:https';
import { BlockList, isIP, type LookupFunction } from 'node:net';
import type { WebhookRequest, WebhookResponse, WebhookSender } from '../../runtime/webhooks';

/** Special-use ranges (RFC 6890 and successors) a webhook may reach only when private addresses are allowed. */
const SPECIAL = new BlockList();
for (const [net, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.88.99.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const) {
  SPECIAL.addSubnet(net, prefix, 'ipv4');
}
for (const [net, prefix] of [
  ['::', 128],
  ['::1', 128],
  ['64:ff9b::', 96],
  ['100::', 64],
  ['2001::', 23],
  ['2001:db8::', 32],
  ['fc00::', 7],
  ['fe80::', 10],
  ['fec0::', 10],
  ['ff00::', 8],
] as const) {
  SPECIAL.addSubnet(net, prefix, 'ipv6');
}

/** Whether `address` (an IP literal) is private, loopback or otherwise special-use; IPv4-mapped IPv6 as its IPv4. */
export function isPrivateAddress(address: string): boolean {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return SPECIAL.check(mapped[1], 'ipv4');
  const family = isIP(address);
  if (family === 4) return SPECIAL.check(address, 'ipv4');
  if (family === 6) return SPECIAL.check(address, 'ipv6');
  return true; // not an address: refused
}

export interface HttpWebhookSenderOptions {
  /** Reach private and loopback addresses too (a webhook receiver on this machine or the LAN). Default false. */
  allowPrivate?: boolean;
  /** Tries in flight at once: the keep-alive sockets per origin (default 8). */
  maxSockets?: number;
  /** Name resolution (default dns.lookup); a test names a resolver that answers what it is told. */
  resolve?: typeof dns.lookup;
}

const MAX_ANSWER_BYTES = 64 * 1024;

class Refused extends Error {}

export class HttpWebhookSender implements WebhookSender {
  private readonly allowPrivate: boolean;
  private readonly agents: { http: http.Agent; https: https.Agent };
  private readonly lookup: LookupFunction;

  constructor(options: HttpWebhookSenderOptions = {}) {
    this.allowPrivate = options.allowPrivate ?? false;
    const resolve = options.resolve ?? dns.lookup;
    // The connection's own lookup: every address it may connect to is checked before it connects.
    this.lookup = (hostname, opts, callback) => {
      resolve(hostname, { ...opts, all: true }, (err: NodeJS.ErrnoException | null, addresses: dns.LookupAddress[]) => {
        if (err) return callback(err, '', 0);
        const refused = this.allowPrivate ? undefined : addresses.find((a) => isPrivateAddress(a.address));
        if (refused || addresses.length === 0) {
          return callback(Object.assign(new Refused(`${hostname} resolves to a private or loopback address`), { code: 'EREFUSED' }), '', 0);
        }
        if (opts.all) callback(null, addresses);
        else callback(null, addresses[0].address, addresses[0].family);
      });
    };
    const maxSockets = options.maxSockets ?? 8;
    this.agents = {
      http: new http.Agent({ keepAlive: true, maxSockets, lookup: this.lookup } as http.AgentOptions),
      https: new https.Agent({ keepAlive: true, maxSockets, lookup: this.lookup } as https.AgentOptions),
    };
  }

  send(request: WebhookRequest, signal: AbortSignal): Promise<WebhookResponse> {
    let url: URL;
    try {
      url = new URL(request.url);
    } catch {
      return Promise.resolve({ error: 'invalid URL' });
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') return Promise.resolve({ error: 'only http and https URLs are delivered to' });
    const literal = url.hostname.replace(/^\[|\]$/g, '');
    if (isIP(literal) && !this.allowPrivate && isPrivateAddress(literal)) {
      return Promise.resolve({ error: 'refused: a private or loopback address (not allowed by the configuration)' });
    }
    const https_ = url.protocol === 'https:';
    return new Promise<WebhookResponse>((resolve) => {
      let settled = false;
      const finish = (r: WebhookResponse) => {
        if (settled) return;
        settled = true;
        resolve(r);
      };
      const req = (https_ ? https : http).request(url, {
        method: 'POST',
        agent: https_ ? this.agents.https : this.agents.http,
        headers: { ...request.headers, 'content-length': String(Buffer.byteLength(request.body)) },
        signal,
        timeout: 30_000,
      });
      req.on('socket', (socket) => {
        // The peer actually connected to (an IP literal URL skips the lookup; this checks every new connection; a
        // kept-alive socket was checked when it connected).
        if (!socket.connecting) return;
        socket.once('connect', () => {
          const peer = socket.remoteAddress;
          if (!this.allowPrivate && (!peer || isPrivateAddress(peer))) req.destroy(new Refused('connected to a private or loopback address'));
        });
      });
      req.on('timeout', () => req.destroy(new Error('the endpoint stopped answering')));
      req.on('error', (e: NodeJS.ErrnoException) => {
        if (e instanceof Refused) return finish({ error: `refused: ${e.message} (not allowed by the configuration)` });
        if (e.name === 'AbortError' || signal.aborted) return finish({ error: 'aborted' });
        finish({ error: e.code ?? e.message.slice(0, 200) });
      });
      req.on('response', (res) => {
        const status = res.statusCode ?? 0;
        let read = 0;
        res.on('data', (chunk: Buffer) => {
          read += chunk.length;
          if (read > MAX_ANSWER_BYTES) res.destroy();
        });
        res.on('error', () => undefined);
        // The status decides; the body is read (for the keep-alive socket) and dropped.
        finish({ status });
      });
      req.end(request.body);
    });
  }

  /** Closes the keep-alive sockets. */
  close(): void {
    this.agents.http.destroy();
    this.agents.https.destroy();
  }
}
