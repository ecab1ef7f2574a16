// One named remote engine: a pool of OpenAI-compatible endpoints serving the same models. Tasks go to the least-busy
// healthy endpoint (in-flight ÷ its concurrency; ties to the one that served fewer), up to each endpoint's
// concurrency (the setting, else llama.cpp server's `total_slots` from GET /props, else 4) — unless it served the
// request's prefix recently (routing.ts: the cache key, the conversation, the same leading text) and is healthy and
// not overloaded: then it goes back there, where the engine keeps that prefix. An endpoint that fails
// (refused, reset, 429/503, died mid-stream) is taken out with backoff (1 s doubling to 30 s, on an injectable clock)
// and probed back in with GET {base}/models once its backoff has passed. A request that never reached an endpoint
// is tried on the next one at once: nothing was generated, so nothing is lost.
import { BackendError, isBackendError, type ModelCapabilities, type ModelInfo } from '../../runtime/backend';
import { EndpointUnreachable, engineText, streamChat, type ChatStreamRequest, type ChatStreamResult, type StreamTimeouts } from './chatStream';
import type { EngineConfig } from './config';
import { postJson } from './jsonCall';
import {
  ENGINE_PROFILES,
  engineErrorOf,
  kindFromModelList,
  ROUTER_NOT_LOADED,
  ROUTER_START_FAILED,
  ROUTER_START_QUERY,
  ROUTER_UNKNOWN_MODEL,
  routerStatusOf,
  type EngineKind,
  type RouterModelStatus,
} from './quirks';
import { isObject } from '../../runtime/jsonValues';
import { AffinityMap, chooseEndpoint, routingKeys, type RouteDecision, type RoutedMessage, type RoutingKeys } from './routing';

export const DEFAULT_ENDPOINT_CONCURRENCY = 4;
export const DEFAULT_TIMEOUTS = { headersMs: 300_000, idleMs: 120_000, probeMs: 5_000 };
const DEFAULT_MAX_EVENT_BYTES = 1024 * 1024;
/** undici's words for a connection closed by the other side before an answer. */
const STALE_CONNECTION = /UND_ERR_SOCKET|ECONNRESET|other side closed/;
const MAX_MODELS = 1000;
const MAX_DISCOVERY_BYTES = 1024 * 1024;

export interface EngineRuntimeOptions {
  /** Clock for endpoint backoff (ms). */
  now?: () => number;
  backoff?: { baseMs: number; maxMs: number };
  log?: (msg: string) => void;
  /** Called when capacity may have grown (an endpoint came back). */
  onCapacityChange?: () => void;
}

export interface RemoteModel {
  id: string;
  maxContextLength: number | null;
  /** On a llama.cpp router (quirks.ts ROUTER_MODEL_STATUS): whether it takes requests now; absent elsewhere. */
  status?: RouterModelStatus;
}

export class Endpoint {
  state: 'unknown' | 'up' | 'down' = 'unknown';
  failures = 0;
  downUntil = 0;
  lastError: string | undefined;
  models: RemoteModel[] | undefined;
  slots: number | undefined;
  /** The kind its model list suggests (`owned_by`), for the log when none is configured. */
  looksLike: EngineKind | undefined;
  inFlight = 0;
  served = 0;
  /** Requests sent here, by why routing chose it (routing.ts). */
  readonly routed: Record<RouteDecision<Endpoint>['via'], number> = { cache_key: 0, conversation: 0, prefix: 0, least_busy: 0 };
  probing: Promise<void> | undefined;

  constructor(
    readonly url: string,
    /** How clients see it, in task errors and events: the engine's name (and its place in the pool), never the URL. */
    readonly name: string,
    /** How the operator's log names it: with its host:port. */
    readonly label: string,
    readonly configuredConcurrency: number | undefined,
  ) {}

  get concurrency(): number {
    return this.configuredConcurrency ?? this.slots ?? DEFAULT_ENDPOINT_CONCURRENCY;
  }

  /** A llama.cpp router (one server, several models, each with a status). */
  get router(): boolean {
    return !!this.models?.some((m) => m.status !== undefined);
  }

  /** Lists `model` (or lists nothing: any model may be asked for). */
  lists(model: string): boolean {
    return !this.models || this.models.some((m) => m.id === model);
  }

  /** Takes requests for `model` now: listed, and on a router loaded or sleeping (a request wakes it). */
  ready(model: string): boolean {
    return !this.models || this.models.some((m) => m.id === model && (m.status === undefined || m.status === 'ready'));
  }

  setStatus(model: string, status: RouterModelStatus): void {
    const m = this.models?.find((x) => x.id === model);
    if (m?.status !== undefined) m.status = status;
  }
}

/** llama.cpp server serves /props at its root, beside /v1. */
const rootOf = (url: string) => url.replace(/\/v1$/, '');

const positiveInt = (v: unknown, max: number): number | undefined =>
  Number.isSafeInteger(v) && (v as number) >= 1 && (v as number) <= max ? (v as number) : undefined;

/**
 * Parses an engine's GET /v1/models answer; throws on anything that is not a model list. Shapes: `data` entries with
 * `id` (all), `meta.n_ctx_train` (llama.cpp server), `max_model_len` (vLLM), `max_context_length` (LM Studio's REST
 * API), `context_length`; Ollama answers `"data": null` when no model is pulled (an empty list, not an error); an
 * error object in place of the list (LM Studio answers 200 for unknown routes) is reported with its message; a
 * llama.cpp router's `status` per model (quirks.ts ROUTER_MODEL_STATUS).
 */
export function parseModelList(json: unknown): RemoteModel[] {
  if (isObject(json) && json.data === null && !engineErrorOf(json)) return [];
  if (!isObject(json) || !Array.isArray(json.data)) {
    const err = engineErrorOf(json);
    throw new Error(
      `the answer to /models is not a model list${err ? ` (${err.message.slice(0, 200)}); is the URL the OpenAI-style base (…/v1)?` : ''}`,
    );
  }
  const out: RemoteModel[] = [];
  for (const m of json.data.slice(0, MAX_MODELS)) {
    if (!isObject(m) || typeof m.id !== 'string' || !m.id || m.id.length > 256 || /[\u0000-\u001f\u007f]/.test(m.id)) continue;
    const meta = isObject(m.meta) ? m.meta : {};
    const ctx =
      positiveInt(m.max_model_len, 1 << 24) ??
      positiveInt(meta.n_ctx_train, 1 << 24) ??
      positiveInt(m.max_context_length, 1 << 24) ??
      positiveInt(m.context_length, 1 << 24);
    const status = routerStatusOf(m);
    out.push({ id: m.id, maxContextLength: ctx ?? null, ...(status ? { status } : {}) });
  }
  return out;
}

export class RemoteEngine {
  readonly endpoints: Endpoint[];
  private readonly now: () => number;
  private readonly timeouts: StreamTimeouts & { probeMs: number };
  /** Routing key → the endpoint that last served it (routing.ts). */
  private readonly affinity: AffinityMap<Endpoint>;

  constructor(
    readonly config: EngineConfig,
    private readonly o: EngineRuntimeOptions = {},
  ) {
    this.now = o.now ?? Date.now;
    this.timeouts = { ...DEFAULT_TIMEOUTS, ...config.timeouts };
    this.affinity = new AffinityMap(this.now);
    this.endpoints = config.urls.map((url, i) => {
      const c = config.concurrency?.[config.concurrency.length === 1 ? 0 : i];
      const name = config.urls.length > 1 ? `engine "${config.name}" (endpoint ${i + 1} of ${config.urls.length})` : `engine "${config.name}"`;
      return new Endpoint(url, name, `engine "${config.name}" (${new URL(url).host})`, c);
    });
  }

  get name(): string {
    return this.config.name;
  }

  private headers(): Record<string, string> {
    return this.config.apiKey ? { authorization: `Bearer ${this.config.apiKey}` } : {};
  }

  private get backoff() {
    return this.o.backoff ?? { baseMs: 1000, maxMs: 30_000 };
  }

  markDown(ep: Endpoint, reason: string): void {
    ep.failures++;
    ep.state = 'down';
    ep.lastError = reason;
    const wait = Math.min(this.backoff.maxMs, this.backoff.baseMs * 2 ** Math.min(ep.failures - 1, 20));
    ep.downUntil = this.now() + wait;
    this.o.log?.(`${ep.label}: taken out of the pool (${reason}); next probe in ${Math.round(wait / 100) / 10} s`);
  }

  private markUp(ep: Endpoint): void {
    const was = ep.state;
    ep.state = 'up';
    ep.failures = 0;
    ep.lastError = undefined;
    if (was !== 'up') {
      if (was === 'down') this.o.log?.(`${ep.label}: back in the pool`);
      this.o.onCapacityChange?.();
    }
  }

  /** GET {base}/models (and llama.cpp's /props for its slot count); marks the endpoint up or down. */
  probe(ep: Endpoint): Promise<void> {
    ep.probing ??= this.doProbe(ep).finally(() => {
      ep.probing = undefined;
    });
    return ep.probing;
  }

  private async doProbe(ep: Endpoint): Promise<void> {
    try {
      const json = await this.getJson(`${ep.url}/models`);
      ep.models = parseModelList(json);
      ep.looksLike = kindFromModelList(json);
      const slotsPath = ENGINE_PROFILES[this.config.kind ?? 'openai'].slotsPath;
      if (ep.configuredConcurrency === undefined && slotsPath) {
        // llama.cpp server serves /props at its root, beside /v1. A router answers for itself (no slots) unless asked
        // about one of its models: a running one's, never starting one (autoload=false); none running: as before.
        const running = ep.router ? ep.models?.find((m) => m.status === 'ready') : undefined;
        const query = running ? `?model=${encodeURIComponent(running.id)}&autoload=false` : '';
        if (!ep.router || running) {
          const props = await this.getJson(`${rootOf(ep.url)}${slotsPath}${query}`).catch(() => undefined);
          ep.slots = isObject(props) ? positiveInt(props.total_slots, 4096) : undefined;
        }
      }
      this.markUp(ep);
    } catch (e) {
      this.markDown(ep, engineText(e instanceof Error ? e.message : String(e), this.config.apiKey));
    }
  }

  private async getJson(url: string): Promise<unknown> {
    let res: Response;
    try {
      res = await fetch(url, { headers: this.headers(), redirect: 'manual', signal: AbortSignal.timeout(this.timeouts.probeMs) });
    } catch (e) {
      const err = e as { name?: string; cause?: { code?: string } };
      throw new Error(err.name === 'TimeoutError' ? `no answer within ${this.timeouts.probeMs} ms` : (err.cause?.code ?? 'not reachable'));
    }
    if (res.status !== 200) {
      await res.body?.cancel().catch(() => {});
      throw new Error(`GET ${new URL(url).pathname} answered HTTP ${res.status}`);
    }
    const len = Number(res.headers.get('content-length') ?? 0);
    if (len > MAX_DISCOVERY_BYTES) {
      await res.body?.cancel().catch(() => {});
      throw new Error('the model list is too large');
    }
    const text = await res.text();
    if (text.length > MAX_DISCOVERY_BYTES) throw new Error('the model list is too large');
    try {
      return JSON.parse(text) as unknown;
    } catch {
      throw new Error(`GET ${new URL(url).pathname} did not answer JSON`);
    }
  }

  /** Probes every endpoint not known up whose backoff has passed; `all` waits for them. */
  async probeDue(): Promise<void> {
    const now = this.now();
    const due = this.endpoints.filter((e) => e.state === 'unknown' || (e.state === 'down' && now >= e.downUntil));
    await Promise.all(due.map((e) => this.probe(e)));
  }

  /** Probes every endpoint (start-up, refresh of the model list). */
  async refresh(): Promise<void> {
    await Promise.all(this.endpoints.map((e) => this.probe(e)));
  }

  get up(): Endpoint[] {
    return this.endpoints.filter((e) => e.state === 'up');
  }

  /**
   * What its models' generation supports, from what the engine kind takes (quirks.ts ENGINE_PROFILES): tools when it
   * takes function tools (their calls come back as function_call items), reasoning when it takes a reasoning effort
   * (its reasoning stream becomes reasoning items). Whether a model's template honours them is the engine's to say.
   */
  private get capabilities(): ModelCapabilities {
    const fields = ENGINE_PROFILES[this.config.kind ?? 'openai'].request;
    return { tools: fields.tools !== false, reasoning: fields.reasoningEffort !== undefined };
  }

  /** Engine model ids known from the endpoints' lists (union, in order), restricted to the allow-list. */
  knownModels(): RemoteModel[] | undefined {
    const lists = this.endpoints.map((e) => e.models).filter((m): m is RemoteModel[] => m !== undefined);
    const allow = this.config.models?.length ? new Set(this.config.models) : undefined;
    if (!lists.length) return allow ? [...allow].map((id) => ({ id, maxContextLength: null })) : undefined;
    const seen = new Map<string, RemoteModel>();
    for (const list of lists) for (const m of list) if (!seen.has(m.id) && (!allow || allow.has(m.id))) seen.set(m.id, m);
    return [...seen.values()];
  }

  /** Whether `model` (engine id) may be asked for: allowed, and listed once any list is known. */
  accepts(model: string): boolean {
    if (!model || model.length > 256) return false;
    if (this.config.models?.length && !this.config.models.includes(model)) return false;
    const lists = this.endpoints.map((e) => e.models).filter((m) => m !== undefined);
    return !lists.length || lists.some((l) => l.some((m) => m.id === model));
  }

  listModels(): ModelInfo[] {
    const models = this.knownModels() ?? [];
    const up = this.up;
    return models.map((m) => {
      const known = this.endpoints.some((e) => e.state !== 'unknown');
      const listing = up.filter((e) => e.lists(m.id));
      const status = (s: RouterModelStatus) => listing.some((e) => e.models?.find((x) => x.id === m.id)?.status === s);
      // A router's model: loaded (or sleeping) somewhere, else loading somewhere, else not started (or failed).
      const state: ModelInfo['state'] = !listing.length
        ? known
          ? 'error'
          : 'unloaded'
        : listing.some((e) => e.ready(m.id))
          ? 'loaded'
          : status('loading')
            ? 'loading'
            : status('unloaded')
              ? 'unloaded'
              : 'error';
      return {
        id: `${this.name}/${m.id}`,
        source: `${this.name}: ${this.endpoints.map((e) => e.url).join(', ')}`,
        state,
        maxContextLength: m.maxContextLength,
        demo: false,
        engine: this.name,
        capabilities: this.capabilities,
      };
    });
  }

  /** Tasks that may run at once: the healthy endpoints' concurrency; with none healthy, one per endpoint (to probe). */
  capacity(): number {
    const up = this.up;
    return up.length ? up.reduce((n, e) => n + e.concurrency, 0) : this.endpoints.length;
  }

  unavailable(retryAfterMs?: number): BackendError {
    const now = this.now();
    const reasons = this.endpoints.map((e) => `${new URL(e.url).host}: ${e.lastError ?? 'not probed yet'}`).join('; ');
    const waits = this.endpoints.filter((e) => e.state === 'down').map((e) => Math.max(0, e.downUntil - now));
    return new BackendError(
      'unavailable',
      'backend_unavailable',
      `No endpoint of engine "${this.name}" is reachable (${reasons}).`,
      Math.max(retryAfterMs ?? 0, waits.length ? Math.min(...waits) : 0) || undefined,
    );
  }

  /** Endpoints that may take a request for `model` now: up, listing it (or listing nothing), not tried yet. */
  private eligible(model: string, tried: ReadonlySet<Endpoint>): Endpoint[] {
    return this.up.filter((e) => !tried.has(e) && e.lists(model));
  }

  /** Whether a healthy endpoint takes requests for `model` now (on a router: loaded or sleeping there). */
  ready(model: string): boolean {
    return this.up.some((e) => e.ready(model));
  }

  /**
   * Starts `model` on a llama.cpp router of the pool that lists it and waits until it runs: GET /props for the model
   * with autoload=true, which the router answers once the model is loaded, after its own queue and eviction
   * (--models-max), whether or not it starts models by itself (quirks.ts ROUTER_START_QUERY). A start that fails fails
   * (model_load_failed, the router's words); no answer within the headers timeout, or a refusal to try now, is
   * `unavailable` (the task waits queued and tries again).
   */
  async loadOnRouter(model: string, signal?: AbortSignal): Promise<void> {
    const ep = this.up.find((e) => e.router && e.lists(model));
    if (!ep) return;
    ep.setStatus(model, 'loading');
    const timeout = AbortSignal.timeout(this.timeouts.headersMs);
    let res: Response;
    try {
      res = await fetch(`${rootOf(ep.url)}/props?model=${encodeURIComponent(model)}&${ROUTER_START_QUERY}`, {
        headers: this.headers(),
        redirect: 'manual',
        signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
      });
    } catch (e) {
      if (signal?.aborted) throw e;
      ep.setStatus(model, 'unloaded');
      throw this.unavailable();
    }
    const text = await res.text().catch(() => '');
    if (res.status === 200) {
      ep.setStatus(model, 'ready');
      let props: unknown;
      try {
        props = JSON.parse(text);
      } catch {
        props = undefined;
      }
      ep.slots = (isObject(props) ? positiveInt(props.total_slots, 4096) : undefined) ?? ep.slots;
      // Its list entry now carries what the running model reports (its context).
      await this.probe(ep);
      this.o.onCapacityChange?.();
      return;
    }
    ep.setStatus(model, 'unloaded');
    let said: string | undefined;
    try {
      said = engineErrorOf(JSON.parse(text))?.message;
    } catch {
      said = undefined;
    }
    const words = `HTTP ${res.status}${said ? `: ${engineText(said, this.config.apiKey)}` : ''}`;
    if (said && ROUTER_START_FAILED.test(said)) {
      ep.setStatus(model, 'failed');
      throw new BackendError('failed', 'model_load_failed', `${ep.name} could not start "${model}" (${words}).`);
    }
    if (said && ROUTER_UNKNOWN_MODEL.test(said))
      throw new BackendError('failed', 'model_not_found', `${ep.name} does not have "${model}" (${words}).`);
    throw new BackendError('unavailable', 'backend_unavailable', `${ep.name} did not start "${model}" now (${words}).`);
  }

  /** Where a request with these routing keys goes now (routing.ts), and why; undefined when no endpoint may take it. */
  route(model: string, keys: RoutingKeys, tried: ReadonlySet<Endpoint> = new Set()): RouteDecision<Endpoint> | undefined {
    return chooseEndpoint(this.eligible(model, tried), this.affinity.lookup(keys));
  }

  /** Streams one chat completion on the best endpoint, moving on to the next one while endpoints are unreachable. */
  async chat(
    model: string,
    body: Record<string, unknown>,
    signal: AbortSignal,
    onDelta: ChatStreamRequest['onDelta'],
    logprobs = false,
    cacheKey?: string,
  ): Promise<ChatStreamResult & { endpoint: string }> {
    // Endpoints whose backoff passed are probed: awaited only when no healthy one could take the task.
    const probes = this.probeDue();
    if (!this.eligible(model, new Set()).length) await probes;
    const keys = routingKeys(model, Array.isArray(body.messages) ? (body.messages as RoutedMessage[]) : [], cacheKey);
    const tried = new Set<Endpoint>();
    let last: BackendError | undefined;
    for (;;) {
      const decision = this.route(model, keys, tried);
      if (!decision) throw this.unavailable(last?.retryAfterMs);
      const ep = decision.endpoint;
      tried.add(ep);
      this.affinity.remember(keys, ep);
      ep.routed[decision.via]++;
      ep.inFlight++;
      ep.served++;
      try {
        const request = {
          baseUrl: ep.url,
          label: ep.name,
          apiKey: this.config.apiKey,
          body: { ...body, model },
          signal,
          timeouts: this.timeouts,
          maxEventBytes: this.config.maxEventBytes ?? DEFAULT_MAX_EVENT_BYTES,
          logprobs,
          onDelta,
        };
        const r = await streamChat(request).catch((e: unknown) => {
          // A kept-alive connection the server closed as the request went out (llama.cpp server closes one after
          // 100 requests): nothing reached it, so once more on a fresh connection before taking it out of the pool.
          if (e instanceof EndpointUnreachable && STALE_CONNECTION.test(e.message) && !signal.aborted) return streamChat(request);
          throw e;
        });
        if (ep.router) ep.setStatus(model, 'ready');
        return { ...r, endpoint: ep.url };
      } catch (e) {
        if (ep.router && isBackendError(e) && e.code === 'invalid_request' && ROUTER_NOT_LOADED.test(e.message)) {
          // A router that does not start models by itself stopped this one since it was listed: back to the queue,
          // where load() starts it.
          ep.setStatus(model, 'unloaded');
          throw new BackendError('unavailable', 'backend_unavailable', `${ep.name}: "${model}" is not loaded there; starting it.`);
        }
        if (e instanceof EndpointUnreachable) {
          this.markDown(ep, e.message.replace(`${ep.name} `, ''));
          last = e;
          continue;
        }
        if (isBackendError(e) && e.kind === 'interrupted') this.markDown(ep, 'stopped mid-response');
        throw e;
      } finally {
        ep.inFlight--;
      }
    }
  }

  /**
   * One direct call (embeddings, rerank: a JSON answer, jsonCall.ts) on the least-busy healthy endpoint that lists
   * the model, moving on to the next one while endpoints are unreachable, as chat does. No prefix affinity: nothing of
   * the call stays in an engine's cache.
   */
  async call(model: string, path: string, body: Record<string, unknown>, signal: AbortSignal): Promise<unknown> {
    const probes = this.probeDue();
    if (!this.eligible(model, new Set()).length) await probes;
    const tried = new Set<Endpoint>();
    let last: BackendError | undefined;
    for (;;) {
      const decision = chooseEndpoint(this.eligible(model, tried), undefined);
      if (!decision) throw this.unavailable(last?.retryAfterMs);
      const ep = decision.endpoint;
      tried.add(ep);
      ep.routed[decision.via]++;
      ep.inFlight++;
      ep.served++;
      try {
        const request = {
          baseUrl: ep.url,
          path,
          label: ep.name,
          apiKey: this.config.apiKey,
          body: { ...body, model },
          signal,
          timeouts: this.timeouts,
          maxErrorBytes: this.config.maxEventBytes ?? DEFAULT_MAX_EVENT_BYTES,
        };
        return await postJson(request).catch((e: unknown) => {
          if (e instanceof EndpointUnreachable && STALE_CONNECTION.test(e.message) && !signal.aborted) return postJson(request);
          throw e;
        });
      } catch (e) {
        if (e instanceof EndpointUnreachable) {
          this.markDown(ep, e.message.replace(`${ep.name} `, ''));
          last = e;
          continue;
        }
        throw e;
      } finally {
        ep.inFlight--;
      }
    }
  }
}
