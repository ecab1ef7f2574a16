// Durable completion webhooks (issue #40 item 3): when a task of a principal with an endpoint finishes, one signed
// event is delivered to that endpoint, at least once. Why it is built this way:
//   - At least once across crashes: the delivery is an outbox row (webhook_deliveries) written in the same durable
//     batch as the terminal transition (TaskTransitions' `finished` hook calls `outboxOps`), so a task can never be
//     finished without its delivery being owed, and a row is only deleted in the batch that records its outcome.
//   - The same `webhook-id` and body bytes on every try: both are stored in the row; only `webhook-timestamp` and the
//     signature, which covers it, are made per try (Standard Webhooks: the timestamp is when the try was sent).
//   - Retries with backoff for a documented time (RETRY_SCHEDULE_MS, ~27.6 h), across restarts: the row keeps its try
//     count and next time; the worker picks up due rows at open, after every terminal change and on its timer.
//   - A delivery log on the task: each try's outcome is a `task_runtime:webhook.delivery` event on the task's stream,
//     written in the batch that updates (or deletes) the row. Neither the secret nor the URL's path or query is in it.
//   - This file imports no node:http: sending is the injected WebhookSender (protocols/webhooks/sender.ts sends over
//     node:http(s) and enforces the address rules). The secret never leaves this file: the sender gets signed headers.
//   - Time comes from the injected clock (`now`); waits for the next due row go through the injected `timer`.
import { createHmac, randomBytes } from 'node:crypto';
import { randomId } from './ids';
import { EVENT } from './responseEvents';
import type { DurableDatabase, WriteOp } from './store/database';
import type { TaskRecord } from './task';
import type { TaskTransitions } from './transitions';

/** Where one principal's completion events go. `secret` is `whsec_` + base64 of 24–64 random bytes. */
export interface WebhookEndpoint {
  url: string;
  secret: string;
}

/** The endpoint of a principal's tasks, or undefined (none: its tasks owe no deliveries). Asked again at each try. */
export type WebhookEndpoints = (principal: string) => WebhookEndpoint | undefined;

/** One try, as the sender sends it: POST `body` to `url` with `headers`, no redirects followed. */
export interface WebhookRequest {
  url: string;
  headers: Record<string, string>;
  body: string;
}

/** What a try got back: the HTTP status, or an error in a few words (never the request's headers or body). */
export type WebhookResponse = { status: number } | { error: string };

/** Sends one try; resolves (never rejects) when it has an answer, failed, or `signal` aborted it. */
export interface WebhookSender {
  send(request: WebhookRequest, signal: AbortSignal): Promise<WebhookResponse>;
}

/** A cancellable wait (the injected timer: setTimeout in production, a manual clock's in tests). */
export type WebhookTimer = (run: () => void, ms: number) => { cancel(): void };

export interface WebhookOptions {
  endpoints: WebhookEndpoints;
  sender: WebhookSender;
  /** Tries in flight at once, all endpoints together (default 8). */
  maxConcurrent?: number;
  /** Longest a try may take before it counts as failed (default 10 s). */
  attemptTimeoutMs?: number;
  /** How the worker waits for the next due try (default: an unref'd setTimeout). */
  timer?: WebhookTimer;
}

/**
 * Wait after the n-th failed try (index n-1) before the next one: Standard Webhooks' recommended schedule. After the
 * 8th failure the delivery is given up: the last try is ~27.6 hours after the first.
 */
export const RETRY_SCHEDULE_MS: readonly number[] = [5_000, 5 * 60_000, 30 * 60_000, 2 * 3_600_000, 5 * 3_600_000, 10 * 3_600_000, 10 * 3_600_000];
export const MAX_ATTEMPTS = RETRY_SCHEDULE_MS.length + 1;
export const DEFAULT_ATTEMPT_TIMEOUT_MS = 10_000;
export const DEFAULT_MAX_CONCURRENT_DELIVERIES = 8;

/** Event types of the webhook payloads: OpenAI's for responses made by /responses, LMSP-style vendor ones for tasks. */
export const WEBHOOK_EVENT = {
  responseCompleted: 'response.completed',
  responseIncomplete: 'response.incomplete',
  responseFailed: 'response.failed',
  responseCancelled: 'response.cancelled',
  taskSucceeded: 'task_runtime:task.succeeded',
  taskFailed: 'task_runtime:task.failed',
  taskCancelled: 'task_runtime:task.cancelled',
} as const;

// ---------------- secrets and signatures ----------------

const SECRET_PREFIX = 'whsec_';

/** A fresh secret: `whsec_` + base64 of 32 random bytes. */
export function newWebhookSecret(): string {
  return SECRET_PREFIX + randomBytes(32).toString('base64');
}

/** The secret's key bytes, or an Error saying what is wrong with it (never quoting it). */
export function webhookSecretKey(secret: string): Buffer | Error {
  if (!secret.startsWith(SECRET_PREFIX)) return new Error('a webhook secret must start with "whsec_"');
  const b64 = secret.slice(SECRET_PREFIX.length);
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(b64) || b64.length % 4 !== 0) return new Error('a webhook secret must be "whsec_" + base64');
  const key = Buffer.from(b64, 'base64');
  if (key.length < 24 || key.length > 64) return new Error('a webhook secret must hold 24 to 64 bytes');
  return key;
}

/** Standard Webhooks signature: `v1,` + base64 HMAC-SHA256 of `id.timestamp.body` under the secret's key bytes. */
export function signWebhook(id: string, timestampSeconds: number, body: string, secret: string): string {
  const key = webhookSecretKey(secret);
  if (key instanceof Error) throw key;
  return 'v1,' + createHmac('sha256', key).update(`${id}.${timestampSeconds}.${body}`).digest('base64');
}

/** The headers of one try. */
export function webhookHeaders(id: string, timestampSeconds: number, body: string, secret: string): Record<string, string> {
  return {
    'content-type': 'application/json',
    'user-agent': 'task-runtime-webhooks',
    'webhook-id': id,
    'webhook-timestamp': String(timestampSeconds),
    'webhook-signature': signWebhook(id, timestampSeconds, body, secret),
  };
}

/**
 * An endpoint URL as configured: http or https, with a host, without credentials or a fragment. Returns the URL
 * (normalised) or an Error. Addresses are checked by the sender, when it connects.
 */
export function checkWebhookUrl(raw: string): string | Error {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return new Error('the webhook URL is not a valid absolute URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return new Error('a webhook URL must be http or https');
  if (!url.hostname) return new Error('a webhook URL needs a host');
  if (url.username || url.password) return new Error('a webhook URL must not carry credentials (the secret signs the request)');
  if (url.hash) return new Error('a webhook URL must not have a fragment');
  return url.href;
}

/** What a delivery log may show of an endpoint: its origin (the path and query may hold someone's token). */
export function endpointOrigin(url: string): string {
  try {
    return new URL(url).origin;
  } catch {
    return 'invalid';
  }
}

// ---------------- the outbox ----------------

/** The event a finished task owes its principal's endpoint: its type and payload (OpenAI's event object). */
export function webhookEventOf(task: TaskRecord, id: string, createdAtMs: number): { type: string; payload: Record<string, unknown> } {
  const viaResponses = task.meta.lmsp_route === 'responses';
  const responseStatus = task.response?.status;
  let type: string;
  if (viaResponses) {
    type =
      task.status === 'failed'
        ? WEBHOOK_EVENT.responseFailed
        : task.status === 'cancelled'
          ? WEBHOOK_EVENT.responseCancelled
          : responseStatus === 'incomplete'
            ? WEBHOOK_EVENT.responseIncomplete
            : WEBHOOK_EVENT.responseCompleted;
  } else {
    type =
      task.status === 'failed' ? WEBHOOK_EVENT.taskFailed : task.status === 'cancelled' ? WEBHOOK_EVENT.taskCancelled : WEBHOOK_EVENT.taskSucceeded;
  }
  return {
    type,
    payload: { id, object: 'event', created_at: Math.floor(createdAtMs / 1000), type, data: { id: viaResponses ? task.responseId : task.id } },
  };
}

/**
 * The outbox row a task owes as it finishes (`task`: its record after the terminal step), for the batch of that
 * step; none when its principal has no endpoint.
 */
export function outboxOps(endpoints: WebhookEndpoints, task: TaskRecord, now: number): WriteOp[] {
  if (!endpoints(task.principal)) return [];
  const id = randomId('evt_');
  const { type, payload } = webhookEventOf(task, id, now);
  return [
    [
      'INSERT INTO webhook_deliveries (id, task_id, principal, event_type, body, created_at, attempts, next_attempt_at) VALUES (?, ?, ?, ?, ?, ?, 0, ?)',
      [id, task.id, task.principal, type, JSON.stringify(payload), now, now],
    ],
  ];
}

interface Delivery {
  id: string;
  taskId: string;
  principal: string;
  eventType: string;
  body: string;
  attempts: number;
}

/** One try's outcome as the task's delivery log shows it. */
export interface DeliveryLogEntry {
  webhook_id: string;
  event_type: string;
  endpoint: string | null;
  attempt: number;
  outcome: 'delivered' | 'retrying' | 'gave_up';
  status_code: number | null;
  error: string | null;
  /** Unix seconds of the next try (outcome `retrying`), else null. */
  next_retry_at: number | null;
}

// ---------------- the worker ----------------

/**
 * Sends owed deliveries: at most `maxConcurrent` tries at once, each bounded by `attemptTimeoutMs`; a 2xx answer
 * delivers, anything else (a 3xx included: redirects are never followed) is a failed try, retried on the schedule.
 */
export class WebhookWorker {
  private readonly inFlight = new Map<string, { abort: AbortController; done: Promise<void> }>();
  private wake: { cancel(): void; at: number } | undefined;
  private pumping = false;
  private closed = false;
  private readonly maxConcurrent: number;
  private readonly attemptTimeoutMs: number;
  private readonly timer: WebhookTimer;

  constructor(
    private readonly db: DurableDatabase,
    private readonly transitions: TaskTransitions,
    private readonly now: () => number,
    private readonly options: WebhookOptions,
    private readonly log?: (msg: string) => void,
  ) {
    this.maxConcurrent = Math.max(1, options.maxConcurrent ?? DEFAULT_MAX_CONCURRENT_DELIVERIES);
    this.attemptTimeoutMs = options.attemptTimeoutMs ?? DEFAULT_ATTEMPT_TIMEOUT_MS;
    this.timer =
      options.timer ??
      ((run, ms) => {
        const t = setTimeout(run, ms);
        t.unref();
        return { cancel: () => clearTimeout(t) };
      });
  }

  /** Deliveries owed and not yet delivered or given up (metrics, tests). */
  get pending(): number {
    return Number(this.db.get('SELECT COUNT(*) AS n FROM webhook_deliveries')?.n ?? 0);
  }

  /** Starts every due try there is room for and sets the timer for the next one. Called after each change that may owe one. */
  pump(): void {
    if (this.closed || this.pumping) return;
    this.pumping = true;
    try {
      const now = this.now();
      const room = this.maxConcurrent - this.inFlight.size;
      if (room > 0) {
        const due = this.db.all(
          'SELECT id, task_id, principal, event_type, body, attempts FROM webhook_deliveries WHERE next_attempt_at <= ? ORDER BY next_attempt_at LIMIT ?',
          [now, room + this.inFlight.size],
        );
        for (const r of due) {
          if (this.inFlight.size >= this.maxConcurrent) break;
          const id = String(r.id);
          if (this.inFlight.has(id)) continue;
          this.start({
            id,
            taskId: String(r.task_id),
            principal: String(r.principal),
            eventType: String(r.event_type),
            body: String(r.body),
            attempts: Number(r.attempts),
          });
        }
      }
      this.arm(now);
    } catch (e) {
      this.log?.(`webhooks: ${(e as Error).message}`);
    } finally {
      this.pumping = false;
    }
  }

  /** The timer for the earliest row not in flight that is not yet due (a full worker is pumped as tries end). */
  private arm(now: number): void {
    const r = this.db.get('SELECT MIN(next_attempt_at) AS at FROM webhook_deliveries WHERE next_attempt_at > ?', [now]);
    const at = r?.at === null || r?.at === undefined ? undefined : Number(r.at);
    if (this.wake && this.wake.at === at) return;
    this.wake?.cancel();
    this.wake = undefined;
    if (at === undefined) return;
    // Capped, so that a clock that jumps (a suspended laptop) is noticed within a minute.
    const handle = this.timer(
      () => {
        this.wake = undefined;
        this.pump();
      },
      Math.min(Math.max(at - now, 0), 60_000),
    );
    this.wake = { cancel: handle.cancel, at };
  }

  private start(d: Delivery): void {
    const abort = new AbortController();
    const done = this.attempt(d, abort.signal).finally(() => {
      this.inFlight.delete(d.id);
      this.pump();
    });
    this.inFlight.set(d.id, { abort, done });
  }

  private async attempt(d: Delivery, signal: AbortSignal): Promise<void> {
    const endpoint = this.options.endpoints(d.principal);
    const attempt = d.attempts + 1;
    let answer: WebhookResponse;
    if (!endpoint) {
      answer = { error: 'no webhook endpoint is configured for this principal any more' };
    } else {
      const key = webhookSecretKey(endpoint.secret);
      if (key instanceof Error) answer = { error: key.message };
      else {
        const timestamp = Math.floor(this.now() / 1000);
        const timeout = AbortSignal.timeout(this.attemptTimeoutMs);
        answer = await this.options.sender
          .send(
            { url: endpoint.url, headers: webhookHeaders(d.id, timestamp, d.body, endpoint.secret), body: d.body },
            AbortSignal.any([signal, timeout]),
          )
          .catch((e: unknown) => ({ error: e instanceof Error ? e.message : 'send failed' }));
        if ('error' in answer && timeout.aborted && !signal.aborted) answer = { error: `no answer within ${this.attemptTimeoutMs} ms` };
      }
    }
    // Closing: the try's outcome is not written; the row stays owed and is tried again after the restart.
    if (this.closed) return;
    const delivered = 'status' in answer && answer.status >= 200 && answer.status < 300;
    const wait = delivered || !endpoint ? undefined : RETRY_SCHEDULE_MS[attempt - 1];
    const now = this.now();
    const entry: DeliveryLogEntry = {
      webhook_id: d.id,
      event_type: d.eventType,
      endpoint: endpoint ? endpointOrigin(endpoint.url) : null,
      attempt,
      outcome: delivered ? 'delivered' : wait === undefined ? 'gave_up' : 'retrying',
      status_code: 'status' in answer ? answer.status : null,
      error: 'error' in answer ? answer.error.slice(0, 200) : 'status' in answer && !delivered ? failureOf(answer.status) : null,
      next_retry_at: wait === undefined ? null : Math.floor((now + wait) / 1000),
    };
    const ops: WriteOp[] =
      wait === undefined
        ? [['DELETE FROM webhook_deliveries WHERE id = ?', [d.id]]]
        : [['UPDATE webhook_deliveries SET attempts = ?, next_attempt_at = ? WHERE id = ?', [attempt, now + wait, d.id]]];
    try {
      this.transitions.note(d.taskId, [{ type: EVENT.webhookDelivery, data: { ...entry } }], ops);
    } catch (e) {
      // The store refuses writes (store_unwritable): the row stays as it was and is tried again.
      this.log?.(`webhooks: could not record a delivery of ${d.id}: ${(e as Error).message}`);
    }
    if (entry.outcome !== 'delivered') {
      this.log?.(`webhooks: ${d.id} (task ${d.taskId}) try ${attempt} to ${entry.endpoint ?? 'no endpoint'}: ${entry.error}; ${entry.outcome}`);
    }
  }

  /** Stops: no new tries; tries in flight are aborted and their rows stay owed (tried again after a restart). */
  async close(): Promise<void> {
    this.closed = true;
    this.wake?.cancel();
    this.wake = undefined;
    for (const f of this.inFlight.values()) f.abort.abort();
    await Promise.all([...this.inFlight.values()].map((f) => f.done));
  }
}

function failureOf(status: number): string {
  if (status >= 300 && status < 400) return `HTTP ${status}: redirects are not followed`;
  return `HTTP ${status}`;
}
