// Completion webhooks in the runtime layer (runtime/webhooks.ts) over a real store, with a scripted sender and a
// manual clock and timers: the Standard Webhooks signature, the outbox row in the terminal transition's own batch,
// the retry schedule with one webhook-id throughout, an endpoint down for an hour, the delivery log on the task, and
// that the secret appears in no event, log line or stored file. The wire (address rules, redirects) is tested in
// test/unit/protocols/webhooks/sender.test.ts; a SIGKILL of `serve` in test/reliability/webhooks.test.ts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import * as path from 'node:path';
import { DurableDatabase } from '../../../src/runtime/store/database';
import { TaskEventBus } from '../../../src/runtime/eventBus';
import { TaskStore } from '../../../src/runtime/taskStore';
import { TaskTransitions } from '../../../src/runtime/transitions';
import { newTaskRecord } from '../../../src/runtime/newTask';
import { EVENT } from '../../../src/runtime/responseEvents';
import { problem } from '../../../src/runtime/problems';
import { TaskRuntime } from '../../../src/runtime/runtime';
import type { TaskEvent, TaskRecord } from '../../../src/runtime/task';
import {
  checkWebhookUrl,
  MAX_ATTEMPTS,
  newWebhookSecret,
  outboxOps,
  RETRY_SCHEDULE_MS,
  signWebhook,
  WEBHOOK_EVENT,
  webhookSecretKey,
  WebhookWorker,
  type DeliveryLogEntry,
  type WebhookEndpoints,
  type WebhookRequest,
  type WebhookResponse,
  type WebhookSender,
} from '../../../src/runtime/webhooks';
import { applyEvents, initialState } from '../../../src/extension/webview/eventLog';
import { partsDir } from '../../fixtures/runtimeParts';
import { allFileText } from '../../fixtures/serveProcess';
import { ScriptedBackend, says } from '../../fixtures/scriptedBackend';
import { ManualClock, ManualTimers } from '../../support/clock';
import { nextEvent, taskReaches, until } from '../../support/wait';

const SECRET = newWebhookSecret();
const URL_ = 'https://hooks.example/task-runtime?token=query-secret';

/** A sender whose answers the test scripts; every request it was given, in order. */
class ScriptedSender implements WebhookSender {
  readonly requests: WebhookRequest[] = [];
  constructor(public answer: (req: WebhookRequest, n: number) => WebhookResponse | Promise<WebhookResponse> = () => ({ status: 200 })) {}
  async send(req: WebhookRequest, signal: AbortSignal): Promise<WebhookResponse> {
    this.requests.push(req);
    const a = this.answer(req, this.requests.length);
    if (!(a instanceof Promise)) return a;
    return Promise.race([a, new Promise<WebhookResponse>((r) => signal.addEventListener('abort', () => r({ error: 'aborted' }), { once: true }))]);
  }
}

interface Hooks {
  db: DurableDatabase;
  store: TaskStore;
  bus: TaskEventBus;
  transitions: TaskTransitions;
  worker: WebhookWorker;
  clock: ManualClock;
  timers: ManualTimers;
  logs: string[];
  add(fields?: { principal?: string; meta?: Record<string, unknown> }): TaskRecord;
  close(): Promise<void>;
}

let order = 0;

/** The runtime's webhook wiring by hand: the outbox hook on the transitions, a worker pumped on every change. */
async function openHooks(sender: WebhookSender, o: { dir?: string; clock?: ManualClock; endpoints?: WebhookEndpoints } = {}): Promise<Hooks> {
  const dir = o.dir ?? partsDir();
  const clock = o.clock ?? new ManualClock(1_764_000_000_000);
  const timers = new ManualTimers(clock);
  const endpoints: WebhookEndpoints = o.endpoints ?? ((p) => (p === 'p' ? { url: URL_, secret: SECRET } : undefined));
  const logs: string[] = [];
  const db = await DurableDatabase.open(path.join(dir, 'store'), { log: (m) => logs.push(m) });
  const store = new TaskStore(db);
  const bus = new TaskEventBus();
  const transitions = new TaskTransitions(store, bus, clock.now, undefined, (next, now) => outboxOps(endpoints, next, now));
  const worker = new WebhookWorker(db, transitions, clock.now, { endpoints, sender, timer: timers.timer }, (m) => logs.push(m));
  bus.onTaskChange(() => worker.pump());
  return {
    db,
    store,
    bus,
    transitions,
    worker,
    clock,
    timers,
    logs,
    add(fields = {}) {
      const task = newTaskRecord({
        origin: 'lmsp',
        principal: fields.principal ?? 'p',
        title: 'a task',
        input: { model: 'm', input: 'hi' },
        onRestart: 'fail',
        ttlMs: null,
        deadlineAt: null,
        meta: fields.meta ?? {},
        now: clock.now(),
      });
      transitions.create(task, ++order);
      return task;
    },
    async close() {
      await worker.close();
      await db.close();
    },
  };
}

/** Resolves with the next delivery log entry of `taskId`. */
function nextDelivery(h: Hooks, taskId: string): Promise<DeliveryLogEntry> {
  return nextEvent<TaskEvent, DeliveryLogEntry>(
    (l) => h.bus.listen(taskId, l),
    (e) => (e.type === EVENT.webhookDelivery ? (e.data as unknown as DeliveryLogEntry) : undefined),
    'a webhook delivery',
  );
}

function succeed(h: Hooks, id: string): void {
  h.transitions.startRunning(id, { messageId: 'msg_1', fromQueued: true });
  h.transitions.succeed(id, { finishReason: 'stop', inputTokens: 1, outputTokens: 1 }, { text: 'hi', messageId: 'msg_1', tokens: 1 });
}

// ---------------- signature ----------------

test('signature: the Standard Webhooks test vector, and v1,<base64 HMAC-SHA256 of "id.timestamp.body"> under the decoded secret', () => {
  // From the Standard Webhooks specification's reference implementations.
  assert.equal(
    signWebhook('msg_p5jXN8AQM9LWM0D4loKWxJek', 1614265330, '{"test": 2432232314}', 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'),
    'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
  );
  const key = webhookSecretKey(SECRET) as Buffer;
  assert.equal(key.length, 32);
  const expected = createHmac('sha256', key).update('evt_x.1700000000.{"a":1}').digest('base64');
  assert.equal(signWebhook('evt_x', 1700000000, '{"a":1}', SECRET), `v1,${expected}`);
  assert.match(SECRET, /^whsec_[A-Za-z0-9+/]+=*$/);
  for (const bad of ['secret', 'whsec_', 'whsec_!!!!', 'whsec_' + Buffer.alloc(8).toString('base64')]) {
    const e = webhookSecretKey(bad);
    assert.ok(e instanceof Error, bad);
    assert.ok(!e.message.includes(bad.slice(6)) || bad.length <= 6, 'the message does not quote the secret');
  }
});

test('endpoint URLs: http and https only, no credentials or fragment', () => {
  assert.equal(checkWebhookUrl('https://hooks.example/a?b=c'), 'https://hooks.example/a?b=c');
  assert.equal(checkWebhookUrl('http://10.0.0.5:8080/hook'), 'http://10.0.0.5:8080/hook');
  for (const bad of [
    'ftp://hooks.example/',
    'file:///etc/passwd',
    'https://user:pw@hooks.example/',
    'https://hooks.example/#x',
    'hooks.example',
    'javascript:alert(1)',
  ]) {
    assert.ok(checkWebhookUrl(bad) instanceof Error, bad);
  }
});

// ---------------- the outbox ----------------

test('the outbox row is written in the batch of the terminal transition: one batch, both durable, or neither', async () => {
  const dir = partsDir();
  const sender = new ScriptedSender(() => new Promise<WebhookResponse>(() => undefined)); // never answers
  const h = await openHooks(sender, { dir });
  const task = h.add();
  const other = h.add({ principal: 'q' }); // no endpoint: owes nothing
  h.transitions.startRunning(task.id, { messageId: 'msg_1', fromQueued: true });
  const before = h.db.stats.batches;
  h.transitions.succeed(task.id, { finishReason: 'stop', inputTokens: 1, outputTokens: 1 }, { text: 'hi', messageId: 'msg_1', tokens: 1 });
  assert.equal(h.db.stats.batches, before + 1, 'the ending and its outbox row are one batch');
  const rows = h.db.all('SELECT id, task_id, principal, event_type, body, attempts FROM webhook_deliveries');
  assert.equal(rows.length, 1);
  assert.equal(rows[0].task_id, task.id);
  assert.equal(rows[0].event_type, WEBHOOK_EVENT.taskSucceeded);
  const body = JSON.parse(String(rows[0].body));
  assert.deepEqual(body, {
    id: rows[0].id,
    object: 'event',
    created_at: Math.floor(h.clock.now() / 1000),
    type: 'task_runtime:task.succeeded',
    data: { id: task.id },
  });
  h.transitions.cancelled(other.id);
  assert.equal(h.db.all('SELECT id FROM webhook_deliveries').length, 1, 'a principal without an endpoint owes nothing');
  // The worker started at once (the change was told after the batch was durable).
  assert.equal(sender.requests.length, 1);
  assert.equal(sender.requests[0].headers['webhook-id'], rows[0].id);

  // A crash now (no clean close: the journal holds the batch): the row is still owed after the reopen.
  const again = await openHooks(new ScriptedSender(), { dir, clock: h.clock });
  assert.equal(again.store.getTask(task.id)?.status, 'succeeded');
  assert.deepEqual(
    again.db.all('SELECT id FROM webhook_deliveries').map((r) => r.id),
    [rows[0].id],
  );
  await again.close();
  await h.worker.close();
});

test('event types: OpenAI names for responses made by /responses, task_runtime:task.* for other tasks', async () => {
  const h = await openHooks(new ScriptedSender(() => new Promise<WebhookResponse>(() => undefined)));
  const responses = { lmsp_route: 'responses' };
  const cases: Array<[TaskRecord, () => void, string]> = [];
  const r1 = h.add({ meta: responses });
  cases.push([r1, () => succeed(h, r1.id), 'response.completed']);
  const r2 = h.add({ meta: responses });
  cases.push([
    r2,
    () => {
      h.transitions.startRunning(r2.id, { messageId: 'msg_2', fromQueued: true });
      h.transitions.succeed(r2.id, { finishReason: 'max_output_tokens', inputTokens: 1, outputTokens: 1 }, { text: 'h', messageId: 'msg_2' });
    },
    'response.incomplete',
  ]);
  const r3 = h.add({ meta: responses });
  cases.push([r3, () => h.transitions.fail(r3.id, problem('model_error', 'boom')), 'response.failed']);
  const r4 = h.add({ meta: responses });
  cases.push([r4, () => h.transitions.cancelled(r4.id), 'response.cancelled']);
  const t1 = h.add({ meta: { lmsp_route: 'tasks' } });
  cases.push([t1, () => succeed(h, t1.id), 'task_runtime:task.succeeded']);
  const t2 = h.add();
  cases.push([t2, () => h.transitions.fail(t2.id, problem('model_error', 'boom')), 'task_runtime:task.failed']);
  const t3 = h.add();
  cases.push([t3, () => h.transitions.cancelled(t3.id), 'task_runtime:task.cancelled']);
  for (const [task, end, type] of cases) {
    end();
    const row = h.db.get('SELECT body FROM webhook_deliveries WHERE task_id = ?', [task.id]);
    const body = JSON.parse(String(row?.body));
    assert.equal(body.type, type);
    assert.equal(body.data.id, type.startsWith('response.') ? task.responseId : task.id);
  }
  await h.close();
});

// ---------------- retries ----------------

test('backoff: a failing endpoint is tried on the documented schedule with one webhook-id, then given up; each try is logged on the task', async () => {
  const sender = new ScriptedSender(() => ({ status: 503 }));
  const h = await openHooks(sender);
  const task = h.add();
  const start = h.clock.now();
  let logged = nextDelivery(h, task.id);
  h.transitions.cancelled(task.id);
  const entries: DeliveryLogEntry[] = [];
  for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
    const entry = await logged;
    entries.push(entry);
    assert.equal(entry.attempt, attempt);
    assert.equal(entry.status_code, 503);
    assert.equal(entry.error, 'HTTP 503');
    assert.equal(entry.endpoint, 'https://hooks.example', 'the log shows the origin, not the path or query');
    if (attempt === MAX_ATTEMPTS) {
      assert.equal(entry.outcome, 'gave_up');
      assert.equal(entry.next_retry_at, null);
      break;
    }
    assert.equal(entry.outcome, 'retrying');
    const wait = RETRY_SCHEDULE_MS[attempt - 1];
    assert.equal(entry.next_retry_at, Math.floor((h.clock.now() + wait) / 1000));
    await turn(); // the worker sets its timer after the try's log is written
    logged = nextDelivery(h, task.id);
    h.timers.advance(wait - 1);
    assert.equal(sender.requests.length, attempt, 'not tried before its time');
    h.timers.advance(1);
  }
  assert.equal(sender.requests.length, MAX_ATTEMPTS);
  assert.equal(new Set(sender.requests.map((r) => r.headers['webhook-id'])).size, 1, 'one webhook-id on every try');
  assert.equal(new Set(sender.requests.map((r) => r.body)).size, 1, 'the same body on every try');
  const lastTry = Number(sender.requests[MAX_ATTEMPTS - 1].headers['webhook-timestamp']);
  assert.equal(lastTry - Math.floor(start / 1000), Math.floor(RETRY_SCHEDULE_MS.reduce((a, b) => a + b, 0) / 1000));
  assert.ok(lastTry - start / 1000 > 27 * 3600 && lastTry - start / 1000 < 28 * 3600, 'the documented ~27.6 h');
  // Each try has its own timestamp and signature over it.
  for (const r of sender.requests) {
    assert.equal(r.headers['webhook-signature'], signWebhook(r.headers['webhook-id'], Number(r.headers['webhook-timestamp']), r.body, SECRET));
  }
  assert.equal(h.worker.pending, 0, 'given up: no longer owed');
  assert.equal(h.timers.next, undefined, 'nothing left to wait for');
  const log = h.store.readEvents(task.id, -1).filter((e) => e.type === EVENT.webhookDelivery);
  assert.equal(log.length, MAX_ATTEMPTS);
  await h.close();
});

test('an endpoint down for an hour: tried on the schedule meanwhile, delivered at the first try after it is back, same id', async () => {
  const h = await openHooks(new ScriptedSender());
  const downUntil = h.clock.now() + 3_600_000;
  const sender = new ScriptedSender(() => (h.clock.now() < downUntil ? { error: 'ECONNREFUSED' } : { status: 204 }));
  await h.close();
  const dir = partsDir();
  const hooks = await openHooks(sender, { dir, clock: h.clock });
  const task = hooks.add();
  hooks.transitions.fail(task.id, problem('model_error', 'boom'));
  const outcomes: DeliveryLogEntry[] = [];
  hooks.bus.listen(task.id, (e) => e.type === EVENT.webhookDelivery && outcomes.push(e.data as unknown as DeliveryLogEntry));
  const delivered = nextEvent<TaskEvent, DeliveryLogEntry>(
    (l) => hooks.bus.listen(task.id, l),
    (e) =>
      e.type === EVENT.webhookDelivery && (e.data as unknown as DeliveryLogEntry).outcome === 'delivered' && (e.data as unknown as DeliveryLogEntry),
    'the delivery',
  );
  // Move time along by the timers alone: each advance goes to the worker's next wait.
  while (outcomes.at(-1)?.outcome !== 'delivered') {
    await turn(); // the scripted send's answer is a resolved promise
    const next = hooks.timers.next;
    if (next === undefined) continue;
    hooks.timers.advance(next - hooks.clock.now());
  }
  const entry = await delivered;
  assert.equal(entry.status_code, 204);
  assert.deepEqual(
    outcomes.map((o) => o.outcome),
    ['retrying', 'retrying', 'retrying', 'retrying', 'delivered'],
    'down at 0, 5 s, 5 min 5 s, 35 min 5 s; delivered at 2 h 35 min 5 s',
  );
  assert.ok(hooks.clock.now() >= downUntil);
  assert.equal(new Set(sender.requests.map((r) => r.headers['webhook-id'])).size, 1);
  assert.equal(hooks.worker.pending, 0);
  await hooks.close();
});

test('a 3xx answer is a failed try (redirects are never followed) and a principal whose endpoint went away is given up', async () => {
  let endpoint: { url: string; secret: string } | undefined = { url: URL_, secret: SECRET };
  const sender = new ScriptedSender(() => ({ status: 302 }));
  const h = await openHooks(sender, { endpoints: () => endpoint });
  const task = h.add();
  let logged = nextDelivery(h, task.id);
  h.transitions.cancelled(task.id);
  const first = await logged;
  assert.equal(first.outcome, 'retrying');
  assert.equal(first.error, 'HTTP 302: redirects are not followed');
  endpoint = undefined;
  await turn();
  logged = nextDelivery(h, task.id);
  h.timers.advance(RETRY_SCHEDULE_MS[0]);
  const second = await logged;
  assert.equal(second.outcome, 'gave_up');
  assert.match(second.error ?? '', /no webhook endpoint/);
  assert.equal(sender.requests.length, 1);
  await h.close();
});

test('bounded concurrency: at most maxConcurrent tries in flight; the rest start as tries end', async () => {
  const answers: Array<(r: WebhookResponse) => void> = [];
  const sender = new ScriptedSender(() => new Promise<WebhookResponse>((r) => answers.push(r)));
  const dir = partsDir();
  const clock = new ManualClock(1_764_000_000_000);
  const endpoints: WebhookEndpoints = () => ({ url: URL_, secret: SECRET });
  const db = await DurableDatabase.open(path.join(dir, 'store'));
  const store = new TaskStore(db);
  const bus = new TaskEventBus();
  const transitions = new TaskTransitions(store, bus, clock.now, undefined, (next, now) => outboxOps(endpoints, next, now));
  const worker = new WebhookWorker(db, transitions, clock.now, { endpoints, sender, maxConcurrent: 3, timer: new ManualTimers(clock).timer });
  bus.onTaskChange(() => worker.pump());
  for (let i = 0; i < 7; i++) {
    const t = newTaskRecord({
      origin: 'lmsp',
      principal: 'p',
      title: 't',
      input: { model: 'm', input: 'hi' },
      onRestart: 'fail',
      ttlMs: null,
      deadlineAt: null,
      meta: {},
      now: clock.now(),
    });
    transitions.create(t, ++order);
    transitions.cancelled(t.id);
  }
  assert.equal(sender.requests.length, 3);
  let done = 0;
  while (done < 7) {
    await turnsUntil(() => answers.length > done);
    answers[done++]({ status: 200 });
    await turn();
    assert.ok(sender.requests.length - done <= 3, 'never more than 3 in flight');
  }
  assert.equal(sender.requests.length, 7);
  assert.equal(worker.pending, 0);
  await worker.close();
  await db.close();
});

async function turnsUntil(pred: () => boolean): Promise<void> {
  while (!pred()) await turn();
}

/** One turn of the event loop: every resolved promise's work is done (the scripted sender answers at once). */
function turn(): Promise<void> {
  return new Promise<void>((r) => setImmediate(r));
}

// ---------------- secrets ----------------

test('the secret is in no event, log line, stored file or error; the URL path and query are in no event', async () => {
  const dir = partsDir();
  const sender = new ScriptedSender((_r, n) => (n === 1 ? { error: 'ECONNRESET' } : n === 2 ? { status: 500 } : { status: 200 }));
  const h = await openHooks(sender, { dir });
  const task = h.add();
  h.transitions.cancelled(task.id);
  for (let tries = 1; tries <= 3; tries++) {
    await turnsUntil(
      () => sender.requests.length === tries && h.worker.pending === (tries < 3 ? 1 : 0) && (h.timers.next !== undefined) === tries < 3,
    );
    // To the next try: the worker's waits are at most a minute long (a clock jump is noticed within one).
    while (tries < 3 && sender.requests.length === tries) {
      h.timers.advance(h.timers.next! - h.clock.now());
      await turn();
    }
  }
  await h.db.checkpoint();
  const events = JSON.stringify(h.store.readEvents(task.id, -1));
  const key = SECRET.slice('whsec_'.length);
  for (const where of [events, h.logs.join('\n'), allFileText(dir)]) {
    assert.ok(!where.includes(key), 'the secret is not there');
    assert.ok(!where.includes(SECRET));
  }
  assert.ok(!events.includes('query-secret'), "the URL's query is not in the log");
  assert.ok(
    h.logs.some((l) => l.includes('ECONNRESET')),
    'failed tries are logged',
  );
  await h.close();
});

// ---------------- the runtime ----------------

test('runtime: a finished task is delivered right away; one in flight at close is delivered after the reopen with the same id', async () => {
  const dir = partsDir();
  const hang = new ScriptedSender(() => new Promise<WebhookResponse>(() => undefined));
  const endpoints: WebhookEndpoints = (p) => (p === 'alice' ? { url: URL_, secret: SECRET } : undefined);
  const backend = new ScriptedBackend(says('a', 'b'));
  let rt = await TaskRuntime.open({ dataDir: dir, backend, webhooks: { endpoints, sender: hang } });
  const { task } = rt.createTask({ origin: 'lmsp', principal: 'alice', input: { model: 'm', input: 'hi' } });
  await taskReaches(rt, task.id, (t) => t.status === 'succeeded', 'succeeded');
  await until(() => hang.requests.length === 1, 'the first try');
  const id = hang.requests[0].headers['webhook-id'];
  assert.equal(rt.pendingWebhooks, 1);
  await rt.close(); // aborts the try in flight: not recorded, still owed

  const ok = new ScriptedSender(() => ({ status: 200 }));
  rt = await TaskRuntime.open({ dataDir: dir, backend, webhooks: { endpoints, sender: ok } });
  const events: TaskEvent[] = [];
  const sub = rt.subscribe(task.id, undefined, (e) => events.push(e));
  await until(() => events.some((e) => e.type === EVENT.webhookDelivery), 'the delivery after the reopen');
  sub.close();
  assert.equal(ok.requests[0].headers['webhook-id'], id, 'the same webhook-id after the restart');
  assert.equal(ok.requests[0].body, hang.requests[0].body);
  const log = events.find((e) => e.type === EVENT.webhookDelivery)!.data as unknown as DeliveryLogEntry;
  assert.equal(log.outcome, 'delivered');
  assert.equal(log.attempt, 1, 'the aborted try was not counted');
  assert.equal(rt.pendingWebhooks, 0);
  assert.equal(rt.getTask(task.id)?.status, 'succeeded', 'a note changes nothing about the task');
  // The editor's events panel shows the log as one timeline entry, its detail the latest try.
  const { state } = applyEvents(
    initialState(task.id),
    rt.readEvents(task.id).map((e) => ({ seq: e.seq, type: e.type, data: e.data })),
  );
  assert.deepEqual(
    state.timeline.slice(-2).map((t) => [t.kind, t.detail]),
    [
      ['succeeded', undefined],
      ['webhook', 'try 1: HTTP 200 (delivered)'],
    ],
  );
  await rt.close();
});
