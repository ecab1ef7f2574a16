// MCP door costs (issue #14):
// 1. tasks/get under 100 concurrent pollers, ours against the MCP SDK 1.x reference task server in the same run. Each
//    server runs in its own child process (bench/mcpServerChild.ts), so its CPU time per request is its own; the
//    pollers live here. Every poller opens a session, creates one task with tools/call (tiny model on ours; the
//    reference's registerToolTask tool completes at once), waits for it to finish, then polls tasks/get on it: 100
//    finished tasks on each server. Two kinds of poller, each in alternating rounds (ours, reference, reference,
//    ours, …): the SDK Client (`client.experimental.tasks.getTask`, what the issue measured) and plain fetch on the
//    same sessions and tasks (a cheap client, so the pollers' own CPU disturbs the servers less on 2 cores).
//    Reported per server: CPU ms per request (child's process.cpuUsage over the polling window ÷ requests), requests/s,
//    client-side p50/p99, and, to place a tail, the server-side request residence, the server's event-loop delay and
//    GC pauses, and the pollers' own event-loop delay and GC.
// 2. create-to-first-token overhead of a task created through MCP (tools/call over HTTP) versus runtime.createTask in
//    the same process; and the LMSP door's GET of the same task as the cheapest read the listener serves.
// Run directly: node out/bench/mcp.js [clients=100] [pollsPerClient=20] [rounds=3]

import { fork, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, CreateTaskResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { LlamaBackend } from '../src/backends/llama/llamaBackend';
import { writeTestModel } from '../src/backends/llama/demoModel';
import { startEndpoint } from '../src/protocols/endpoint';
import { TaskRuntime } from '../src/runtime/runtime';

export interface McpBenchOptions {
  /** A .gguf to generate with; default: the generated tiny test model. */
  modelPath?: string;
  clients?: number;
  pollsPerClient?: number;
  /** Polling rounds per server and poller kind (alternating servers). */
  rounds?: number;
  /** Create-to-first-token samples per path. */
  samples?: number;
  /** Which parts to run (default all). */
  parts?: Array<'tasks_get' | 'first_token'>;
}

function percentile(sorted: number[], p: number): number {
  if (!sorted.length) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

const round = (n: number, d = 2) => Math.round(n * 10 ** d) / 10 ** d;
const median = (xs: number[]) =>
  percentile(
    [...xs].sort((a, b) => a - b),
    50,
  );

function rawHeaders(token: string): Record<string, string> {
  return {
    authorization: `Bearer ${token}`,
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': '2025-11-25',
  };
}

/** N concurrent pollers, each doing `polls` sequential requests (after one warm-up round); raw latencies and elapsed time. */
async function pollLoad(n: number, polls: number, poll: (i: number) => Promise<unknown>) {
  // One uncounted round first: opening fresh keep-alive connections is not what a poll costs.
  await Promise.all(Array.from({ length: n }, (_, i) => poll(i)));
  const latencies: number[] = [];
  const started = performance.now();
  await Promise.all(
    Array.from({ length: n }, async (_, i) => {
      for (let k = 0; k < polls; k++) {
        const t0 = performance.now();
        await poll(i);
        latencies.push(performance.now() - t0);
      }
    }),
  );
  return { latencies, elapsedMs: performance.now() - started };
}

interface Mark {
  wallMs: number;
  cpuUserMs: number;
  cpuSystemMs: number;
  requests: number;
  residenceP50Ms: number;
  residenceP99Ms: number;
  residenceMaxMs: number;
  loopDelayP99Ms: number;
  loopDelayMaxMs: number;
  gcMs: number;
  gcCount: number;
  gcMaxMs: number;
}

interface ServerChild {
  name: 'ours' | 'sdk' | 'bare';
  url: string;
  mcpUrl: string;
  token: string;
  mark(): Promise<Mark>;
  stop(): Promise<void>;
}

async function startChild(name: 'ours' | 'sdk' | 'bare', args: string[]): Promise<ServerChild> {
  const child: ChildProcess = fork(path.join(__dirname, 'mcpServerChild.js'), [name, ...args], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    execArgv: process.env.MCP_BENCH_CHILD_ARGS ? process.env.MCP_BENCH_CHILD_ARGS.split(' ') : [],
  });
  const ready = await new Promise<{ url: string; token: string }>((resolve, reject) => {
    child.once('message', (m) => resolve(m as { url: string; token: string }));
    child.once('exit', (code) => reject(new Error(`${name} server exited with ${code}`)));
  });
  return {
    name,
    url: ready.url,
    mcpUrl: `${ready.url}/mcp`,
    token: ready.token,
    mark: () =>
      new Promise<Mark>((resolve) => {
        child.once('message', (m) => resolve(m as Mark));
        child.send({ type: 'mark' });
      }),
    stop: () =>
      new Promise<void>((resolve) => {
        child.once('exit', () => resolve());
        child.send({ type: 'stop' });
      }),
  };
}

/** What one polling window cost, seen from the server (child) and from the pollers (this process). */
async function measured(server: ServerChild, n: number, polls: number, poll: (i: number) => Promise<unknown>) {
  const clientLoop = monitorEventLoopDelay({ resolution: 1 });
  let clientGcMs = 0;
  let clientGcMaxMs = 0;
  const gcObserver = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      clientGcMs += e.duration;
      clientGcMaxMs = Math.max(clientGcMaxMs, e.duration);
    }
  });
  await server.mark();
  clientLoop.enable();
  gcObserver.observe({ entryTypes: ['gc'] });
  const clientCpu0 = process.cpuUsage();
  const load = await pollLoad(n, polls, poll);
  const clientCpu = process.cpuUsage(clientCpu0);
  gcObserver.disconnect();
  clientLoop.disable();
  const m = await server.mark();
  return {
    ...load,
    server: m,
    // The warm-up round is inside the server's window: n more requests than the latencies count.
    serverCpuMsPerRequest: (m.cpuUserMs + m.cpuSystemMs) / m.requests,
    clientCpuMsPerRequest: (clientCpu.user + clientCpu.system) / 1000 / (n * (polls + 1)),
    clientLoopDelayP99Ms: clientLoop.percentile(99) / 1e6,
    clientLoopDelayMaxMs: clientLoop.max / 1e6,
    clientGcMs,
    clientGcMaxMs,
  };
}

type Measured = Awaited<ReturnType<typeof measured>>;

function summarize(runs: Measured[]) {
  const lat = runs.flatMap((r) => r.latencies).sort((a, b) => a - b);
  const requests = runs.reduce((s, r) => s + r.latencies.length, 0);
  const elapsed = runs.reduce((s, r) => s + r.elapsedMs, 0);
  const max = (f: (r: Measured) => number) => round(Math.max(...runs.map(f)));
  return {
    requests,
    cpuMsPerRequest: round(median(runs.map((r) => r.serverCpuMsPerRequest)), 4),
    cpuMsPerRequestByRound: runs.map((r) => round(r.serverCpuMsPerRequest, 4)),
    perSecond: Math.round((requests / elapsed) * 1000),
    p50Ms: round(percentile(lat, 50)),
    p99Ms: round(percentile(lat, 99)),
    maxMs: round(lat[lat.length - 1]),
    serverResidenceP50Ms: round(median(runs.map((r) => r.server.residenceP50Ms)), 3),
    serverResidenceP99Ms: max((r) => r.server.residenceP99Ms),
    serverResidenceMaxMs: max((r) => r.server.residenceMaxMs),
    serverLoopDelayP99Ms: max((r) => r.server.loopDelayP99Ms),
    serverLoopDelayMaxMs: max((r) => r.server.loopDelayMaxMs),
    serverGcMsPerRequest: round(runs.reduce((s, r) => s + r.server.gcMs, 0) / runs.reduce((s, r) => s + r.server.requests, 0), 4),
    serverGcMaxMs: max((r) => r.server.gcMaxMs),
    clientCpuMsPerRequest: round(median(runs.map((r) => r.clientCpuMsPerRequest)), 4),
    clientLoopDelayP99Ms: max((r) => r.clientLoopDelayP99Ms),
    clientLoopDelayMaxMs: max((r) => r.clientLoopDelayMaxMs),
    clientGcMs: round(runs.reduce((s, r) => s + r.clientGcMs, 0)),
    clientGcMaxMs: max((r) => r.clientGcMaxMs),
  };
}

/** 100 pollers per server, each with its own session and its own finished task. */
async function pollers(server: ServerChild, n: number) {
  const clients: Client[] = [];
  const taskIds: string[] = [];
  const sessionIds: string[] = [];
  const args = { prompt: 'Write a long story about a durable task runtime.', temperature: 0, max_output_tokens: 8 };
  for (let i = 0; i < n; i++) {
    const c = new Client({ name: 'bench', version: '1' }, { capabilities: {} });
    const transport = new StreamableHTTPClientTransport(new URL(server.mcpUrl), {
      requestInit: { headers: { authorization: `Bearer ${server.token}` } },
    });
    await c.connect(transport);
    const created = await c.request({ method: 'tools/call', params: { name: 'generate', arguments: args, task: {} } }, CreateTaskResultSchema);
    await c.experimental.tasks.getTaskResult(created.task.taskId, CallToolResultSchema);
    clients.push(c);
    taskIds.push(created.task.taskId);
    sessionIds.push(transport.sessionId!);
  }
  const sdkPoll = (i: number) => clients[i].experimental.tasks.getTask(taskIds[i]);
  const fetchPoll = (i: number) =>
    fetch(server.mcpUrl, {
      method: 'POST',
      headers: { ...rawHeaders(server.token), 'mcp-session-id': sessionIds[i] },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tasks/get', params: { taskId: taskIds[i] } }),
    }).then(async (r) => {
      const text = await r.text();
      if (r.status !== 200 || !text.includes('"completed"')) throw new Error(`${server.name}: tasks/get answered ${r.status} ${text.slice(0, 200)}`);
    });
  return { clients, taskIds, sessionIds, sdkPoll, fetchPoll, close: () => Promise.all(clients.map((c) => c.close().catch(() => {}))) };
}

async function tasksGetBench(modelPath: string, dir: string, n: number, polls: number, rounds: number) {
  const ours = await startChild('ours', [modelPath, path.join(dir, 'child-data')]);
  const sdk = await startChild('sdk', []);
  const bare = await startChild('bare', []);
  try {
    const p = { ours: await pollers(ours, n), sdk: await pollers(sdk, n) };
    const servers = { ours, sdk };
    const runs: Record<'sdkClient' | 'fetch', Record<'ours' | 'sdk', Measured[]>> = {
      sdkClient: { ours: [], sdk: [] },
      fetch: { ours: [], sdk: [] },
    };
    const floor: Measured[] = [];
    const barePoll = (i: number) =>
      fetch(bare.mcpUrl, {
        method: 'POST',
        headers: { ...rawHeaders(bare.token), 'mcp-session-id': p.ours.sessionIds[i] },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tasks/get', params: { taskId: p.ours.taskIds[i] } }),
      }).then((r) => r.text());
    // Warm-up (uncounted): one full polling window per server and poller kind, so the rounds compare optimised code
    // (the first window ran 1.5–2× the CPU of later ones); then settle, so the checkpoint after 100 creates and the
    // model's idle work do not land in a window.
    for (const s of ['ours', 'sdk'] as const) {
      await pollLoad(n, polls, p[s].sdkPoll);
      await pollLoad(n, polls, p[s].fetchPoll);
    }
    await pollLoad(n, polls, barePoll);
    await new Promise((r) => setTimeout(r, 1500));
    for (const kind of ['sdkClient', 'fetch'] as const) {
      for (let r = 0; r < rounds; r++) {
        const order: Array<'ours' | 'sdk'> = r % 2 === 0 ? ['ours', 'sdk'] : ['sdk', 'ours'];
        for (const s of order) {
          runs[kind][s].push(await measured(servers[s], n, polls, kind === 'sdkClient' ? p[s].sdkPoll : p[s].fetchPoll));
        }
        if (kind === 'fetch') floor.push(await measured(bare, n, polls, barePoll));
      }
    }
    // The LMSP door's GET of the same tasks on our server, with plain fetch: the cheapest read the listener serves.
    const lmsp: Measured[] = [];
    for (let r = 0; r < rounds; r++) {
      lmsp.push(
        await measured(ours, n, polls, (i) =>
          fetch(`${ours.url}/lmsp/v1/tasks/${p.ours.taskIds[i]}`, { headers: { authorization: `Bearer ${ours.token}` } }).then((res) => res.text()),
        ),
      );
    }
    await Promise.all([p.ours.close(), p.sdk.close()]);
    const out: Record<string, unknown> = { clients: n, pollsPerClient: polls, rounds };
    for (const kind of ['sdkClient', 'fetch'] as const) {
      const o = summarize(runs[kind].ours);
      const s = summarize(runs[kind].sdk);
      out[kind] = {
        ours: o,
        sdkReference: s,
        cpuPerRequestOursOverSdk: round(o.cpuMsPerRequest / s.cpuMsPerRequest),
        throughputOursOverSdk: round(o.perSecond / s.perSecond),
        p99OursOverSdk: round(o.p99Ms / s.p99Ms),
      };
    }
    out.lmspGet = summarize(lmsp);
    // node:http answering a constant body: what every server pays per request before doing anything.
    out.bareNodeHttpFloor = summarize(floor);
    return out;
  } finally {
    await Promise.all([ours.stop(), sdk.stop(), bare.stop()]);
  }
}

async function firstTokenBench(modelPath: string, dir: string, samples: number) {
  const backend = new LlamaBackend({ models: [{ id: 'bench', source: modelPath, demo: true }] });
  const runtime = await TaskRuntime.open({ dataDir: path.join(dir, 'data'), backend });
  const token = 'bench-token-0123456789abcdef';
  const endpoint = await startEndpoint(runtime, { port: 0, tokens: new Map([[token, 'bench']]) });
  const main = new Client({ name: 'bench', version: '1' }, { capabilities: {} });
  try {
    await main.connect(
      new StreamableHTTPClientTransport(new URL(endpoint.mcpUrl), { requestInit: { headers: { authorization: `Bearer ${token}` } } }),
    );
    const args = { prompt: 'Write a long story about a durable task runtime.', temperature: 0, max_output_tokens: 8 };

    // Warm the model so first-token figures measure the door, not the load.
    const warm = await main.request({ method: 'tools/call', params: { name: 'generate', arguments: args, task: {} } }, CreateTaskResultSchema);
    await main.experimental.tasks.getTaskResult(warm.task.taskId, CallToolResultSchema);

    const firstToken = (id: string, t0: number) =>
      new Promise<number>((resolve) => {
        const sub = runtime.onTaskChange((t) => {
          if (t.id === id && (t.outputTokens > 0 || t.status === 'succeeded' || t.status === 'failed')) {
            sub.close();
            resolve(performance.now() - t0);
          }
        });
      });
    const viaMcp: number[] = [];
    const direct: number[] = [];
    for (let i = 0; i < samples; i++) {
      {
        const t0 = performance.now();
        let seen: Promise<number> | undefined;
        let idResolved: (id: string) => void = () => {};
        const idKnown = new Promise<string>((r) => (idResolved = r));
        // Subscribe before the request so a fast first token is not missed: match the first new mcp task.
        const sub = runtime.onTaskChange((t) => {
          if (t.origin === 'mcp' && t.status === 'queued' && !seen) {
            seen = firstToken(t.id, t0);
            idResolved(t.id);
          }
        });
        const created = await main.request({ method: 'tools/call', params: { name: 'generate', arguments: args, task: {} } }, CreateTaskResultSchema);
        const id = await Promise.race([idKnown, Promise.resolve(created.task.taskId)]);
        sub.close();
        seen ??= firstToken(id, t0);
        viaMcp.push(await seen);
        await runtime.waitForTerminal(created.task.taskId);
      }
      {
        const t0 = performance.now();
        const { task } = runtime.createTask({
          origin: 'lmsp',
          principal: 'bench',
          input: { model: 'bench', input: args.prompt, temperature: 0, max_output_tokens: 8 },
        });
        direct.push(await firstToken(task.id, t0));
        await runtime.waitForTerminal(task.id);
      }
    }
    viaMcp.sort((a, b) => a - b);
    direct.sort((a, b) => a - b);
    const p50Mcp = percentile(viaMcp, 50);
    const p50Direct = percentile(direct, 50);
    return {
      firstTokenSamples: samples,
      firstTokenMcpP50Ms: round(p50Mcp),
      firstTokenDirectP50Ms: round(p50Direct),
      firstTokenMcpOverheadMs: round(p50Mcp - p50Direct),
      firstTokenMcpOverDirectRatio: round(p50Mcp / p50Direct),
    };
  } finally {
    await main.close().catch(() => {});
    await endpoint.close();
    await runtime.close();
    await backend.dispose();
  }
}

export async function mcpBench(opts: McpBenchOptions = {}): Promise<Record<string, unknown>> {
  const n = opts.clients ?? 100;
  const polls = opts.pollsPerClient ?? 20;
  const rounds = opts.rounds ?? 3;
  const samples = opts.samples ?? 15;
  const parts = opts.parts ?? ['tasks_get', 'first_token'];
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mcp-bench-'));
  const modelPath = opts.modelPath ?? path.join(dir, 'tiny.gguf');
  if (!opts.modelPath) writeTestModel(modelPath, { seed: 1 });
  try {
    const out: Record<string, unknown> = {};
    if (parts.includes('tasks_get')) out.tasksGet = await tasksGetBench(modelPath, dir, n, polls, rounds);
    if (parts.includes('first_token')) Object.assign(out, await firstTokenBench(modelPath, dir, samples));
    return out;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

if (require.main === module) {
  const [clients, polls, rounds] = process.argv.slice(2).map(Number);
  const parts = process.env.MCP_BENCH_PARTS ? (process.env.MCP_BENCH_PARTS.split(',') as McpBenchOptions['parts']) : undefined;
  mcpBench({ clients: clients || undefined, pollsPerClient: polls || undefined, rounds: rounds || undefined, parts })
    .then((r) => {
      console.log(JSON.stringify(r, null, 2));
      process.exit(0);
    })
    .catch((e) => {
      console.error(e);
      process.exit(1);
    });
}
