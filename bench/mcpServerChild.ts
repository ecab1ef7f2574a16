// Child process of the MCP bench (bench/mcp.ts): one MCP server per process, so that its CPU time is its own
// (process.cpuUsage() here counts every thread of this process, and nothing else: the polling clients live in the
// parent). Two servers:
//   ours <modelPath> <dataDir>  the task runtime's endpoint (both doors, the real listener) on the tiny model;
//   sdk                         the MCP SDK 1.x reference task server, built as the SDK's own example
//                               (src/examples/server/simpleStreamableHttp.ts) builds it: one McpServer +
//                               StreamableHTTPServerTransport per session, a shared InMemoryTaskStore and
//                               InMemoryTaskMessageQueue, the tool registered with experimental.tasks.registerToolTask,
//                               tasks/get answered by the SDK's own handler. Its HTTP layer is plain node:http (the
//                               example uses express, which would only add CPU to the reference);
//   bare                        the floor: node:http answering a fixed JSON body (what any server pays per request).
// IPC: the child sends {type:'ready', url, token}; on {type:'mark'} it answers {type:'mark', ...} with its CPU time,
// event-loop delay, GC pauses and server-side request times since the previous mark; on {type:'stop'} it exits.
import * as diagnostics from 'node:diagnostics_channel';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import * as path from 'node:path';
import { monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks';
import { randomUUID } from 'node:crypto';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { InMemoryTaskMessageQueue, InMemoryTaskStore } from '@modelcontextprotocol/sdk/experimental/tasks/stores/in-memory.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { LlamaBackend } from '../src/backends/llama/llamaBackend';
import { startEndpoint } from '../src/protocols/endpoint';
import { TaskRuntime } from '../src/runtime/runtime';

const TOKEN = 'bench-token-0123456789abcdef';

interface Stop {
  close(): Promise<void>;
}

async function startOurs(modelPath: string, dataDir: string): Promise<{ url: string } & Stop> {
  const backend = new LlamaBackend({ models: [{ id: 'bench', source: modelPath, demo: true }] });
  const runtime = await TaskRuntime.open({ dataDir, backend });
  const endpoint = await startEndpoint(runtime, { port: 0, tokens: new Map([[TOKEN, 'bench']]) });
  return {
    url: endpoint.url,
    async close() {
      await endpoint.close();
      await runtime.close();
      await backend.dispose();
    },
  };
}

/** The SDK reference: its own task machinery end to end. The tool completes at once with a result of the same shape as ours. */
async function startSdk(): Promise<{ url: string } & Stop> {
  const taskStore = new InMemoryTaskStore();
  const transports = new Map<string, StreamableHTTPServerTransport>();

  const makeServer = () => {
    const server = new McpServer(
      { name: 'sdk-reference', version: '1.0.0' },
      {
        capabilities: { tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } },
        taskStore,
        taskMessageQueue: new InMemoryTaskMessageQueue(),
      },
    );
    server.experimental.tasks.registerToolTask(
      'generate',
      {
        description: 'Generates text (reference: completes at once).',
        inputSchema: { prompt: z.string(), temperature: z.number().optional(), max_output_tokens: z.number().optional() },
        execution: { taskSupport: 'optional' },
      },
      {
        async createTask(_args, { taskStore: store, taskRequestedTtl }) {
          const task = await store.createTask({ ttl: taskRequestedTtl });
          setImmediate(() => {
            const text = 'reference output';
            void store.storeTaskResult(task.taskId, 'completed', {
              content: [{ type: 'text', text }],
              structuredContent: { status: 'completed', text, taskId: task.taskId, model: 'bench', outputTokens: 8 },
              isError: false,
            });
          });
          return { task };
        },
        async getTask(_args, { taskId, taskStore: store }) {
          return await store.getTask(taskId);
        },
        async getTaskResult(_args, { taskId, taskStore: store }) {
          return (await store.getTaskResult(taskId)) as never;
        },
      },
    );
    return server;
  };

  const readBody = (req: IncomingMessage) =>
    new Promise<unknown>((resolve, reject) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        try {
          resolve(chunks.length ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : undefined);
        } catch (e) {
          reject(e);
        }
      });
      req.on('error', reject);
    });

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    if (req.headers.authorization !== `Bearer ${TOKEN}`) {
      res.writeHead(401).end();
      return;
    }
    const sid = req.headers['mcp-session-id'];
    const sessionId = typeof sid === 'string' ? sid : undefined;
    if (req.method === 'POST') {
      const body = await readBody(req);
      let transport = sessionId ? transports.get(sessionId) : undefined;
      if (!transport && !sessionId && isInitializeRequest(body)) {
        const t = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          onsessioninitialized: (id) => {
            transports.set(id, t);
          },
        });
        t.onclose = () => {
          if (t.sessionId) transports.delete(t.sessionId);
        };
        await makeServer().connect(t);
        transport = t;
      }
      if (!transport) {
        res.writeHead(400, { 'content-type': 'application/json' }).end('{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request"},"id":null}');
        return;
      }
      await transport.handleRequest(req, res, body);
      return;
    }
    const transport = sessionId ? transports.get(sessionId) : undefined;
    if (!transport) {
      res.writeHead(400).end();
      return;
    }
    await transport.handleRequest(req, res);
  };
  const server = createServer((req, res) => {
    handle(req, res).catch(() => {
      if (!res.headersSent) res.writeHead(500);
      res.end();
    });
  });
  server.keepAliveTimeout = 5_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    async close() {
      await Promise.all([...transports.values()].map((t) => t.close().catch(() => {})));
      taskStore.cleanup();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** The floor: node:http reading and parsing the body and answering a fixed JSON-RPC result, nothing else. */
async function startBare(): Promise<{ url: string } & Stop> {
  const answer = JSON.stringify({
    result: {
      taskId: 'task_0',
      status: 'completed',
      statusMessage: 'completed: 8 tokens',
      createdAt: new Date(0).toISOString(),
      lastUpdatedAt: new Date(0).toISOString(),
      ttl: 3600000,
    },
    jsonrpc: '2.0',
    id: 1,
  });
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      JSON.parse(Buffer.concat(chunks).toString('utf8'));
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(answer) });
      res.end(answer);
    });
  });
  server.keepAliveTimeout = 5_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

// ---- measurement, reset at every mark ----
const loopDelay = monitorEventLoopDelay({ resolution: 1 });
loopDelay.enable();
let gcMs = 0;
let gcCount = 0;
let gcMaxMs = 0;
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) {
    gcMs += e.duration;
    gcCount++;
    gcMaxMs = Math.max(gcMaxMs, e.duration);
  }
}).observe({ entryTypes: ['gc'] });
// Server residence of each request (headers parsed → response finished), whatever server answers it.
const started = new WeakMap<object, number>();
let residence: number[] = [];
diagnostics.subscribe('http.server.request.start', (m) => started.set((m as { response: object }).response, performance.now()));
diagnostics.subscribe('http.server.response.finish', (m) => {
  const t0 = started.get((m as { response: object }).response);
  if (t0 !== undefined) residence.push(performance.now() - t0);
});
let lastCpu = process.cpuUsage();
let lastMark = performance.now();

function mark() {
  const cpu = process.cpuUsage(lastCpu);
  lastCpu = process.cpuUsage();
  const now = performance.now();
  const sorted = residence.sort((a, b) => a - b);
  const pct = (p: number) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] : NaN);
  const out = {
    type: 'mark',
    wallMs: now - lastMark,
    cpuUserMs: cpu.user / 1000,
    cpuSystemMs: cpu.system / 1000,
    requests: sorted.length,
    residenceP50Ms: pct(50),
    residenceP99Ms: pct(99),
    residenceMaxMs: sorted.length ? sorted[sorted.length - 1] : NaN,
    loopDelayP50Ms: loopDelay.percentile(50) / 1e6,
    loopDelayP99Ms: loopDelay.percentile(99) / 1e6,
    loopDelayMaxMs: loopDelay.max / 1e6,
    gcMs,
    gcCount,
    gcMaxMs,
  };
  lastMark = now;
  residence = [];
  loopDelay.reset();
  gcMs = 0;
  gcCount = 0;
  gcMaxMs = 0;
  return out;
}

async function main() {
  const [mode, modelPath, dataDir] = process.argv.slice(2);
  const server =
    mode === 'sdk' ? await startSdk() : mode === 'bare' ? await startBare() : await startOurs(modelPath, dataDir ?? path.join(process.cwd(), 'data'));
  process.on('message', (m: { type: string }) => {
    if (m.type === 'mark') process.send!(mark());
    else if (m.type === 'stop') {
      void server.close().finally(() => process.exit(0));
    }
  });
  process.send!({ type: 'ready', url: server.url, token: TOKEN });
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
