// Security: the attacks of issues #20 and #23 against one real `task-runtime serve`, each asserting the defended
// outcome, every request counted (and every 5xx), the figures in the `security` section of the reliability summary:
//   tokens: no token / a wrong token, another principal's task ids, foreign Host and Origin, HTML in task text;
//   #23.1 no read route or tool (LMSP, both MCP eras) and no error shows the model file's folder or an engine URL;
//   #23.2 token-less sockets filling every connection slot do not keep an authenticated client out, and a request
//         head that never finishes is cut at the headers timeout (not Node's 30 s check interval);
//   #23.3 a deeply nested body with an Idempotency-Key is a 400 on every create route, never a 500;
//   #23.5 an engine echoing its key (plain, encoded, base64, cut short) never gets it into task.error, events, MCP
//         views or the log;
//   #23.6 a queued task's position counts only its owner's tasks, counts leave out tasks past their ttl, a token
//         file others can read is refused;
//   #20   a principal over its queued-task or stream share gets 429 limit_exceeded while another's requests pass;
//         a body over the limit is 413.
// Shown on purpose and not flagged: a 404 for a model named by a path echoes the caller's own string (checked to be
// alike whether the file exists or not). An engine failure's detail names the engine (and its place in the pool),
// never its host:port: that is for the operator's log only (src/backends/remote/engine.ts).
// Measured (quick mode, load 8 on 2 cores): 31 s, 174 requests, of which ~10 s is the head that never finishes.
// The same bytes as the tests that pin each defence (test/support/hostile.ts). The events panel rendering task
// text as text is checked in the UI suite (test/e2e/tasks.ui.test.ts); #23.4 (editor consent) is editor-only.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import type * as net from 'node:net';
import * as path from 'node:path';
import { MAX_BODY_BYTES } from '../../src/protocols/http/body';
import { DEFAULT_LISTENER_LIMITS } from '../../src/protocols/http/listener';
import { sseHead, startFakeEngine, type FakeEngine } from '../fixtures/fakeEngine';
import { call, createTask, removeDir, startServer, tempDataDir, waitForStatus, type CallOptions, type Server } from '../protocol/lmsp/harness';
import { RawSession } from '../protocol/mcp/harness';
import { ModernClient } from '../protocol/mcp/modernClient';
import {
  deepBody,
  deepRequest,
  keySpellings,
  leakedPieces,
  rawSocket,
  SECRET_DIR,
  SECRET_MODEL_ID,
  secretModel,
  socketClosed,
  UNFINISHED_HEADS,
  type SecretModel,
} from '../support/hostile';
import { until } from '../support/wait';
import { QUICK, recordFigures } from './support';

const INJECTION = '<img src=x onerror="document.title=\'pwned\'"><script>alert(1)</script>';
const KEY = 'sk-live_4f9QZ2m+/x7Lp0Ra8vWc=Tq3';
const QUEUED_CAP = 3;
const STREAM_CAP = 2;
/** Sockets over the listener's connection cap in the flood (each evicts one token-less socket). */
const FLOOD_EXTRA = QUICK ? 64 : 512;
/** The request attacks (path reads, nested bodies) are repeated this often; the socket attacks run once. */
const ROUNDS = QUICK ? 1 : 5;
/** Principals besides alice and bob, one per attack that needs a share of its own. */
const PRINCIPALS = ['carol', 'dave', 'erin'] as const;

const tally = { requests: 0, status5xx: 0, attacks: [] as string[], notes: {} as Record<string, unknown> };
const counted = (status: number) => {
  tally.requests++;
  if (status >= 500) tally.status5xx++;
  return status;
};
const req = async (...args: Parameters<typeof call>) => {
  const r = await call(...args);
  counted(r.status);
  return r;
};
const tried = (attack: string) => tally.attacks.push(attack);
/** How the fake engines' URLs would show in a leak: host:port, by IP and by name. */
const engineAddresses = () => [hold, leak].flatMap((e) => [`127.0.0.1:${e.port}`, `localhost:${e.port}`]);

let server: Server;
let secret: SecretModel;
/** Answers every chat request with a stream that never ends: its tasks stay unfinished until cancelled. */
let hold: FakeEngine;
/** Refuses every request with a 401 whose message echoes the key in the spelling the prompt names. */
let leak: FakeEngine;
const tokens: Record<string, string> = {};
const spellings = keySpellings(KEY);

before(async () => {
  secret = secretModel();
  hold = await startFakeEngine((q, res) => {
    sseHead(res);
    res.write(': held\n\n');
    void q.closed.then(() => res.end());
  });
  leak = await startFakeEngine((q, res) => {
    const i = Number(/spell-(\d+)/.exec(JSON.stringify(q.body))?.[1]);
    res.writeHead(401, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ error: { message: `invalid api key "${spellings[i]}" (check your Authorization header)` } }));
  });
  const dataDir = tempDataDir();
  const names = ['alice', 'bob', ...PRINCIPALS];
  for (const n of names) tokens[n] = randomBytes(24).toString('base64url');
  fs.writeFileSync(path.join(dataDir, 'tokens'), names.map((n) => `${n} ${tokens[n]}\n`).join(''), { mode: 0o600 });
  const keyFile = path.join(dataDir, 'engine-key');
  fs.writeFileSync(keyFile, `${KEY}\n`, { mode: 0o600 });
  server = await startServer({
    dataDir,
    args: [
      ...['--model', secret.file, '--concurrency', '1'],
      ...['--max-queued-per-principal', String(QUEUED_CAP), '--max-streams-per-principal', String(STREAM_CAP)],
      ...['--engine', `hold=${hold.base}`, '--engine-concurrency', 'hold=1', '--engine', `leak=${leak.base}`, '--engine-key-file', `leak=${keyFile}`],
    ],
    // The ttl test must see counts drop before the sweep could have removed the task.
    env: { TASK_RUNTIME_SWEEP_MS: '3600000' },
  });
});

after(async () => {
  const crashes = server && (server.proc.exitCode !== null || server.proc.signalCode !== null) ? 1 : 0;
  recordFigures('security', {
    iterations: ROUNDS,
    faultsInjected: 0,
    requestsTried: tally.requests,
    crashes,
    status5xx: tally.status5xx,
    dataLost: 0,
    notes: { attacks: tally.attacks, ...tally.notes },
  });
  await server?.kill();
  if (server) removeDir(server.dataDir);
  secret?.remove();
  await Promise.all([hold?.close(), leak?.close()]);
  assert.equal(crashes, 0, 'the server did not die');
  assert.equal(tally.status5xx, 0, 'no attack got a 5xx');
});

/** An MCP request through a raw client, counted; `status` is the HTTP status of its reply. */
async function mcp<T extends { status: number }>(p: Promise<T>): Promise<T> {
  const r = await p;
  counted(r.status);
  return r;
}

/** A 2025-11-25 session (raw: the SDK hides statuses) whose every call is counted. */
interface LegacySession {
  call(method: string, params?: unknown): Promise<any>;
}

async function legacySession(token: string): Promise<LegacySession> {
  const s = new RawSession(`${server.url}/mcp`, token);
  await s.initialize();
  tally.requests += 2;
  let id = 1;
  return {
    async call(method, params) {
      const n = ++id;
      const r = await mcp(s.post({ jsonrpc: '2.0', id: n, method, ...(params === undefined ? {} : { params }) }));
      return r.messages.find((m) => m.id === n);
    },
  };
}

/** A task-augmented `generate` call in a 2025-11-25 session: the task's id. */
async function mcpTaskOn(
  session: LegacySession,
  model: string,
  args: Record<string, unknown> = {},
  task: Record<string, unknown> = {},
): Promise<string> {
  const r = await session.call('tools/call', { name: 'generate', arguments: { model, prompt: 'hold', ...args }, task });
  assert.ok(r.result?.task?.taskId, JSON.stringify(r));
  return r.result.task.taskId;
}

const modern = (token: string) => {
  const c = new ModernClient(`${server.url}/mcp`, token);
  return (method: string, params: Record<string, unknown> = {}) => mcp(c.request(method, params));
};

test('tokens, principals, Host/Origin and HTML in task text', async () => {
  tried('tokens-principals-host-origin-html');
  const task = await createTask(server, { input: INJECTION, max_output_tokens: 4 });
  counted(202);
  await waitForStatus(server, task.id, ['succeeded']);

  // No token and a wrong token: 401 with a challenge, in each door's own form.
  for (const token of [null, 'wrong-token', server.tokenA + 'x']) {
    const r = await req(server, 'GET', `/tasks/${task.id}`, { token });
    assert.equal(r.status, 401);
    assert.equal(r.json.code, 'unauthorized');
    assert.match(String(r.headers['www-authenticate']), /^Bearer/);
    const m = await req(server, 'POST', '/mcp', { token, body: { jsonrpc: '2.0', id: 1, method: 'tools/list' } });
    assert.equal(m.status, 401);
    assert.equal(m.json.jsonrpc, '2.0');
    assert.equal(typeof m.json.error.code, 'number');
  }

  // Another principal's task: indistinguishable from an unknown id.
  for (const [method, p] of [
    ['GET', `/tasks/${task.id}`],
    ['POST', `/tasks/${task.id}/cancel`],
    ['DELETE', `/tasks/${task.id}`],
    ['GET', `/tasks/${task.id}/events`],
  ] as const) {
    const r = await req(server, method, p, { token: server.tokenB });
    assert.equal(r.status, 404, `${method} ${p} as bob`);
    assert.equal(r.json.code, 'task_not_found');
  }
  const bobList = await req(server, 'GET', '/tasks', { token: server.tokenB });
  assert.ok(!bobList.text.includes(task.id), "bob's list does not show alice's task");
  const bob = await legacySession(server.tokenB);
  for (const method of ['tasks/get', 'tasks/result', 'tasks/cancel']) {
    const r = await bob.call(method, { taskId: task.id });
    assert.equal(r.error?.code, -32602, `${method} on a foreign task`);
  }
  const text = await bob.call('tools/call', { name: 'get_task_text', arguments: { taskId: task.id } });
  assert.ok(text.error?.code === -32602 || text.result?.isError === true, 'get_task_text of a foreign task is refused');
  assert.doesNotMatch(JSON.stringify(text), /onerror/, 'nothing of the foreign task leaks');

  // Foreign Host and Origin: 403 before auth, in both doors.
  const foreign: Record<string, string>[] = [
    { host: 'evil.example' },
    { host: `attacker.test:${server.port}` },
    { origin: 'https://evil.example' },
    { origin: 'null' },
  ];
  for (const headers of foreign) {
    for (const p of [`/lmsp/v1/tasks/${task.id}`, '/mcp']) {
      const r = await req(server, p === '/mcp' ? 'POST' : 'GET', p, {
        headers,
        body: p === '/mcp' ? { jsonrpc: '2.0', id: 1, method: 'tools/list' } : undefined,
      });
      assert.equal(r.status, 403, `${JSON.stringify(headers)} ${p}`);
      if (p === '/mcp') assert.equal(r.json.jsonrpc, '2.0');
      else assert.equal(r.json.code, 'forbidden');
    }
  }

  // HTML in task text is data: returned verbatim as a JSON string, never as markup.
  const own = await req(server, 'GET', `/tasks/${task.id}`);
  assert.match(String(own.headers['content-type']), /^application\/json/);
  assert.equal(own.json.task_runtime.prompt, INJECTION);
  assert.equal(own.headers['x-content-type-options'] ?? 'nosniff', 'nosniff');
});

test('#23.1: no read route, MCP tool (both eras) or error shows the model folder or an engine URL', async () => {
  tried('model-paths-and-engine-urls');
  const engines = engineAddresses();
  const clean = (label: string, text: string) => assert.deepEqual(leakedPieces(text, secret, engines), [], `${label}: ${text.slice(0, 400)}`);
  const created = await req(server, 'POST', '/tasks', {
    body: { type: 'response', input: { model: SECRET_MODEL_ID, input: 'hi', max_output_tokens: 4 } },
  });
  assert.equal(created.status, 202, created.text);
  const task = created.json as { id: string; response_id: string };
  await waitForStatus(server, task.id, ['succeeded']);
  const legacy = await legacySession(server.tokenA);
  const ask = modern(server.tokenA);
  const mcpTask = await mcpTaskOn(legacy, SECRET_MODEL_ID, { max_output_tokens: 4 });
  await waitForStatus(server, mcpTask, ['succeeded']);
  const missing = path.join(secret.root, ...SECRET_DIR, 'x.gguf');
  for (let round = 0; round < ROUNDS; round++) {
    const routes = [
      '/models',
      `/models/${SECRET_MODEL_ID}`,
      '/models/hold/m1',
      '/capabilities',
      '/tasks',
      `/tasks/${task.id}`,
      `/responses/${task.response_id}`,
      '/task_runtime/counts',
      `/tasks/${task.id}/events`,
    ];
    for (const route of routes) {
      const r = await req(server, 'GET', route);
      assert.equal(r.status, 200, `${route}: ${r.status}`);
      clean(`GET ${route}`, r.text);
    }
    // Errors for an unknown model show neither the folder nor an engine.
    const errors: Array<[string, string, CallOptions]> = [
      ['POST', '/tasks', { body: { type: 'response', input: { model: 'hold/none', input: 'hi' } } }],
      ['POST', '/responses', { body: { model: 'secret', input: 'hi' } }],
      ['POST', '/chat/completions', { body: { model: 'leak/none', messages: [{ role: 'user', content: 'hi' }] } }],
      ['GET', '/models/hold%2Fnone', {}],
    ];
    for (const [method, route, opts] of errors) {
      const r = await req(server, method, route, opts);
      assert.ok(r.status >= 400 && r.status < 500, `${method} ${route}: ${r.status}`);
      clean(`${method} ${route} (${r.status})`, r.text);
    }
    // A model named by its file path is refused, and alike whether the file exists (the served one) or not: the
    // answer echoes the caller's own string and tells nothing about the folder.
    const byPath = async (model: string) => {
      const r = await req(server, 'POST', '/responses', { body: { model, input: 'hi' } });
      return { status: r.status, text: r.text.split(JSON.stringify(model).slice(1, -1)).join('<model>') };
    };
    const [served, absent] = [await byPath(secret.file), await byPath(missing)];
    assert.equal(served.status, 404, served.text);
    assert.deepEqual(served, absent);
    clean('POST /responses model=<path>', served.text);
    const listed = JSON.stringify(await legacy.call('tools/call', { name: 'list_models', arguments: {} }));
    assert.ok(listed.includes(SECRET_MODEL_ID) && listed.includes('hold/m1'), listed);
    clean('MCP 2025-11-25 list_models', listed);
    for (const [method, params] of [
      ['tools/list', {}],
      ['tools/call', { name: 'get_task_text', arguments: { taskId: mcpTask } }],
      ['tasks/list', {}],
      ['tasks/get', { taskId: mcpTask }],
      ['tasks/result', { taskId: mcpTask }],
    ] as const) {
      const r = await legacy.call(method, params);
      assert.ok(r.result && !r.result.isError, `MCP 2025-11-25 ${method}: ${JSON.stringify(r)}`);
      clean(`MCP 2025-11-25 ${method}`, JSON.stringify(r));
    }
    const modernList = await ask('tools/call', { name: 'list_models', arguments: {} });
    assert.ok(JSON.stringify(modernList.body).includes(SECRET_MODEL_ID), JSON.stringify(modernList.body));
    clean('MCP 2026-07-28 list_models', JSON.stringify(modernList.body));
    for (const [method, params] of [
      ['tools/call', { name: 'get_task_text', arguments: { taskId: mcpTask } }],
      ['tasks/get', { taskId: mcpTask }],
    ] as const) {
      const r = (await ask(method, params)).body;
      assert.ok(r.result && !r.result.isError, `MCP 2026-07-28 ${method}: ${JSON.stringify(r)}`);
      clean(`MCP 2026-07-28 ${method}`, JSON.stringify(r));
    }
  }
});

/** Started at the end of the flood; the last test awaits it, so its wait overlaps the attacks between. */
let slowHead: Promise<number> | undefined;

test('#23.2: token-less sockets over every connection slot do not keep an authenticated client out', async () => {
  tried('connection-flood-without-token');
  const cap = DEFAULT_LISTENER_LIMITS.maxConnections;
  const held: net.Socket[] = [];
  let evicted = 0;
  const started = Date.now();
  try {
    // In parallel batches: the whole flood lands well inside the headers timeout, so the slots it frees are evictions.
    for (let i = 0; i < cap + FLOOD_EXTRA; i += 128) {
      const batch = await Promise.all(
        Array.from({ length: Math.min(128, cap + FLOOD_EXTRA - i) }, (_, j) =>
          rawSocket(server.port, UNFINISHED_HEADS[(i + j) % UNFINISHED_HEADS.length]),
        ),
      );
      for (const s of batch) s.once('close', () => evicted++);
      held.push(...batch);
    }
    const floodMs = Date.now() - started;
    assert.ok(floodMs < DEFAULT_LISTENER_LIMITS.headersTimeoutMs, `the flood took ${floodMs} ms, past the headers timeout: it proves nothing`);
    const lmsp = await req(server, 'GET', '/models');
    assert.equal(lmsp.status, 200);
    const tools = await (await legacySession(server.tokenA)).call('tools/list');
    assert.ok(tools.result?.tools?.length, JSON.stringify(tools));
    await until(() => evicted >= FLOOD_EXTRA, `${FLOOD_EXTRA} token-less sockets to be evicted (so far ${evicted})`);
    // Closed by eviction when the slots were full, not later by the headers timeout (as with no cap at all).
    assert.ok(
      Date.now() - started < DEFAULT_LISTENER_LIMITS.headersTimeoutMs,
      `the flood's sockets were closed only after ${Date.now() - started} ms`,
    );
    tally.notes.flood = { sockets: held.length, cap, evicted, floodMs };
  } finally {
    for (const s of held) s.destroy();
  }
  tried('request-head-never-finishes');
  const s = await rawSocket(server.port, UNFINISHED_HEADS[2]);
  const opened = Date.now();
  slowHead = socketClosed(s).then(() => Date.now() - opened);
});

test('#23.3: a deeply nested body with an Idempotency-Key is a 400 on every create route', async () => {
  tried('deep-json-with-idempotency-key');
  for (let round = 0; round < ROUNDS; round++) {
    for (const [route, body] of [
      ['/tasks', deepBody(5000, server.model)],
      ['/responses', deepRequest(5000, server.model)],
      ['/chat/completions', deepRequest(5000, server.model)],
    ] as const) {
      const r = await req(server, 'POST', route, {
        rawBody: body,
        headers: { 'content-type': 'application/json', 'idempotency-key': `deep-${route}-${round}` },
      });
      assert.equal(r.status, 400, `${route}: ${r.text.slice(0, 200)}`);
    }
  }
  assert.equal((await req(server, 'GET', '/models')).status, 200, 'the server still answers');
});

test('#23.5: an engine echoing its key in any spelling gets it into no task error, event, MCP view or log line', async () => {
  tried('engine-key-echo');
  const engines = engineAddresses();
  const ids: string[] = [];
  for (let i = 0; i < spellings.length; i++) {
    const r = await req(server, 'POST', '/tasks', { body: { type: 'response', input: { model: 'leak/m1', input: `spell-${i}` } } });
    assert.equal(r.status, 202, r.text);
    ids.push(r.json.id);
  }
  const legacy = await legacySession(server.tokenA);
  const ask = modern(server.tokenA);
  for (const [i, id] of ids.entries()) {
    const done = await waitForStatus(server, id, ['failed']);
    counted(200);
    assert.match(done.error.detail, /\[key\]/, `spelling ${i}: ${done.error.detail}`);
    const seen = [
      JSON.stringify(done),
      (await req(server, 'GET', `/tasks/${id}/events`)).text,
      JSON.stringify(await legacy.call('tasks/get', { taskId: id })),
      JSON.stringify(await legacy.call('tasks/result', { taskId: id })),
      JSON.stringify((await ask('tasks/get', { taskId: id })).body),
    ];
    for (const text of seen) {
      assert.ok(!text.includes(spellings[i]), `spelling ${i} (${spellings[i]}) in ${text.slice(0, 400)}`);
      assert.deepEqual(leakedPieces(text, secret, engines), [], `engine URL in ${text.slice(0, 400)}`);
    }
  }
  for (const [i, s] of spellings.entries()) assert.ok(!server.stderr().includes(s), `spelling ${i} in the log`);
  tally.notes.keySpellings = spellings.length;
});

test('#23.6 and #20: queue positions and shares are per principal; counts leave out expired tasks; a body over the limit is 413', async () => {
  const holdTask = (token: string) =>
    req(server, 'POST', '/tasks', { token, body: { type: 'response', input: { model: 'hold/m1', input: 'hold' } } });
  const statusMessage = async (token: string, id: string) => {
    const legacy = (await (await legacySession(token)).call('tasks/get', { taskId: id })).result?.statusMessage;
    const now = (await modern(token)('tasks/get', { taskId: id })).body.result?.statusMessage;
    return [legacy, now];
  };

  tried('queue-position-per-principal');
  // The position is an MCP view (statusMessage): MCP tasks on the engine that holds one task at a time.
  const daveSession = await legacySession(tokens.dave);
  const dave: string[] = [];
  for (let i = 0; i < QUEUED_CAP; i++) dave.push(await mcpTaskOn(daveSession, 'hold/m1'));
  await waitForStatus(server, dave[0], ['running'], tokens.dave);
  const bobHeld = await mcpTaskOn(await legacySession(server.tokenB), 'hold/m1');
  // The place is in the order tasks really start (docs/queue.md): principals take turns, so dave's backlog does not
  // put bob's first task behind it, and the message names no one's tasks, only a place.
  const place = (messages: unknown[]) => messages.map((m) => /^queued: (\d+)(st|nd|rd|th)(, .*)?$/.exec(String(m))?.[1]);
  assert.deepEqual(place(await statusMessage(server.tokenB, bobHeld)), ['1', '1'], "dave's two queued tasks are not ahead of bob");
  assert.deepEqual(place(await statusMessage(tokens.dave, dave[2])), ['3', '3'], 'bob’s turn, then dave’s next, then this one');

  tried('queued-task-share');
  for (let i = 0; i < QUEUED_CAP; i++) assert.equal((await holdTask(tokens.carol)).status, 202);
  const over = await holdTask(tokens.carol);
  assert.equal(over.status, 429);
  assert.equal(over.json.code, 'limit_exceeded');
  assert.equal(over.json.limit.name, 'max_queued_tasks_per_principal');
  const overMcp = await modern(tokens.carol)('tools/call', { name: 'generate_long', arguments: { prompt: 'x', max_output_tokens: 2 } });
  assert.equal(overMcp.body.error?.code, -32029, JSON.stringify(overMcp.body));
  assert.equal((await holdTask(server.tokenB)).status, 202, "bob's create goes through at the same moment");

  tried('stream-share');
  const streams: AbortController[] = [];
  const open = async (token: string) => {
    const c = new AbortController();
    streams.push(c);
    const r = await fetch(`${server.lmsp}/task_runtime/changes`, { headers: { authorization: `Bearer ${token}` }, signal: c.signal });
    return counted(r.status);
  };
  try {
    for (let i = 0; i < STREAM_CAP; i++) assert.equal(await open(tokens.carol), 200);
    assert.equal(await open(tokens.carol), 429, "carol's stream over her share");
    assert.equal(await open(server.tokenB), 200, "bob's stream opens");
  } finally {
    for (const c of streams) c.abort();
  }

  tried('body-over-limit');
  const big = JSON.stringify({ type: 'response', input: { model: server.model, input: 'x'.repeat(MAX_BODY_BYTES) } });
  const tooBig = await req(server, 'POST', '/tasks', { rawBody: big, headers: { 'content-type': 'application/json' } });
  assert.equal(tooBig.status, 413);
  assert.equal(tooBig.json.code, 'payload_too_large');

  tried('counts-leave-out-expired');
  const erin = await legacySession(tokens.erin);
  await mcpTaskOn(erin, server.model, { max_output_tokens: 2 }, { ttl: 3000 });
  assert.equal((await req(server, 'GET', '/task_runtime/counts', { token: tokens.erin })).json.total, 1);
  // The sweep runs hourly here: a drop within the wait is the counts leaving the task out, not its removal.
  await until(
    async () => (await req(server, 'GET', '/task_runtime/counts', { token: tokens.erin })).json.total === 0,
    "erin's expired task to leave the counts",
    { intervalMs: 200 },
  );

  for (const id of dave) await req(server, 'POST', `/tasks/${id}/cancel`, { token: tokens.dave });
});

test('#23.6: a token file other users can read is refused at start', async () => {
  tried('token-file-permissions');
  const dataDir = tempDataDir();
  try {
    fs.writeFileSync(path.join(dataDir, 'tokens'), `alice ${randomBytes(24).toString('base64url')}\nbob ${randomBytes(24).toString('base64url')}\n`, {
      mode: 0o644,
    });
    fs.chmodSync(path.join(dataDir, 'tokens'), 0o644);
    await assert.rejects(startServer({ dataDir }), /mode 644\); run chmod 600/);
  } finally {
    removeDir(dataDir);
  }
});

test('#23.2: a request head that never finishes is cut at the headers timeout', async () => {
  assert.ok(slowHead, 'started by the flood test');
  const ms = await slowHead;
  const limit = DEFAULT_LISTENER_LIMITS.headersTimeoutMs;
  tally.notes.slowHeadClosedMs = ms;
  // Node's own check interval (30 s) would close it after 30 s at the earliest.
  assert.ok(ms >= limit * 0.9 && ms < limit + 15_000, `closed after ${ms} ms (headers timeout ${limit} ms)`);
});
