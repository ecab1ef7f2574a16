// Bad input: a seeded corpus of malformed requests (bad JSON, wrong types, huge and deeply nested bodies, bad
// headers, path tricks, odd methods, slow-loris senders) against LMSP and MCP. No crash, no 5xx, every answer in
// the protocol's own error form, and the stored tasks unchanged.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as net from 'node:net';
import { call, createTask, removeDir, startServer, waitForStatus, type Server } from '../protocol/lmsp/harness';
import { sleep } from '../support/wait';
import { QUICK, pick, recordFigures, seeded } from './support';

const CORPUS = Number(process.env.RELIABILITY_FUZZ_REQUESTS ?? 5000);
const SLOW_LORIS = QUICK ? 4 : 12;

interface Raw {
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: Buffer;
  /** Raw bytes instead of a composed request (broken request lines, bad headers). */
  wire?: Buffer;
}

function deep(n: number, arr: boolean): string {
  return arr ? '['.repeat(n) + ']'.repeat(n) : '{"a":'.repeat(n) + '1' + '}'.repeat(n);
}

function generateCorpus(rand: () => number, server: Server, taskId: string): Raw[] {
  const auth = { authorization: `Bearer ${server.tokenA}`, host: `127.0.0.1:${server.port}` };
  const json = { ...auth, 'content-type': 'application/json' };
  const mcpHeaders = { ...json, accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-11-25' };
  const lmspPaths = [
    '/lmsp/v1/tasks',
    `/lmsp/v1/tasks/${taskId}`,
    `/lmsp/v1/tasks/${taskId}/cancel`,
    `/lmsp/v1/tasks/${taskId}/events`,
    '/lmsp/v1/tasks/..%2f..%2fetc%2fpasswd',
    '/lmsp/v1/tasks/%00',
    '/lmsp/v1/tasks/../../../etc/passwd',
    '/lmsp/v1/../../mcp',
    '/lmsp/v1/tasks/' + 'a'.repeat(5000),
    '/lmsp/v1/responses',
    '/lmsp/v1/models',
    '/lmsp/v1/capabilities',
    '/lmsp/v1/task_runtime/changes',
    '/lmsp/v1/tasks?limit=-1',
    '/lmsp/v1/tasks?limit=abc&cursor=%ff%fe',
    '/lmsp/v1/tasks?status=nope',
    '/lmsp/v1//tasks',
    '/lmsp/v1/tasks/%2e%2e/%2e%2e',
    '/lmsp/v1/tasks/task_x/events?after=-5',
    '/lmsp/v1/responses/resp_%ZZ',
    '/lmsp/v1/nope',
  ];
  const badBodies = (): Buffer => {
    const kinds = [
      () => '{',
      () => '{"type":"response","input":',
      () => 'null',
      () => '[]',
      () => '"string"',
      () => '12345',
      () => JSON.stringify({ type: 'response', input: 'not an object' }),
      () => JSON.stringify({ type: 'nope', input: { model: server.model, input: 'x' } }),
      () => JSON.stringify({ type: 'response', input: { model: 42, input: 'x' } }),
      () => JSON.stringify({ type: 'response', input: { model: server.model, input: 'x', max_output_tokens: -1 } }),
      () => JSON.stringify({ type: 'response', input: { model: server.model, input: 'x', temperature: 'hot' } }),
      () => JSON.stringify({ type: 'response', input: { model: server.model, input: { nested: deep(10, false) } } }),
      () => JSON.stringify({ type: 'response', on_restart: 'sometimes', input: { model: server.model, input: 'x' } }),
      () => JSON.stringify({ type: 'response', input: { model: 'no-such-model', input: 'x' } }),
      () => JSON.stringify({ type: 'response', input: { model: server.model, input: [{ role: 'wizard', content: 7 }] } }),
      () => JSON.stringify({ type: 'response', input: { model: server.model, input: 'x', max_output_tokens: 1e308 } }),
      () => JSON.stringify({ __proto__: { polluted: true }, constructor: { prototype: { x: 1 } }, type: 'response' }),
      () => deep(5000 + Math.floor(rand() * 50_000), rand() < 0.5),
      () => '{"a":"' + 'x'.repeat(5 * 1024 * 1024) + '"}',
      () => Buffer.from([0xff, 0xfe, 0x00, 0x7b]).toString('latin1'),
      () => '{"type":"response","input":{"model":"' + server.model + '","input":"\ud800"}}x',
    ];
    return Buffer.from(pick(rand, kinds)());
  };
  const mcpBodies = (): Buffer => {
    const kinds = [
      () => '{',
      () => '[]',
      () => '[' + '{"jsonrpc":"2.0"},'.repeat(50) + '1]',
      () => JSON.stringify({ jsonrpc: '1.0', id: 1, method: 'tools/list' }),
      () => JSON.stringify({ jsonrpc: '2.0', id: { obj: true }, method: 'tools/list' }),
      () => JSON.stringify({ jsonrpc: '2.0', id: 1, method: 42 }),
      () => JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tasks/get', params: { taskId: taskId } }),
      () => JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tasks/cancel', params: { taskId: 7 } }),
      () => JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'generate', arguments: { prompt: 5 } } }),
      () => JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: 9, capabilities: 'x' } }),
      () => JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'no/such/method' }),
      () => deep(20_000, rand() < 0.5),
      () => '{"jsonrpc":"2.0","id":1,"method":"tools/list","params":"' + 'y'.repeat(5 * 1024 * 1024) + '"}',
    ];
    return Buffer.from(pick(rand, kinds)());
  };
  const corpus: Raw[] = [];
  while (corpus.length < CORPUS) {
    const r = rand();
    if (r < 0.35) {
      corpus.push({ method: pick(rand, ['POST', 'POST', 'PUT', 'PATCH']), path: pick(rand, lmspPaths), headers: { ...json }, body: badBodies() });
    } else if (r < 0.55) {
      const method = pick(rand, ['GET', 'DELETE', 'HEAD', 'OPTIONS', 'TRACE', 'PROPFIND', 'BREW', 'CONNECT', 'PURGE']);
      // DELETE of the real task is a valid request (it deletes): malformed ones only.
      const paths = method === 'DELETE' ? lmspPaths.filter((p) => p !== `/lmsp/v1/tasks/${taskId}`) : lmspPaths;
      corpus.push({
        method,
        path: pick(rand, paths),
        headers: rand() < 0.3 ? { ...auth, 'last-event-id': pick(rand, ['-1', 'abc', '1e99', '99999999999999999999']) } : { ...auth },
      });
    } else if (r < 0.8) {
      const headers: Record<string, string> = { ...mcpHeaders };
      const h = rand();
      if (h < 0.15) headers['mcp-session-id'] = pick(rand, ['nope', '../../x', 'a'.repeat(3000)]);
      else if (h < 0.3) headers.accept = 'text/html';
      else if (h < 0.4) headers['content-type'] = 'text/plain';
      else if (h < 0.5) headers['mcp-protocol-version'] = '1999-01-01';
      const method = rand() < 0.8 ? 'POST' : pick(rand, ['GET', 'DELETE', 'PUT', 'PATCH']);
      corpus.push({
        method,
        path: pick(rand, ['/mcp', '/mcp/', '/mcp/../lmsp/v1/tasks', '/mcp?x=%ff']),
        headers,
        body: method === 'GET' || method === 'DELETE' ? undefined : mcpBodies(),
      });
    } else if (r < 0.92) {
      // Bad headers: wrong content types, duplicate or garbage auth, oversized header values.
      const headers: Record<string, string> = { ...json };
      const h = rand();
      if (h < 0.2) headers['content-type'] = pick(rand, ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', '']);
      else if (h < 0.4) headers.authorization = pick(rand, ['Bearer', 'Basic YTpi', `Bearer ${server.tokenA} extra`, 'bearer ' + 'x'.repeat(4000)]);
      else if (h < 0.55) headers['content-length'] = pick(rand, ['-1', 'abc', '99999999999']);
      else if (h < 0.7) headers['x-big'] = 'z'.repeat(20_000);
      else if (h < 0.85) headers['transfer-encoding'] = pick(rand, ['chunked, identity', 'gzip']);
      else headers.host = pick(rand, ['', 'evil.example', `127.0.0.1:${server.port}@evil`]);
      corpus.push({ method: 'POST', path: pick(rand, ['/lmsp/v1/tasks', '/mcp']), headers, body: badBodies() });
    } else {
      // Broken wire: request lines and header syntax Node's parser must refuse.
      const wire = pick(rand, [
        'GET /lmsp/v1/tasks HTTP/1.1\r\nHost: 127.0.0.1\r\nBad Header\r\n\r\n',
        'GET  HTTP/1.1\r\n\r\n',
        'GARBAGE\r\n\r\n',
        'POST /lmsp/v1/tasks HTTP/1.1\r\nHost: 127.0.0.1:' + server.port + '\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello',
        'GET /lmsp/v1/tasks HTTP/9.9\r\nHost: 127.0.0.1\r\n\r\n',
        'POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:' + server.port + '\r\nTransfer-Encoding: chunked\r\n\r\nZZZ\r\n',
        '\x00\x01\x02\x03\r\n\r\n',
      ]);
      corpus.push({ method: '', path: '', headers: {}, wire: Buffer.from(wire) });
    }
  }
  return corpus;
}

function compose(r: Raw): Buffer {
  if (r.wire) return r.wire;
  const headers = { ...r.headers };
  if (r.body && headers['content-length'] === undefined) headers['content-length'] = String(r.body.length);
  const head =
    `${r.method} ${r.path} HTTP/1.1\r\n` +
    Object.entries(headers)
      .map(([k, v]) => `${k}: ${v}`)
      .join('\r\n') +
    '\r\nconnection: close\r\n\r\n';
  return Buffer.concat([Buffer.from(head, 'latin1'), r.body ?? Buffer.alloc(0)]);
}

interface Answer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Sends raw bytes over a fresh socket and parses one response (or none, when the server closes). */
function send(port: number, bytes: Buffer, slowMs = 0): Promise<Answer | undefined> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => socket.destroy(), 60_000);
    socket.on('data', (c) => chunks.push(c));
    socket.on('error', () => {});
    socket.on('close', () => {
      clearTimeout(timer);
      const text = Buffer.concat(chunks).toString('latin1');
      const m = /^HTTP\/1\.1 (\d{3})[^\r]*\r\n([\s\S]*?)\r\n\r\n([\s\S]*)$/.exec(text);
      if (!m) return resolve(undefined);
      const headers: Record<string, string> = {};
      for (const line of m[2].split('\r\n')) {
        const i = line.indexOf(':');
        if (i > 0) headers[line.slice(0, i).toLowerCase()] = line.slice(i + 1).trim();
      }
      let body = m[3];
      if (headers['transfer-encoding'] === 'chunked') {
        let out = '';
        let rest = body;
        for (;;) {
          const nl = rest.indexOf('\r\n');
          const size = parseInt(rest.slice(0, nl), 16);
          if (!size) break;
          out += rest.slice(nl + 2, nl + 2 + size);
          rest = rest.slice(nl + 4 + size);
        }
        body = out;
      }
      resolve({ status: Number(m[1]), headers, body: Buffer.from(body, 'latin1').toString('utf8') });
    });
    const dribble = async () => {
      if (!slowMs) return void socket.end(bytes);
      for (let i = 0; i < bytes.length && !socket.destroyed; i++) {
        socket.write(bytes.subarray(i, i + 1));
        await sleep(slowMs);
      }
      socket.end();
    };
    socket.on('connect', () => void dribble().catch(() => socket.destroy()));
  });
}

/** The protocol's own error form; returns why not, or undefined when it is fine. */
function checkForm(req: Raw, a: Answer): string | undefined {
  if (a.status >= 500) return `5xx ${a.status}`;
  if (a.status < 400) return undefined; // a read that is allowed (GET of a list, HEAD, ...)
  // HEAD answers carry no body; the parser's own refusals (bad request line, oversized headers) have none either.
  if (a.body === '' && (req.method === 'HEAD' || [400, 408, 413, 431, 505].includes(a.status))) return undefined;
  // Raw wire bytes may be followed by the parser's refusal of what came after: the status line is the answer.
  if (req.wire) return undefined;
  let body: any;
  try {
    body = JSON.parse(a.body);
  } catch {
    return `non-JSON ${a.status} body: ${a.body.slice(0, 80)}`;
  }
  let pathname = '/';
  try {
    pathname = new URL(req.path, 'http://127.0.0.1').pathname;
  } catch {
    // not a URL: the listener answers in problem+json
  }
  const isMcp = pathname === '/mcp' || pathname.startsWith('/mcp/');
  const jsonRpc = body?.jsonrpc === '2.0' && typeof body?.error?.code === 'number' && typeof body?.error?.message === 'string';
  const problem = typeof body?.code === 'string' && body?.status === a.status && /application\/problem\+json/.test(a.headers['content-type'] ?? '');
  if (isMcp ? jsonRpc || problem : problem) return undefined;
  return `${a.status} not in ${isMcp ? 'JSON-RPC' : 'problem+json'} form: ${a.body.slice(0, 120)}`;
}

async function snapshot(server: Server): Promise<string> {
  const parts: string[] = [];
  for (const token of [server.tokenA, server.tokenB]) {
    const r = await call(server, 'GET', '/tasks?limit=100', { token });
    parts.push(JSON.stringify(r.json.data.map((t: any) => [t.id, t.status, t.updated_at, t.task_runtime.output_tokens])));
  }
  return parts.join('\n');
}

test(`fuzz: ${CORPUS} malformed requests and ${SLOW_LORIS} slow-loris senders against LMSP and MCP`, { timeout: 20 * 60_000 }, async () => {
  const server = await startServer();
  const failures: string[] = [];
  let status5xx = 0;
  let noAnswer = 0;
  let resetAfterEarlyAnswer = 0;
  const noAnswerSamples: string[] = [];
  try {
    const task = await createTask(server, { max_output_tokens: 4 });
    await waitForStatus(server, task.id, ['succeeded']);
    await createTask(server, { max_output_tokens: 4 }, {}, server.tokenB).then((t) => waitForStatus(server, t.id, ['succeeded'], server.tokenB));
    const before = await snapshot(server);
    const corpus = generateCorpus(seeded(424242), server, task.id);

    let next = 0;
    const worker = async () => {
      while (next < corpus.length) {
        const req = corpus[next++];
        const a = await send(server.port, compose(req));
        if (!a) {
          // A closed connection without an answer is fine only for bytes that are not HTTP at all.
          if (req.body && req.body.length > 1024 * 1024) {
            // The server answered early and closed while megabytes were still being sent: TCP resets the
            // connection, and the answer can be lost on the client side. Not a server fault.
            resetAfterEarlyAnswer++;
          } else if (!req.wire) {
            noAnswer++;
            if (noAnswerSamples.length < 5) noAnswerSamples.push(compose(req).subarray(0, 200).toString('latin1'));
          }
          continue;
        }
        if (a.status >= 500) status5xx++;
        const why = checkForm(req, a);
        if (why && failures.length < 20) failures.push(`${req.method} ${req.path.slice(0, 60)}: ${why}`);
        else if (why) failures.push('');
      }
    };
    const lorisRand = seeded(99);
    const loris = Array.from({ length: SLOW_LORIS }, (_, i) => {
      const stall = i % 2 === 1;
      const bytes = stall
        ? Buffer.from(`GET /lmsp/v1/tasks HTTP/1.1\r\nHost: 127.0.0.1:${server.port}\r\nX-Slow: `) // never finishes the headers
        : compose({
            method: 'GET',
            path: pick(lorisRand, ['/lmsp/v1/tasks', '/lmsp/v1/models']),
            headers: { authorization: `Bearer ${server.tokenA}`, host: `127.0.0.1:${server.port}` },
          });
      return send(server.port, bytes, stall ? 200 : 15).then((a) => ({ stall, a }));
    });
    await Promise.all(Array.from({ length: 16 }, worker));
    const lorisAnswers = await Promise.all(loris);
    for (const { stall, a } of lorisAnswers) {
      if (stall) {
        // Headers never completed: refused (408 on the headers timeout, 400 once the sender gives up), never served.
        if (a && a.status !== 408 && a.status !== 400) failures.push(`stalled sender got ${a.status}`);
      } else if (a?.status !== 200) failures.push(`slow but complete sender got ${a?.status}`);
    }
    assert.equal(server.proc.exitCode, null, 'the server is still running');
    assert.equal(server.proc.signalCode, null);
    const after = await snapshot(server);
    assert.equal(after, before, 'stored tasks unchanged');
    assert.equal((await call(server, 'GET', '/models')).status, 200);
    recordFigures('fuzz', {
      iterations: 1,
      faultsInjected: corpus.length + SLOW_LORIS,
      requestsTried: corpus.length + SLOW_LORIS,
      crashes: server.proc.exitCode === null ? 0 : 1,
      status5xx,
      dataLost: after === before ? 0 : 1,
      notes: { noAnswer, noAnswerSamples, resetAfterEarlyAnswer, formViolations: failures.length, firstViolations: failures.slice(0, 10) },
    });
  } finally {
    await server.kill();
    removeDir(server.dataDir);
  }
  assert.equal(status5xx, 0, 'no 5xx');
  assert.deepEqual(failures.slice(0, 10), [], 'every answer in the protocol error form');
  assert.equal(noAnswer, 0, 'every HTTP request got an answer');
});
