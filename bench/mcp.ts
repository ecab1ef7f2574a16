// MCP door costs: tasks/get latency under 100 concurrent polling SDK clients, and the create-to-first-token
// overhead of a task created through MCP (tools/call over HTTP) versus runtime.createTask in the same process.
// Run directly: node out/bench/mcp.js [clients=100] [pollsPerClient=20] [samples=15]

import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, CreateTaskResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { LlamaBackend } from '../src/backends/llama/llamaBackend';
import { writeTestModel } from '../src/backends/llama/testModel';
import { startEndpoint } from '../src/protocols/endpoint';
import { TaskRuntime } from '../src/runtime/runtime';

export interface McpBenchOptions {
  /** A .gguf to generate with; default: the generated tiny test model. */
  modelPath?: string;
  clients?: number;
  pollsPerClient?: number;
  /** Create-to-first-token samples per path. */
  samples?: number;
}

function percentile(sorted: number[], p: number): number {
  if (!sorted.length) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

const round = (n: number) => Math.round(n * 100) / 100;

function rawHeaders(token: string): Record<string, string> {
  return {
    authorization: `Bearer ${token}`,
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': '2025-11-25',
  };
}

async function rawSession(mcpUrl: string, token: string): Promise<string> {
  const res = await fetch(mcpUrl, {
    method: 'POST',
    headers: rawHeaders(token),
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 0,
      method: 'initialize',
      params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'bench', version: '1' } },
    }),
  });
  await res.text();
  const id = res.headers.get('mcp-session-id');
  if (!id) throw new Error(`initialize failed: ${res.status}`);
  return id;
}

/** N concurrent pollers, each doing `polls` sequential requests (after one warm-up round); percentiles and throughput. */
async function pollLoad(n: number, polls: number, poll: (i: number) => Promise<unknown>) {
  // One uncounted round first: opening 100 fresh keep-alive connections is not what a poll costs.
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
  const elapsed = performance.now() - started;
  latencies.sort((a, b) => a - b);
  return {
    count: latencies.length,
    p50: round(percentile(latencies, 50)),
    p99: round(percentile(latencies, 99)),
    perSecond: Math.round((latencies.length / elapsed) * 1000),
  };
}

export async function mcpBench(opts: McpBenchOptions = {}): Promise<Record<string, unknown>> {
  const clientsN = opts.clients ?? 100;
  const polls = opts.pollsPerClient ?? 20;
  const samples = opts.samples ?? 15;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mcp-bench-'));
  const modelPath = opts.modelPath ?? path.join(dir, 'tiny.gguf');
  if (!opts.modelPath) writeTestModel(modelPath, { seed: 1 });
  const backend = new LlamaBackend({ models: [{ id: 'bench', source: modelPath, demo: !opts.modelPath }] });
  const runtime = await TaskRuntime.open({ dataDir: path.join(dir, 'data'), backend });
  const token = 'bench-token-0123456789abcdef';
  const endpoint = await startEndpoint(runtime, { port: 0, tokens: new Map([[token, 'bench']]) });
  const clients: Client[] = [];
  try {
    const connectClient = async () => {
      const c = new Client({ name: 'bench', version: '1' }, { capabilities: {} });
      await c.connect(new StreamableHTTPClientTransport(new URL(endpoint.mcpUrl), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
      return c;
    };
    const main = await connectClient();
    clients.push(main);
    const args = { prompt: 'Write a long story about a durable task runtime.', temperature: 0, max_output_tokens: 8 };

    // Warm the model so first-token figures measure the door, not the load.
    const warm = await main.request({ method: 'tools/call', params: { name: 'generate', arguments: args, task: {} } }, CreateTaskResultSchema);
    await main.experimental.tasks.getTaskResult(warm.task.taskId, CallToolResultSchema);

    // ---- create → first token: MCP door vs direct runtime call, interleaved ----
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
        const { task } = runtime.createTask({ origin: 'lmsp', principal: 'bench', input: { model: 'bench', input: args.prompt, temperature: 0, max_output_tokens: 8 } });
        direct.push(await firstToken(task.id, t0));
        await runtime.waitForTerminal(task.id);
      }
    }
    viaMcp.sort((a, b) => a - b);
    direct.sort((a, b) => a - b);

    // ---- tasks/get under N concurrent polling clients ----
    const taskId = warm.task.taskId;
    for (let i = 1; i < clientsN; i++) clients.push(await connectClient());
    const sdk = await pollLoad(clientsN, polls, (i) => clients[i].experimental.tasks.getTask(taskId));

    // Same load with plain fetch: MCP tasks/get (one session per poller) vs the LMSP door's GET of the same task,
    // so the ratio shows what the MCP door costs over the cheapest read the listener serves.
    const sessionIds: string[] = [];
    for (let i = 0; i < clientsN; i++) sessionIds.push(await rawSession(endpoint.mcpUrl, token));
    const rawMcp = await pollLoad(clientsN, polls, (i) =>
      fetch(endpoint.mcpUrl, {
        method: 'POST',
        headers: { ...rawHeaders(token), 'mcp-session-id': sessionIds[i] },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tasks/get', params: { taskId } }),
      }).then((r) => r.text()),
    );
    const lmsp = await pollLoad(clientsN, polls, () =>
      fetch(`${endpoint.lmspUrl}/tasks/${taskId}`, { headers: { authorization: `Bearer ${token}` } }).then((r) => r.text()),
    );

    const p50Mcp = percentile(viaMcp, 50);
    const p50Direct = percentile(direct, 50);
    return {
      clients: clientsN,
      tasksGetRequests: sdk.count,
      tasksGetP50Ms: sdk.p50,
      tasksGetP99Ms: sdk.p99,
      tasksGetPerSecond: sdk.perSecond,
      rawFetchTasksGetP50Ms: rawMcp.p50,
      rawFetchTasksGetP99Ms: rawMcp.p99,
      rawFetchTasksGetPerSecond: rawMcp.perSecond,
      lmspGetP50Ms: lmsp.p50,
      lmspGetP99Ms: lmsp.p99,
      lmspGetPerSecond: lmsp.perSecond,
      tasksGetOverLmspGetP50Ratio: round(rawMcp.p50 / lmsp.p50),
      firstTokenSamples: samples,
      firstTokenMcpP50Ms: round(p50Mcp),
      firstTokenDirectP50Ms: round(p50Direct),
      firstTokenMcpOverheadMs: round(p50Mcp - p50Direct),
      firstTokenMcpOverDirectRatio: round(p50Mcp / p50Direct),
    };
  } finally {
    await Promise.all(clients.map((c) => c.close().catch(() => {})));
    await endpoint.close();
    await runtime.close();
    await backend.dispose();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

if (require.main === module) {
  const [clients, polls, samples] = process.argv.slice(2).map(Number);
  mcpBench({ clients: clients || undefined, pollsPerClient: polls || undefined, samples: samples || undefined })
    .then((r) => console.log(JSON.stringify(r, null, 2)))
    .catch((e) => {
      console.error(e);
      process.exit(1);
    });
}
