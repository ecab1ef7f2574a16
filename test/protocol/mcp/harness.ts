// Test servers for the MCP door: an in-process listener (door options under test control, two principals) and
// a real `task-runtime serve` process (restart tests): the product's dist/cli.js, or with the conformance fixtures
// the test entry point out/test/fixtures/conformance/serve.js (the same serve). Plus a raw JSON-RPC-over-HTTP helper.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { createInterface } from 'node:readline';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError, type ClientCapabilities } from '@modelcontextprotocol/sdk/types.js';
import { CompositeBackend } from '../../../src/backends/composite';
import { LlamaBackend } from '../../../src/backends/llama/llamaBackend';
import { startListener, type Listener } from '../../../src/protocols/http/listener';
import { createDoorDeps } from '../../../src/protocols/lmsp/deps';
import { createOpenAiDoor } from '../../../src/protocols/openai/openaiDoor';
import { createLmspDoor } from '../../../src/protocols/lmsp/lmspDoor';
import { createMcpDoor, type McpDoorOptions } from '../../../src/protocols/mcp/mcpDoor';
import type { RuntimeLimits } from '../../../src/runtime/api';
import { TaskRuntime } from '../../../src/runtime/runtime';
import { writeTestModel } from '../../../src/backends/llama/demoModel';
import { ConformanceFixtureBackend } from '../../fixtures/conformance/backend';
import { conformanceTools } from '../../fixtures/conformance/tools';
import { parseSse, sseJson } from '../../fixtures/sse';
import { builtCli, requireBuilt } from '../../support/prerequisites';

export const ROOT = path.resolve(__dirname, '../../../..');

export const MODEL_ID = 'test-256';

let modelPath: string | undefined;
/**
 * A generated model a little wider than the default tiny one (~2 ms/token here), so a 1,500-token generation
 * lasts long enough to be cancelled or killed mid-way. With temperature 0 it runs to max_output_tokens.
 */
export function slowModelPath(): string {
  if (modelPath && fs.existsSync(modelPath)) return modelPath;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mcp-door-model-'));
  modelPath = path.join(dir, `${MODEL_ID}.gguf`);
  writeTestModel(modelPath, { seed: 1, embd: 256, layers: 4 });
  process.once('exit', () => fs.rmSync(dir, { recursive: true, force: true }));
  return modelPath;
}

export const TOKENS = { alice: 'tok-alice-0123456789abcdef', bob: 'tok-bob-0123456789abcdef' } as const;

export interface InProcessServer {
  url: string;
  mcpUrl: string;
  runtime: TaskRuntime;
  dataDir: string;
  close(): Promise<void>;
}

export async function startInProcess(
  opts: {
    door?: McpDoorOptions;
    limits?: Partial<RuntimeLimits>;
    suppressEos?: boolean;
    /** The backend's context size (default 'auto': the model's trained 2048). */
    contextSize?: number;
    allowedOrigins?: string[];
    /** The conformance fixture tools and their backend, as the conformance test entry point serves them. */
    fixtures?: boolean;
  } = {},
): Promise<InProcessServer> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'mcp-door-test-'));
  const llama = new LlamaBackend({
    models: [{ id: MODEL_ID, source: slowModelPath(), demo: true }],
    suppressEndOfGeneration: opts.suppressEos ?? true,
    ...(opts.contextSize !== undefined && { contextSize: opts.contextSize }),
  });
  const backend = opts.fixtures ? new CompositeBackend([llama, new ConformanceFixtureBackend()]) : llama;
  // As serve does: the model file's trained context is known before the first create.
  await backend.prepare?.();
  const runtime = await TaskRuntime.open({ dataDir, backend, limits: opts.limits });
  const mcp = createMcpDoor(runtime, { ...opts.door, ...(opts.fixtures && { extraTools: conformanceTools() }) });
  const deps = createDoorDeps(runtime);
  const lmsp = createLmspDoor(deps);
  const openai = createOpenAiDoor(deps);
  const listener: Listener = await startListener({
    port: 0,
    tokens: new Map([
      [TOKENS.alice, 'alice'],
      [TOKENS.bob, 'bob'],
    ]),
    allowedOrigins: opts.allowedOrigins,
    doors: [{ prefix: '/mcp', handler: mcp.handle, problemStyle: 'jsonrpc' }, ...lmsp.mounts, ...openai.mounts],
  });
  return {
    url: listener.url,
    mcpUrl: listener.url + '/mcp',
    runtime,
    dataDir,
    async close() {
      await mcp.close();
      await lmsp.close();
      await listener.close();
      await runtime.close();
      await backend.dispose();
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * A client's `capabilities.tasks` as VS Code 1.139 declares it at initialize (design/VSCODE.md): the door shows such a
 * client task-only tools as task-only. Without it (the default here, and Claude Code) they are shown `optional`.
 */
export const TASKS_CLIENT_CAPABILITIES: ClientCapabilities = {
  tasks: { list: {}, cancel: {}, requests: { elicitation: { create: {} } } },
};

export async function connect(mcpUrl: string, token: string, name = 'mcp-door-test', capabilities: ClientCapabilities = {}): Promise<Client> {
  return (await connectWatchingStream(mcpUrl, token, name, capabilities)).client;
}

/**
 * Connects, and tells when the client's standalone GET stream (where notifications arrive) has been answered: the
 * server registers the stream before it sends the response headers, so from then on notifications reach it.
 */
export async function connectWatchingStream(
  mcpUrl: string,
  token: string,
  name = 'mcp-door-test',
  capabilities: ClientCapabilities = {},
): Promise<{ client: Client; streamOpen: Promise<void> }> {
  let opened!: () => void;
  const streamOpen = new Promise<void>((resolve) => (opened = resolve));
  const client = new Client({ name, version: '1.0.0' }, { capabilities });
  const transport = new StreamableHTTPClientTransport(new URL(mcpUrl), {
    requestInit: { headers: { authorization: `Bearer ${token}` } },
    fetch: async (url, init) => {
      const res = await fetch(url, init);
      if (init?.method === 'GET' && res.ok) opened();
      return res;
    },
  });
  await client.connect(transport);
  return { client, streamOpen };
}

export interface ServerProcess {
  child: ChildProcess;
  url: string;
  mcpUrl: string;
  token: string;
  stderr: string[];
  stop(signal?: NodeJS.Signals): Promise<void>;
}

/** The same serve as the product's, with the conformance fixtures (test/fixtures/conformance/serve.ts). */
const FIXTURES_SERVE = 'out/test/fixtures/conformance/serve.js';

/**
 * Starts `node dist/cli.js serve` (with `fixtures`: the conformance test entry point) and waits for its JSON ready
 * line; an error that says how to build it when it is missing.
 */
export async function startProcess(dataDir: string, extraArgs: string[] = [], options: { fixtures?: boolean } = {}): Promise<ServerProcess> {
  const command = options.fixtures ? [requireBuilt(FIXTURES_SERVE)] : [builtCli(), 'serve'];
  const child = spawn(process.execPath, [...command, '--data-dir', dataDir, '--model', slowModelPath(), '--port', '0', ...extraArgs], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const stderr: string[] = [];
  child.stderr!.setEncoding('utf8').on('data', (d: string) => stderr.push(d));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const ready = await new Promise<{ url: string; mcp?: string; tokenFile: string }>((resolve, reject) => {
    const lines = createInterface({ input: child.stdout! });
    const timer = setTimeout(() => reject(new Error(`server not ready: ${stderr.join('')}`)), 60_000);
    lines.on('line', (line) => {
      try {
        const msg = JSON.parse(line) as { event?: string; url: string; mcp?: string; tokenFile: string };
        if (msg.event === 'listening') {
          clearTimeout(timer);
          resolve(msg);
        }
      } catch {
        /* not JSON */
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`server exited (${code}) before ready: ${stderr.join('')}`));
    });
  });
  const token = fs.readFileSync(ready.tokenFile, 'utf8').trim();
  return {
    child,
    url: ready.url,
    mcpUrl: ready.mcp ?? ready.url + '/mcp',
    token,
    stderr,
    async stop(signal: NodeJS.Signals = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      await exited;
    },
  };
}

/** A raw MCP session over fetch, for what the SDK client will not send. */
export class RawSession {
  sessionId = '';
  private nextId = 1;
  constructor(
    readonly mcpUrl: string,
    readonly token: string,
  ) {}

  headers(extra: Record<string, string> = {}): Record<string, string> {
    const h: Record<string, string> = {
      authorization: `Bearer ${this.token}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2025-11-25',
      ...extra,
    };
    if (this.sessionId) h['mcp-session-id'] = this.sessionId;
    return h;
  }

  async initialize(): Promise<void> {
    const r = await this.post({
      jsonrpc: '2.0',
      id: this.nextId++,
      method: 'initialize',
      params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
    });
    if (r.status !== 200) throw new Error(`initialize failed: ${r.status} ${JSON.stringify(r.messages)}`);
    await this.post({ jsonrpc: '2.0', method: 'notifications/initialized' });
  }

  /** Sends a body (object or raw string); returns status and the JSON-RPC messages (JSON or SSE). */
  async post(body: unknown, extraHeaders: Record<string, string> = {}): Promise<{ status: number; messages: any[] }> {
    const res = await fetch(this.mcpUrl, {
      method: 'POST',
      headers: this.headers(extraHeaders),
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });
    const sid = res.headers.get('mcp-session-id');
    if (sid) this.sessionId = sid;
    const text = await res.text();
    const type = res.headers.get('content-type') ?? '';
    let messages: any[] = [];
    if (type.includes('text/event-stream')) {
      messages = sseJson(parseSse(text).filter((e) => e.data !== ''));
    } else if (text) {
      const parsed = JSON.parse(text);
      messages = Array.isArray(parsed) ? parsed : [parsed];
    }
    return { status: res.status, messages };
  }

  async call(method: string, params?: unknown): Promise<any> {
    const id = this.nextId++;
    const r = await this.post({ jsonrpc: '2.0', id, method, ...(params === undefined ? {} : { params }) });
    return r.messages.find((m) => m.id === id) ?? { status: r.status, messages: r.messages };
  }
}

/** The McpError a request fails with (fails the test when it succeeds or fails otherwise). */
export async function rpcError(p: Promise<unknown>): Promise<McpError> {
  try {
    await p;
  } catch (e) {
    assert.ok(e instanceof McpError, `expected McpError, got ${String(e)}`);
    return e;
  }
  assert.fail('expected the request to fail');
}
