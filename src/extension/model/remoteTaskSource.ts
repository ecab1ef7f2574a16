// TaskSource over the owner window's LMSP endpoint, for a window that does not own the store. Node fetch, bearer
// token; the live tree comes from the owner's `task_runtime/changes` SSE feed. That feed carries live changes only,
// so every connect (the first one too) tells listeners to reload: a change made while the feed was not connected
// (between the window's first list and the connect, or during a drop) is then not lost. Every wire name (paths,
// headers, query parameters, event types, vendor members) comes from the door's own lmspConstants.ts, so the client
// and the server cannot drift apart.
import { CLIENT_FACING_CODES, RuntimeError, type RuntimeErrorCode } from '../../runtime/errors';
import { RESTART_POLICIES, TASK_ORIGINS, TASK_STATUSES, type Problem, type RestartPolicy, type TaskStatus, type Usage } from '../../runtime/task';
import type { IDisposable } from '../lifecycle';
import { SseParser, type SseEvent } from '../../protocols/http/sseParser';
import {
  DEFAULTS,
  EDITOR_ORIGIN,
  EVENT_TASK_CHANGED,
  HEADERS,
  PATHS,
  QUERY,
  TASK_PATHS,
  TASK_TYPE_RESPONSE,
  TERMINAL_EVENT_TYPES,
  VENDOR_MEMBER,
} from '../../protocols/lmsp/lmspConstants';
import {
  emptyCounts,
  toResponseRequest,
  type CreateTaskRequest,
  type EventStreamHandlers,
  type ModelSummary,
  type TaskInfo,
  type TaskListQuery,
  type TaskPage,
  type TaskSource,
} from './taskSource';
import { isObject } from '../../runtime/jsonValues';

const RECONNECT_MS = 1000;
/** The LMSP list route's largest page. */
const REMOTE_PAGE_MAX = DEFAULTS.maxListLimit;
/**
 * The largest SSE event read from the owner. Far above any it sends (a task object or a final response holds a
 * prompt from a body of at most DEFAULTS.maxBodyBytes and an output bounded by the model's context); a peer that
 * sends more has the stream dropped (and resumed after the last event seen) instead of growing this window's memory.
 */
const MAX_EVENT_BYTES = 64 * 1024 * 1024;

export interface RemoteTaskSourceOptions {
  /** e.g. http://127.0.0.1:4567/lmsp/v1 */
  lmspUrl: string;
  token: string;
  /**
   * Mark created tasks as made in the editor (the `task_runtime.origin` vendor member of a task create request).
   * The owner accepts it only from its editor token; other clients are refused with 403.
   */
  editorOrigin?: boolean;
  log?: (message: string) => void;
}

function pick<T extends string>(values: readonly T[], v: unknown, fallback: T): T {
  return values.includes(v as T) ? (v as T) : fallback;
}

/** Maps an LMSP task object (with the optional `task_runtime` vendor member) onto TaskInfo. */
export function taskInfoFromLmsp(o: unknown): TaskInfo {
  if (!isObject(o) || typeof o['id'] !== 'string') throw new Error('malformed task object');
  const vendor = isObject(o[VENDOR_MEMBER]) ? o[VENDOR_MEMBER] : {};
  const response = isObject(o['response']) ? o['response'] : null;
  const usage = response && isObject(response['usage']) ? (response['usage'] as unknown as Usage) : null;
  const createdSec = typeof o['created_at'] === 'number' ? o['created_at'] * 1000 : Date.now();
  const updatedSec = typeof o['updated_at'] === 'number' ? o['updated_at'] * 1000 : createdSec;
  const num = (v: unknown, d: number) => (typeof v === 'number' && Number.isFinite(v) ? v : d);
  const str = (v: unknown, d: string) => (typeof v === 'string' ? v : d);
  return {
    id: o['id'],
    responseId: typeof o['response_id'] === 'string' ? o['response_id'] : null,
    status: pick(TASK_STATUSES, vendor['status'] ?? o['status'], 'queued'),
    origin: TASK_ORIGINS.includes(vendor['origin'] as never) ? (vendor['origin'] as TaskInfo['origin']) : undefined,
    title: str(vendor['title'], o['id']),
    model: str(vendor['model'], response && typeof response['model'] === 'string' ? response['model'] : ''),
    statusMessage: typeof vendor['status_message'] === 'string' ? vendor['status_message'] : null,
    createdAt: num(vendor['created_at_ms'], createdSec),
    updatedAt: num(vendor['updated_at_ms'], updatedSec),
    onRestart: pick(RESTART_POLICIES, o['on_restart'], 'fail' as RestartPolicy),
    attempt: num(vendor['attempt'], 1),
    outputTokens: num(vendor['output_tokens'], usage ? usage.output_tokens : 0),
    usage,
    error: isObject(o['error']) ? (o['error'] as unknown as Problem) : null,
    response,
    prompt: typeof vendor['prompt'] === 'string' ? vendor['prompt'] : undefined,
    ...(typeof vendor['priority'] === 'number' ? { priority: vendor['priority'] } : {}),
    ...(isObject(vendor['queue']) && typeof vendor['queue']['position'] === 'number'
      ? {
          queue: {
            position: vendor['queue']['position'],
            expectedStartAt: typeof vendor['queue']['expected_start_at_ms'] === 'number' ? vendor['queue']['expected_start_at_ms'] : null,
          },
        }
      : {}),
  };
}

export class RemoteTaskSource implements TaskSource {
  readonly kind = 'remote' as const;
  private readonly base: string;
  private readonly changeListeners = new Set<(task: TaskInfo, deleted: boolean) => void>();
  private readonly invalidateListeners = new Set<() => void>();
  private changesAbort: AbortController | undefined;
  private feedConnected = false;
  private connectWaiters: Array<{ resolve: () => void; reject: (e: Error) => void }> = [];
  private readonly streams = new Set<AbortController>();
  private disposed = false;

  constructor(private readonly options: RemoteTaskSourceOptions) {
    this.base = options.lmspUrl.replace(/\/+$/, '');
  }

  private headers(extra?: Record<string, string>): Record<string, string> {
    return { authorization: `Bearer ${this.options.token}`, accept: 'application/json', ...extra };
  }

  private async request(method: string, path: string, body?: unknown): Promise<unknown> {
    const res = await fetch(this.base + path, {
      method,
      headers: this.headers(body === undefined ? undefined : { 'content-type': 'application/json' }),
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    let json: unknown = undefined;
    if (text) {
      try {
        json = JSON.parse(text);
      } catch {
        json = undefined;
      }
    }
    if (!res.ok) throw problemError(res.status, json);
    return json;
  }

  async list(query: TaskListQuery): Promise<TaskPage> {
    const params = new URLSearchParams();
    if (query.statuses?.length) {
      // LMSP shows input_required as running and has no filter for it.
      const statuses = query.statuses.filter((s) => s !== 'input_required');
      if (!statuses.length) return { tasks: [], nextCursor: null };
      params.set(QUERY.status, statuses.join(','));
    }
    if (query.cursor) params.set(QUERY.cursor, query.cursor);
    if (query.limit) params.set(QUERY.limit, String(Math.min(query.limit, REMOTE_PAGE_MAX)));
    const qs = params.toString();
    const body = await this.request('GET', `${PATHS.tasks}${qs ? `?${qs}` : ''}`);
    if (!isObject(body) || !Array.isArray(body['data'])) throw new Error('malformed task list');
    const tasks = body['data'].map(taskInfoFromLmsp);
    let nextCursor: string | null = null;
    if (typeof body['next_cursor'] === 'string') nextCursor = body['next_cursor'];
    else if (body['has_more'] === true && typeof body['last_id'] === 'string') nextCursor = body['last_id'];
    return { tasks, nextCursor };
  }

  async counts(): Promise<Record<TaskStatus, number>> {
    // Prefer the owner's counts route; fall back to paging (fine for the hundreds a client window shows).
    try {
      const body = await this.request('GET', PATHS.counts);
      if (isObject(body) && isObject(body['by_status'])) {
        const counts = emptyCounts();
        for (const s of TASK_STATUSES) {
          const n = body['by_status'][s];
          if (typeof n === 'number') counts[s] = n;
        }
        return counts;
      }
    } catch (e) {
      // An owner without the counts route answers a problem: page instead. Transport failures propagate.
      if (!(e instanceof RuntimeError)) throw e;
    }
    const counts = emptyCounts();
    let cursor: string | undefined;
    for (let i = 0; i < 100; i++) {
      const page = await this.list({ cursor, limit: REMOTE_PAGE_MAX });
      for (const t of page.tasks) counts[t.status]++;
      if (!page.nextCursor) break;
      cursor = page.nextCursor;
    }
    return counts;
  }

  async get(id: string): Promise<TaskInfo | undefined> {
    try {
      return taskInfoFromLmsp(await this.request('GET', taskPath(id)));
    } catch (e) {
      if (e instanceof RuntimeError && e.code === 'task_not_found') return undefined;
      throw e;
    }
  }

  async create(request: CreateTaskRequest): Promise<TaskInfo> {
    // LMSP requires a model: without one, the owner's default (its first listed model).
    const model = request.model ?? (await this.listModels())[0]?.id;
    if (!model) throw new Error('The owning window offers no model.');
    const input = { ...toResponseRequest(request), model };
    const body = await this.request('POST', PATHS.tasks, {
      type: TASK_TYPE_RESPONSE,
      input,
      on_restart: request.onRestart ?? 'fail',
      ...(this.options.editorOrigin ? { [VENDOR_MEMBER]: { origin: EDITOR_ORIGIN } } : {}),
    });
    return taskInfoFromLmsp(body);
  }

  async cancel(id: string): Promise<TaskInfo> {
    return taskInfoFromLmsp(await this.request('POST', taskPath(id, TASK_PATHS.cancel)));
  }

  async cancelMany(statuses: ReadonlyArray<'queued' | 'running'>): Promise<TaskInfo[]> {
    const body = await this.request('POST', PATHS.cancelTasks, { status: statuses });
    return isObject(body) && Array.isArray(body['data']) ? body['data'].map(taskInfoFromLmsp) : [];
  }

  async runNext(id: string): Promise<TaskInfo> {
    return taskInfoFromLmsp(await this.request('POST', taskPath(id, TASK_PATHS.runNext)));
  }

  async delete(id: string): Promise<void> {
    await this.request('DELETE', taskPath(id));
  }

  async listModels(): Promise<ModelSummary[]> {
    const body = await this.request('GET', PATHS.models);
    if (!isObject(body) || !Array.isArray(body['data'])) return [];
    return body['data'].filter(isObject).map((m) => ({
      id: String(m['id']),
      source: typeof m['source'] === 'string' ? m['source'] : String(m['id']),
      state: typeof m['state'] === 'string' ? m['state'] : 'unknown',
      demo: m['demo'] === true,
      maxContextLength: positiveInt(m['max_context_length']),
      contextLength: isObject(m[VENDOR_MEMBER]) ? positiveInt(m[VENDOR_MEMBER]['context_length']) : null,
      ...(typeof m['owned_by'] === 'string' && m['owned_by'] !== 'local' ? { engine: m['owned_by'] } : {}),
      ...capabilitiesOf(m['capabilities']),
      ...hardwareSummary(m[VENDOR_MEMBER]),
    }));
  }

  /** LMSP has no tokenize route: the owner's tokenizer is not reachable from here, the caller estimates. */
  async countTokens(): Promise<number | null> {
    return null;
  }

  subscribeEvents(id: string, afterSeq: number | undefined, handlers: EventStreamHandlers): IDisposable {
    const abort = new AbortController();
    this.streams.add(abort);
    let last = afterSeq;
    let ended = false;
    const run = async (): Promise<void> => {
      const headers = this.headers({ accept: 'text/event-stream' });
      if (last !== undefined) headers[HEADERS.lastEventId] = String(last);
      const res = await fetch(this.base + taskPath(id, TASK_PATHS.events), { headers, signal: abort.signal });
      if (!res.ok) {
        const text = await res.text().catch(() => '');
        let json: unknown;
        try {
          json = JSON.parse(text);
        } catch {
          json = undefined;
        }
        throw problemError(res.status, json);
      }
      if (res.status === 204 || !res.body) {
        ended = true;
        return;
      }
      const deliver = (m: SseEvent): void => {
        let data: unknown;
        try {
          data = JSON.parse(m.data);
        } catch {
          return;
        }
        if (!isObject(data)) return;
        const seq = m.id !== undefined && /^\d+$/.test(m.id) ? Number(m.id) : Number(data['sequence_number']);
        if (!Number.isInteger(seq) || (last !== undefined && seq <= last)) return;
        last = seq;
        const { type: _t, sequence_number: _s, ...rest } = data;
        const type = typeof data['type'] === 'string' ? data['type'] : m.event;
        if (TERMINAL_EVENT_TYPES.has(type)) ended = true;
        handlers.onEvent({ seq, type, data: rest });
      };
      const parser = new SseParser(MAX_EVENT_BYTES);
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        for (const m of parser.pushEvents(chunk)) deliver(m);
      }
    };
    void (async () => {
      let failures = 0;
      while (!abort.signal.aborted && !ended) {
        try {
          await run();
          failures = 0;
        } catch (e) {
          if (abort.signal.aborted) return;
          // HTTP problems (not found, history expired) are final; transport failures get a few retries.
          if (e instanceof RuntimeError || ++failures > 3) {
            handlers.onError?.(e instanceof Error ? e : new Error(String(e)));
            this.streams.delete(abort);
            return;
          }
        }
        if (!ended && !abort.signal.aborted) await delay(RECONNECT_MS, abort.signal);
      }
      this.streams.delete(abort);
      if (ended && !abort.signal.aborted) handlers.onEnd?.();
    })();
    return {
      dispose: () => {
        abort.abort();
        this.streams.delete(abort);
      },
    };
  }

  onDidChangeTask(listener: (task: TaskInfo, deleted: boolean) => void): IDisposable {
    this.changeListeners.add(listener);
    this.ensureChangesFeed();
    return {
      dispose: () => {
        this.changeListeners.delete(listener);
        if (!this.changeListeners.size) {
          this.changesAbort?.abort();
          this.changesAbort = undefined;
          this.feedConnected = false;
        }
      },
    };
  }

  /** Fired on every connect of the change feed (the first one too): changes may have been missed, reload everything. */
  onDidInvalidate(listener: () => void): IDisposable {
    this.invalidateListeners.add(listener);
    return { dispose: () => this.invalidateListeners.delete(listener) };
  }

  /**
   * Resolves when the change feed is connected and invalidate listeners have been told to reload; at once while it
   * is. The feed runs while there are change listeners (the first one starts it). Rejects if the source is disposed.
   */
  connected(): Promise<void> {
    if (this.disposed) return Promise.reject(new Error('The task source was disposed.'));
    if (this.feedConnected) return Promise.resolve();
    return new Promise((resolve, reject) => this.connectWaiters.push({ resolve, reject }));
  }

  private setFeedConnected(abort: AbortController): void {
    if (abort.signal.aborted) return;
    this.feedConnected = true;
    for (const l of this.invalidateListeners) l();
    const waiters = this.connectWaiters;
    this.connectWaiters = [];
    for (const w of waiters) w.resolve();
  }

  private ensureChangesFeed(): void {
    if (this.changesAbort || this.disposed) return;
    const abort = new AbortController();
    this.changesAbort = abort;
    void (async () => {
      while (!abort.signal.aborted) {
        try {
          const res = await fetch(this.base + PATHS.changes, {
            headers: this.headers({ accept: 'text/event-stream' }),
            signal: abort.signal,
          });
          if (!res.ok || !res.body) throw new Error(`changes feed answered ${res.status}`);
          // The owner subscribes in the same step as it sends the headers: from here on no change is missed. What
          // changed before (since this window's first list, or during a drop) comes with the reload this triggers.
          this.setFeedConnected(abort);
          const parser = new SseParser(MAX_EVENT_BYTES);
          for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
            for (const m of parser.pushEvents(chunk)) this.deliverChange(m);
          }
        } catch (e) {
          if (abort.signal.aborted) return;
          this.options.log?.(`changes feed dropped: ${String(e)}`);
        }
        if (this.changesAbort === abort) this.feedConnected = false;
        await delay(RECONNECT_MS, abort.signal);
      }
    })();
  }

  private deliverChange(m: SseEvent): void {
    if (m.event !== EVENT_TASK_CHANGED && m.event !== 'message') return;
    try {
      const data = JSON.parse(m.data) as unknown;
      if (!isObject(data)) return;
      const task = taskInfoFromLmsp(data['task']);
      const deleted = data['deleted'] === true;
      for (const l of this.changeListeners) l(task, deleted);
    } catch (e) {
      this.options.log?.(`ignored a malformed change event: ${String(e)}`);
    }
  }

  dispose(): void {
    this.disposed = true;
    this.changesAbort?.abort();
    this.changesAbort = undefined;
    this.feedConnected = false;
    const waiters = this.connectWaiters;
    this.connectWaiters = [];
    for (const w of waiters) w.reject(new Error('The task source was disposed.'));
    for (const a of this.streams) a.abort();
    this.streams.clear();
    this.changeListeners.clear();
    this.invalidateListeners.clear();
  }
}

/** A task's path below the LMSP prefix, or one of its sub-resources (TASK_PATHS). */
function taskPath(id: string, sub = ''): string {
  return `${PATHS.tasks}/${encodeURIComponent(id)}${sub}`;
}

/** Turns an LMSP problem+json answer into the RuntimeError the local source would have thrown. */
export function problemError(status: number, body: unknown): RuntimeError {
  const problem = isObject(body) ? body : {};
  const rawCode = typeof problem['code'] === 'string' ? problem['code'] : '';
  const code: RuntimeErrorCode = (CLIENT_FACING_CODES as ReadonlySet<string>).has(rawCode)
    ? (rawCode as RuntimeErrorCode)
    : status === 404
      ? 'task_not_found'
      : 'invalid_request';
  const detail =
    typeof problem['detail'] === 'string' ? problem['detail'] : typeof problem['title'] === 'string' ? problem['title'] : `HTTP ${status}`;
  return new RuntimeError(code, detail);
}

function delay(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done);
  });
}

function positiveInt(v: unknown): number | null {
  return typeof v === 'number' && Number.isInteger(v) && v > 0 ? v : null;
}

/** The one-line hardware summary from a model object's vendor member, when it is there and well-formed. */
function hardwareSummary(vendor: unknown): { hardware?: string } {
  if (!isObject(vendor) || !isObject(vendor['hardware'])) return {};
  const summary = vendor['hardware']['summary'];
  return typeof summary === 'string' && summary.length <= 1000 ? { hardware: summary } : {};
}

/** A model object's `capabilities` (GET /models): tools and reasoning when both are booleans, else nothing. */
function capabilitiesOf(raw: unknown): Pick<ModelSummary, 'capabilities'> {
  if (!isObject(raw) || typeof raw['tools'] !== 'boolean' || typeof raw['reasoning'] !== 'boolean') return {};
  return { capabilities: { tools: raw['tools'], reasoning: raw['reasoning'] } };
}
