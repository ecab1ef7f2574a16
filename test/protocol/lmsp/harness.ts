// Runs the real `task-runtime serve` process for protocol tests and talks to it over real HTTP.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import { request as httpRequest } from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import { createInterface } from 'node:readline';
import assert from 'node:assert/strict';
import { after, before } from 'node:test';
import { EventSource } from 'eventsource';
import OpenAI from 'openai';
import { writeTestModel, type TestModelOptions } from '../../../src/backends/llama/demoModel';
import { TOOLS_CHAT_TEMPLATE } from '../../fixtures/chatTemplates';
import { TERMINAL_EVENT_TYPES } from '../../../src/protocols/lmsp/lmspConstants';
import { testModelPath } from '../../fixtures/testModel';
import { builtCli } from '../../support/prerequisites';
import { until } from '../../support/wait';

/** The bundled CLI (test/support/prerequisites.ts: an error that says how to build it when it is missing). */
export const cliPath = builtCli;

export interface ServerOptions {
  dataDir?: string;
  limits?: Record<string, unknown>;
  env?: Record<string, string>;
  args?: string[];
}

export interface Server {
  proc: ChildProcess;
  url: string;
  lmsp: string;
  port: number;
  dataDir: string;
  tokenFile: string;
  /** Tokens of two principals, alice and bob. */
  tokenA: string;
  tokenB: string;
  model: string;
  stderr(): string;
  /** SIGTERM and wait; resolves with the exit code. */
  stop(): Promise<number | null>;
  /** SIGKILL and wait. */
  kill(): Promise<void>;
}

export function tempDataDir(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'lmsp-test-'));
}

export async function startServer(opts: ServerOptions = {}): Promise<Server> {
  const dataDir = opts.dataDir ?? tempDataDir();
  const tokenFile = path.join(dataDir, 'tokens');
  if (!fs.existsSync(tokenFile)) {
    const a = randomBytes(24).toString('base64url');
    const b = randomBytes(24).toString('base64url');
    fs.writeFileSync(tokenFile, `alice ${a}\nbob ${b}\n`, { mode: 0o600 });
  }
  const [, tokenA] = fs.readFileSync(tokenFile, 'utf8').split('\n')[0].split(' ');
  const [, tokenB] = fs.readFileSync(tokenFile, 'utf8').split('\n')[1].split(' ');
  const args = [cliPath(), 'serve', '--data-dir', dataDir, '--token-file', tokenFile, '--model', testModelPath(), ...(opts.args ?? [])];
  const env: Record<string, string | undefined> = { ...process.env, ...opts.env };
  if (opts.limits) env.TASK_RUNTIME_LIMITS = JSON.stringify(opts.limits);
  const proc = spawn(process.execPath, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  proc.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
  const ready = await new Promise<{ url: string; lmsp: string }>((resolve, reject) => {
    const lines = createInterface({ input: proc.stdout! });
    lines.once('line', (line) => {
      try {
        resolve(JSON.parse(line));
      } catch {
        reject(new Error(`not a ready line: ${line}`));
      }
    });
    void exited.then((code) => reject(new Error(`server exited with ${code} before ready:\n${stderr}`)));
  });
  const port = Number(new URL(ready.url).port);
  const server: Server = {
    proc,
    url: ready.url,
    lmsp: ready.lmsp,
    port,
    dataDir,
    tokenFile,
    tokenA,
    tokenB,
    model: '',
    stderr: () => stderr,
    async stop() {
      if (proc.exitCode !== null) return proc.exitCode;
      proc.kill('SIGTERM');
      return exited;
    },
    async kill() {
      if (proc.exitCode !== null || proc.signalCode !== null) return;
      proc.kill('SIGKILL');
      await exited;
    },
  };
  const models = await call(server, 'GET', '/models');
  server.model = (models.json as { data: Array<{ id: string }> }).data[0].id;
  return server;
}

export interface CallResult {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  json: any;
}

export interface CallOptions {
  /** Token to send; null sends no Authorization header. Defaults to alice's. */
  token?: string | null;
  body?: unknown;
  /** Sent as-is instead of JSON.stringify(body). */
  rawBody?: string | Buffer;
  headers?: Record<string, string>;
}

/** One HTTP request with node:http (so Host and Origin can be set freely). `p` is relative to /lmsp/v1. */
export function call(server: Pick<Server, 'port' | 'tokenA'>, method: string, p: string, opts: CallOptions = {}): Promise<CallResult> {
  const headers: Record<string, string> = { host: `127.0.0.1:${server.port}` };
  const token = opts.token === undefined ? server.tokenA : opts.token;
  if (token !== null) headers.authorization = `Bearer ${token}`;
  let body: string | Buffer | undefined = opts.rawBody;
  if (body === undefined && opts.body !== undefined) {
    body = JSON.stringify(opts.body);
    headers['content-type'] = 'application/json';
  }
  Object.assign(headers, opts.headers);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: '127.0.0.1',
        port: server.port,
        method,
        path: p.startsWith('/lmsp') || p.startsWith('/mcp') || p.startsWith('/metrics') || p === '/' ? p : `/lmsp/v1${p}`,
        headers,
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let json: unknown;
          try {
            json = text ? JSON.parse(text) : undefined;
          } catch {
            json = undefined;
          }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    if (body !== undefined) req.end(body);
    else req.end();
  });
}

export interface SseEvent {
  id: number;
  type: string;
  data: Record<string, any>;
}

/** Every event type a task stream may carry (EventSource dispatches by name). */
export const EVENT_TYPES = [
  'response.created',
  'response.queued',
  'response.in_progress',
  'response.output_item.added',
  'response.content_part.added',
  'response.output_text.delta',
  'response.output_text.done',
  'response.content_part.done',
  'response.output_item.done',
  'response.function_call_arguments.delta',
  'response.function_call_arguments.done',
  'response.reasoning_text.delta',
  'response.reasoning_text.done',
  'response.completed',
  'response.incomplete',
  'response.failed',
  'response.cancelled',
  'error',
  'task_runtime:task.status',
  'task_runtime:model.loading',
];
/** The door's own set: a reader stops where the server closes the stream. */
export const TERMINAL_TYPES = TERMINAL_EVENT_TYPES;

export interface FollowOptions {
  token?: string;
  lastEventId?: number;
  /** Stop (and close) once this returns true for a received event. */
  until?: (event: SseEvent, all: SseEvent[]) => boolean;
}

export interface FollowResult {
  events: SseEvent[];
  /** HTTP status when the connection failed (e.g. 204, 404, 410). */
  failedStatus?: number;
}

/**
 * Follows a task's /events with the `eventsource` package until the terminal event (or `until`); the stream
 * is closed by us at that point so the client does not reconnect.
 */
export function followEvents(server: Server, taskId: string, opts: FollowOptions = {}): Promise<FollowResult> {
  const token = opts.token ?? server.tokenA;
  let failedStatus: number | undefined;
  const es = new EventSource(`${server.lmsp}/tasks/${taskId}/events`, {
    fetch: async (input, init) => {
      const headers: Record<string, string> = { ...(init?.headers as Record<string, string>), authorization: `Bearer ${token}` };
      if (opts.lastEventId !== undefined && !headers['Last-Event-ID']) headers['Last-Event-ID'] = String(opts.lastEventId);
      const res = await fetch(input, { ...init, headers });
      if (res.status !== 200) failedStatus = res.status;
      return res;
    },
  });
  const events: SseEvent[] = [];
  return new Promise((resolve, reject) => {
    const finish = () => {
      es.close();
      resolve({ events, failedStatus });
    };
    for (const type of EVENT_TYPES) {
      es.addEventListener(type, (e: MessageEvent) => {
        if (typeof e.data !== 'string') return; // a connection error, not the `error` event of the stream
        const ev: SseEvent = { id: Number(e.lastEventId), type: e.type, data: JSON.parse(e.data) };
        events.push(ev);
        if (opts.until?.(ev, events) || TERMINAL_TYPES.has(ev.type)) finish();
      });
    }
    es.addEventListener('error', () => {
      if (es.readyState === EventSource.CLOSED) finish();
      else if (events.length === 0 && failedStatus === undefined) {
        // Transient error before anything arrived: let it reconnect, but not forever.
      }
    });
    setTimeout(() => {
      es.close();
      reject(new Error(`followEvents timed out after ${events.length} events`));
    }, 120_000).unref();
  });
}

export async function createTask(
  server: Server,
  input: Record<string, unknown> = {},
  extra: Record<string, unknown> = {},
  token?: string,
): Promise<any> {
  const r = await call(server, 'POST', '/tasks', {
    token,
    body: { type: 'response', input: { model: server.model, input: 'hello', max_output_tokens: 8, ...input }, ...extra },
  });
  if (r.status !== 202) throw new Error(`create failed: ${r.status} ${r.text}`);
  return r.json;
}

/**
 * A generation that runs until the context is full (greedy decoding on the tiny model rarely samples EOS): no
 * max_output_tokens (null: unset, over createTask's default), so the budget is the context; a larger explicit one
 * would be refused (context_length_exceeded).
 */
export const LONG_INPUT = { input: 'write a long report', max_output_tokens: null, temperature: 0 };

/** Creates a long task and returns once its first text delta has been streamed (so it is `running`). */
export async function startRunningTask(server: Server, extra: Record<string, unknown> = {}): Promise<{ task: any; seen: SseEvent[] }> {
  const task = await createTask(server, LONG_INPUT, extra);
  const { events } = await followEvents(server, task.id, { until: (e) => e.type === 'response.output_text.delta' });
  return { task, seen: events };
}

/** Polls GET /tasks/{id} (another process: no event to wait on) until the task has one of `statuses`. */
export async function waitForStatus(server: Server, id: string, statuses: string[], token?: string): Promise<any> {
  return until(
    async () => {
      const r = await call(server, 'GET', `/tasks/${id}`, { token });
      return r.status === 200 && statuses.includes(r.json.status) && r.json;
    },
    `task ${id} to reach ${statuses.join('/')}`,
    { intervalMs: 50 },
  );
}

export function assertContiguous(events: SseEvent[], from = 0): void {
  events.forEach((e, i) => {
    if (e.id !== from + i) throw new Error(`event ${i} has id ${e.id}, expected ${from + i}`);
    if (e.data.sequence_number !== e.id) throw new Error(`sequence_number ${e.data.sequence_number} != id ${e.id}`);
    if (e.data.type !== e.type) throw new Error(`data.type ${e.data.type} != event ${e.type}`);
  });
}

export function removeDir(dir: string): void {
  fs.rmSync(dir, { recursive: true, force: true });
}

/**
 * For a describe block: a fresh server before its tests and the unmodified `openai` client on its LMSP URL (token of
 * principal A, no retries); stopped (exit 0) and removed after them. Read `.server` and `.client` inside tests.
 */
export function openAiServer(args: string[] = []): { readonly server: Server; readonly client: OpenAI } {
  const ctx: { server?: Server; client?: OpenAI } = {};
  before(async () => {
    ctx.server = await startServer({ args });
    ctx.client = new OpenAI({ apiKey: ctx.server.tokenA, baseURL: ctx.server.lmsp, maxRetries: 0 });
  });
  after(async () => {
    if (!ctx.server) return;
    assert.equal(await ctx.server.stop(), 0);
    removeDir(ctx.server.dataDir);
  });
  return {
    get server() {
      return ctx.server!;
    },
    get client() {
      return ctx.client!;
    },
  };
}

/**
 * A server with the demo model and a second one with the tool chat template (`tools`), and a client on it. `model`:
 * more options of the second (a longer context for a request with many tools).
 */
export function toolsServer(model: Omit<TestModelOptions, 'chatTemplate'> = {}): {
  readonly server: Server;
  readonly client: OpenAI;
  readonly model: string;
} {
  const ctx: { server?: Server; client?: OpenAI; model?: string } = {};
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'task-runtime-tools-e2e-'));
  before(async () => {
    const toolsModel = path.join(dir, 'tools.gguf');
    writeTestModel(toolsModel, { seed: 1, ...model, chatTemplate: TOOLS_CHAT_TEMPLATE });
    ctx.server = await startServer({ args: ['--model', toolsModel] });
    ctx.client = new OpenAI({ apiKey: ctx.server.tokenA, baseURL: ctx.server.lmsp, maxRetries: 0 });
    const models = await ctx.client.models.list();
    ctx.model = models.data.map((m) => m.id).find((id) => id !== ctx.server!.model);
    assert.ok(ctx.model, JSON.stringify(models.data));
  });
  after(async () => {
    if (ctx.server) {
      assert.equal(await ctx.server.stop(), 0);
      removeDir(ctx.server.dataDir);
    }
    fs.rmSync(dir, { recursive: true, force: true });
  });
  return {
    get server() {
      return ctx.server!;
    },
    get client() {
      return ctx.client!;
    },
    get model() {
      return ctx.model!;
    },
  };
}
