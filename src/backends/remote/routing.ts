// Cache-aware routing for a pool of endpoints (engine.ts): a request goes back to the endpoint that served its prefix
// recently, where the engine still holds that prefix's KV cache (llama.cpp server's slots and host prompt cache,
// vLLM's and SGLang's prefix caches), so the prompt is not evaluated again; least-busy otherwise. As vLLM's
// production-stack router and SGLang's cache-aware router do, the prefix wins only while its endpoint is healthy and
// not overloaded; a broken affinity is replaced by the least-busy endpoint's.
// Kept here as data and pure functions (an injectable clock) so that every rule is a unit test:
// - keys, strongest first: the request's `prompt_cache_key`; the conversation — the end of an earlier request's
//   prompt where this one goes on with an assistant turn (a `previous_response_id` chain resolves to exactly that
//   history, and so does a client that sends the whole conversation again); the same leading text — the rendered
//   prompt's hash at every PREFIX_CHUNK_CHARS characters (the longest hit wins);
// - affinity map: bounded (MAX_AFFINITY_KEYS, least recently used forgotten first), each key forgotten
//   AFFINITY_TTL_MS after its last use (an engine's cache turns over; an old affinity is no better than least-busy);
// - kept while the endpoint is eligible (up, serves the model, not yet tried for this request) and has a free slot
//   (in-flight < concurrency): a conversation's own history is worth its place in a busier batch (measured in
//   bench/remote.ts: breaking it at a small imbalance re-evaluated the whole history elsewhere, slower than
//   least-busy). A shared leading text alone (weaker: every endpoint soon holds a common system prompt) also needs
//   a busy share at most AFFINITY_MAX_IMBALANCE above the least-busy endpoint's. Otherwise least-busy (in-flight ÷
//   concurrency, ties to the one that served fewer), and the request's keys move there.
// Keys are hashes of the model id and the text: the map holds no prompt text.
import { createHash, type Hash } from 'node:crypto';

/** Keys a pool remembers (least recently used forgotten first). */
export const MAX_AFFINITY_KEYS = 16_384;
/** A key is forgotten this long after it was last used. */
export const AFFINITY_TTL_MS = 10 * 60_000;
/**
 * How much busier (in-flight ÷ concurrency) than the least-busy endpoint the endpoint of a shared leading text may be
 * and still be chosen (a conversation's or cache key's endpoint only needs a free slot).
 */
export const AFFINITY_MAX_IMBALANCE = 0.5;
/** Leading-text keys every this many characters of the rendered prompt… */
export const PREFIX_CHUNK_CHARS = 512;
/** …for at most this many chunks (the first 32 KiB); longer prompts also get a key at each power of two beyond. */
export const MAX_PREFIX_CHUNKS = 64;
/** Conversation keys looked up per request (its latest assistant turns). */
const MAX_TURN_KEYS = 32;

export type RouteVia = 'cache_key' | 'conversation' | 'prefix';

export interface RoutingKeys {
  cacheKey?: string;
  /** Hashes of the prompt up to before each assistant turn, latest first: where an earlier request's prompt ended. */
  turns: string[];
  /** Hash of this request's whole prompt: the next turn's conversation key. */
  whole: string;
  /** Hashes of the leading text at chunk boundaries, longest first. */
  prefixes: string[];
}

/** One message as routing sees it (chat/completions' wire shape). */
export interface RoutedMessage {
  role: string;
  content: string | null;
  tool_calls?: unknown;
  tool_call_id?: string;
}

/**
 * The routing keys of a request to `model`: the prompt rendered as role, content, calls and call id per message
 * (separated so that no two different prompts render alike), hashed incrementally.
 */
export function routingKeys(model: string, messages: readonly RoutedMessage[], cacheKey?: string): RoutingKeys {
  const h = createHash('sha256').update(model).update('\u0000');
  const digest = (x: Hash) => x.copy().digest('base64url');
  const turns: string[] = [];
  const prefixes: string[] = [];
  let length = 0;
  let nextChunk = PREFIX_CHUNK_CHARS;
  const feed = (text: string) => {
    let at = 0;
    while (length + (text.length - at) >= nextChunk) {
      const take = nextChunk - length;
      h.update(text.slice(at, at + take));
      at += take;
      length += take;
      prefixes.push(digest(h));
      const chunks = nextChunk / PREFIX_CHUNK_CHARS;
      nextChunk = chunks < MAX_PREFIX_CHUNKS ? nextChunk + PREFIX_CHUNK_CHARS : nextChunk * 2;
    }
    h.update(text.slice(at));
    length += text.length - at;
  };
  for (const m of messages) {
    if (m.role === 'assistant') turns.push(`c:${digest(h)}`);
    feed(`\u0001${m.role}\u0002${m.content ?? ''}`);
    if (m.tool_calls !== undefined) feed(`\u0003${JSON.stringify(m.tool_calls)}`);
    if (m.tool_call_id !== undefined) feed(`\u0004${m.tool_call_id}`);
  }
  return {
    ...(cacheKey !== undefined ? { cacheKey: `k:${model}\u0000${cacheKey}` } : {}),
    turns: turns.reverse().slice(0, MAX_TURN_KEYS),
    whole: `c:${digest(h)}`,
    prefixes: prefixes.reverse().map((p) => `p:${p}`),
  };
}

interface Entry<T> {
  endpoint: T;
  at: number;
}

/** Routing key → the endpoint that last served it; a Map's order is the LRU order (re-inserted on use). */
export class AffinityMap<T> {
  private readonly map = new Map<string, Entry<T>>();

  constructor(
    private readonly now: () => number = Date.now,
    private readonly maxKeys = MAX_AFFINITY_KEYS,
    private readonly ttlMs = AFFINITY_TTL_MS,
  ) {}

  get size(): number {
    return this.map.size;
  }

  private get(key: string): T | undefined {
    const e = this.map.get(key);
    if (!e) return undefined;
    if (this.now() - e.at > this.ttlMs) {
      this.map.delete(key);
      return undefined;
    }
    return e.endpoint;
  }

  /** The endpoint of the strongest key known: cache key, then the latest turn, then the longest prefix. */
  lookup(keys: RoutingKeys): { endpoint: T; via: RouteVia } | undefined {
    if (keys.cacheKey !== undefined) {
      const e = this.get(keys.cacheKey);
      if (e !== undefined) return { endpoint: e, via: 'cache_key' };
    }
    for (const k of keys.turns) {
      const e = this.get(k);
      if (e !== undefined) return { endpoint: e, via: 'conversation' };
    }
    for (const k of keys.prefixes) {
      const e = this.get(k);
      if (e !== undefined) return { endpoint: e, via: 'prefix' };
    }
    return undefined;
  }

  /** Records that `endpoint` now holds this request's prefix: its cache key, its whole prompt and its chunks. */
  remember(keys: RoutingKeys, endpoint: T): void {
    const at = this.now();
    const all = [...(keys.cacheKey !== undefined ? [keys.cacheKey] : []), keys.whole, ...keys.prefixes];
    // Shortest prefix first, so that under pressure the longer (more specific) keys are the last forgotten.
    for (const k of all.reverse()) {
      this.map.delete(k);
      this.map.set(k, { endpoint, at });
    }
    while (this.map.size > this.maxKeys) this.map.delete(this.map.keys().next().value!);
  }
}

/** What routing needs to know of an endpoint. */
export interface EndpointLoad {
  inFlight: number;
  concurrency: number;
  served: number;
}

export interface RouteDecision<T> {
  endpoint: T;
  /** Why: the affinity that held, or least-busy. */
  via: RouteVia | 'least_busy';
  /** Set when an affinity was known but not followed: its endpoint was not eligible, or too busy. */
  broken?: 'unavailable' | 'overloaded';
}

const busy = (e: EndpointLoad) => e.inFlight / e.concurrency;

/** The least-busy of `eligible` (in-flight ÷ concurrency; ties to the one that served fewer, then the first). */
export function leastBusy<T extends EndpointLoad>(eligible: readonly T[]): T | undefined {
  let best: T | undefined;
  for (const e of eligible) {
    if (!best || busy(e) < busy(best) || (busy(e) === busy(best) && e.served < best.served)) best = e;
  }
  return best;
}

/**
 * Chooses among `eligible` (healthy, serving the model, not tried yet for this request): the affine endpoint while it
 * is eligible and has a free slot (for a shared prefix alone: and is at most AFFINITY_MAX_IMBALANCE busier than the
 * least-busy); else least-busy.
 */
export function chooseEndpoint<T extends EndpointLoad>(
  eligible: readonly T[],
  affine: { endpoint: T; via: RouteVia } | undefined,
): RouteDecision<T> | undefined {
  const least = leastBusy(eligible);
  if (!least) return undefined;
  if (!affine) return { endpoint: least, via: 'least_busy' };
  const a = affine.endpoint;
  if (!eligible.includes(a)) return { endpoint: least, via: 'least_busy', broken: 'unavailable' };
  if (a.inFlight >= a.concurrency || (affine.via === 'prefix' && busy(a) - busy(least) > AFFINITY_MAX_IMBALANCE)) {
    return { endpoint: least, via: 'least_busy', broken: 'overloaded' };
  }
  return { endpoint: a, via: affine.via };
}
