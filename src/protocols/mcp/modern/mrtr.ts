// Client input on the 2026-07-28 wire (SEP-2322 MRTR, and the tasks extension's inputRequests): which input
// requests a client may be sent (only those its capabilities declare), what a well-formed answer to each looks like,
// and `requestState` sealing. requestState comes back from the client, so it is
// attacker-controlled: it is HMAC-sealed with a key that never leaves this process, bound to the principal, the tool
// and its arguments, and it expires (docs/mcp.md). A restart forgets the key: an old state is then refused
// (-32602) and the client starts the exchange again.
import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { InputRequest } from '../../../runtime/task';
import { invalidParams } from '../errors';
import type { Envelope } from './wire';
import { isObject } from '../../../runtime/jsonValues';

/** The client capability each input request method needs. */
export const CAPABILITY_OF_METHOD: Readonly<Record<string, string>> = {
  'elicitation/create': 'elicitation',
  'sampling/createMessage': 'sampling',
  'roots/list': 'roots',
};

/** Whether the request's client declared the capability `request` needs (an unknown method: never). */
export function canAnswer(envelope: Envelope, request: InputRequest): boolean {
  const cap = Object.hasOwn(CAPABILITY_OF_METHOD, request.method) ? CAPABILITY_OF_METHOD[request.method] : undefined;
  const declared = cap === undefined ? undefined : envelope.capabilities[cap];
  return !!declared && typeof declared === 'object' && !Array.isArray(declared);
}

/** Only the requests this client may be sent (MRTR: never a request type it did not declare). */
export function answerable(envelope: Envelope, requests: Record<string, InputRequest>): Record<string, InputRequest> {
  return Object.fromEntries(Object.entries(requests).filter(([, r]) => canAnswer(envelope, r)));
}

const isContentBlock = (v: unknown) => isObject(v) && typeof v['type'] === 'string';

/**
 * Why `value` is not a well-formed answer to a request of `method` (the 2026-07-28 ElicitResult, CreateMessageResult
 * and ListRootsResult), or undefined when it is.
 */
export function invalidAnswer(method: string, value: unknown): string | undefined {
  if (!isObject(value)) return 'an answer must be an object';
  switch (method) {
    case 'elicitation/create': {
      if (!['accept', 'decline', 'cancel'].includes(value['action'] as string))
        return 'an elicitation answer needs action "accept", "decline" or "cancel"';
      const content = value['content'];
      if (content === undefined) return undefined;
      if (!isObject(content)) return "an elicitation answer's content must be an object";
      const scalar = (v: unknown) =>
        ['string', 'number', 'boolean'].includes(typeof v) || (Array.isArray(v) && v.every((x) => typeof x === 'string'));
      return Object.values(content).every(scalar) ? undefined : 'elicitation content values must be strings, numbers, booleans or string arrays';
    }
    case 'sampling/createMessage': {
      if (value['role'] !== 'user' && value['role'] !== 'assistant') return 'a sampling answer needs role "user" or "assistant"';
      const c = value['content'];
      return isContentBlock(c) || (Array.isArray(c) && c.every(isContentBlock)) ? undefined : 'a sampling answer needs content blocks';
    }
    case 'roots/list': {
      const roots = value['roots'];
      return Array.isArray(roots) && roots.every((r) => isObject(r) && typeof r['uri'] === 'string')
        ? undefined
        : 'a roots answer needs roots: [{uri}]';
    }
    default:
      return undefined;
  }
}

/** What a sealed state is bound to: it is valid only for the same principal, tool and arguments. */
export interface StateBinding {
  principal: string;
  tool: string;
  arguments: unknown;
}

/** JSON with object keys sorted, so that the same arguments bind the same way whatever order a client sends. */
function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (isObject(v)) {
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical(v[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v ?? null);
}

const b64 = (b: Buffer | string) => Buffer.from(b).toString('base64url');

export const DEFAULT_STATE_TTL_MS = 10 * 60_000;
/** Largest requestState accepted back (a sealed state of ours is far smaller). */
const MAX_STATE_CHARS = 64 * 1024;

export class RequestStateSealer {
  constructor(
    private readonly key: Buffer = randomBytes(32),
    private readonly ttlMs = DEFAULT_STATE_TTL_MS,
    private readonly now: () => number = Date.now,
  ) {}

  private bindingHash(b: StateBinding): string {
    return createHash('sha256')
      .update(canonical([b.principal, b.tool, b.arguments ?? {}]))
      .digest('base64url');
  }

  private mac(payload: string): Buffer {
    return createHmac('sha256', this.key).update(payload).digest();
  }

  /** `v1.<payload>.<mac>`; the payload (data, binding hash, expiry) is readable, not secret: seal no secrets. */
  seal(binding: StateBinding, data: unknown): string {
    const payload = b64(JSON.stringify({ b: this.bindingHash(binding), e: this.now() + this.ttlMs, d: data }));
    return `v1.${payload}.${b64(this.mac(payload))}`;
  }

  /** The data sealed for this binding; -32602 when the state was altered, expired, or made for another call. */
  open(binding: StateBinding, state: unknown): unknown {
    const refuse = (why: string) => invalidParams(`Invalid params: requestState ${why}; call again without it to start over`);
    if (typeof state !== 'string' || state.length > MAX_STATE_CHARS) throw refuse('is not one this server issued');
    const m = /^v1\.([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]+)$/.exec(state);
    if (!m) throw refuse('is not one this server issued');
    const expected = this.mac(m[1]);
    const given = Buffer.from(m[2], 'base64url');
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) throw refuse('failed its integrity check');
    let body: { b?: unknown; e?: unknown; d?: unknown };
    try {
      body = JSON.parse(Buffer.from(m[1], 'base64url').toString('utf8')) as typeof body;
    } catch {
      throw refuse('is not one this server issued');
    }
    if (body.b !== this.bindingHash(binding)) throw refuse('belongs to another call');
    if (typeof body.e !== 'number' || body.e <= this.now()) throw refuse('has expired');
    return body.d;
  }
}
