// Completion webhooks (issue #40 item 3), on loopback with the real sender (protocols/webhooks/sender.ts) and a
// node:http receiver answering 200:
//   - added time: from a task's terminal event (told to a subscriber of its stream, the moment the ending is durable)
//     to its delivery's request arriving complete at the receiver; one task at a time, so nothing queues (goal: p50
//     ≤ 5 ms);
//   - sustained rate: deliveries owed by N finished tasks (their first tries never answered, the runtime closed and
//     opened again: all N due at once), sent at the worker's concurrency bound until the last one is answered;
//   - SIGKILLs: a real `serve` with --webhook is killed while tasks finish and deliveries are in flight, 20 times;
//     then every task that finished must have been delivered (same webhook-id for its retries): lost must be 0.
// The task backend is scripted (instant answers): what is measured is the runtime and the wire, not a model.
import * as fs from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import { principalOfToken } from '../src/cli/tokenFile';
import { HttpWebhookSender } from '../src/protocols/webhooks/sender';
import { TaskRuntime } from '../src/runtime/runtime';
import { newWebhookSecret, type WebhookEndpoints, type WebhookResponse, type WebhookSender } from '../src/runtime/webhooks';
import { ScriptedBackend, says } from '../test/fixtures/scriptedBackend';
import { lmspWaitTerminal, startServe } from '../test/fixtures/serveProcess';

const round = (n: number, d = 2) => Math.round(n * 10 ** d) / 10 ** d;
function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

const LATENCY_TASKS = 300;
const RATE_TASKS = 1000;
const KILLS = 20;

/** A receiver on 127.0.0.1: `onRequest(taskId or id, webhook-id)` for each complete request, answered 200. */
async function receiver(onRequest: (dataId: string, webhookId: string) => void): Promise<{ url: string; server: Server }> {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { data: { id: string } };
      onRequest(body.data.id, String(req.headers['webhook-id']));
      res.writeHead(200).end();
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, server };
}

const closeServer = (s: Server) =>
  new Promise<void>((r) => {
    s.closeAllConnections();
    s.close(() => r());
  });

function tempDir(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'tr-bench-hooks-'));
}

async function addedTime(): Promise<Record<string, unknown>> {
  const arrived = new Map<string, (t: number) => void>();
  const { url, server } = await receiver((taskId) => arrived.get(taskId)?.(performance.now()));
  const secret = newWebhookSecret();
  const sender = new HttpWebhookSender({ allowPrivate: true });
  const dir = tempDir();
  const rt = await TaskRuntime.open({
    dataDir: dir,
    backend: new ScriptedBackend(says('ok')),
    webhooks: { endpoints: () => ({ url, secret }), sender },
  });
  const added: number[] = [];
  for (let i = 0; i < LATENCY_TASKS; i++) {
    let terminalAt = 0;
    const delivered = new Promise<number>((resolve) => {
      const { task } = rt.createTask({ origin: 'lmsp', principal: 'alice', input: { model: 'm', input: `task ${i}` } });
      arrived.set(task.id, resolve);
      const sub = rt.subscribe(task.id, undefined, (e) => {
        if (e.type === 'response.completed') {
          terminalAt = performance.now();
          sub.close();
        }
      });
    });
    const at = await delivered;
    added.push(at - terminalAt);
  }
  await rt.close();
  sender.close();
  await closeServer(server);
  fs.rmSync(dir, { recursive: true, force: true });
  return {
    added_ms_p50: round(percentile(added, 50), 3),
    added_ms_p95: round(percentile(added, 95), 3),
    added_ms_p99: round(percentile(added, 99), 3),
    added_tasks: LATENCY_TASKS,
  };
}

async function sustainedRate(): Promise<Record<string, unknown>> {
  const dir = tempDir();
  const secret = newWebhookSecret();
  let url = '';
  const endpoints: WebhookEndpoints = () => ({ url, secret });
  const backend = new ScriptedBackend(says('ok'));
  // First open: every task finishes, no try is ever answered; the close leaves all N owed (attempts 0).
  const silent: WebhookSender = {
    send: (_r, signal) => new Promise<WebhookResponse>((r) => signal.addEventListener('abort', () => r({ error: 'aborted' }))),
  };
  let rt = await TaskRuntime.open({
    dataDir: dir,
    backend,
    limits: { maxQueuedTasksPerPrincipal: RATE_TASKS, maxQueuedTasks: RATE_TASKS },
    webhooks: { endpoints, sender: silent },
  });
  const ids: string[] = [];
  for (let i = 0; i < RATE_TASKS; i++) ids.push(rt.createTask({ origin: 'lmsp', principal: 'alice', input: { model: 'm', input: `t${i}` } }).task.id);
  await Promise.all(ids.map((id) => rt.waitForTerminal(id)));
  const owed = rt.pendingWebhooks;
  await rt.close();

  const seen = new Set<string>();
  let last = 0;
  let allIn: () => void = () => undefined;
  const done = new Promise<void>((r) => (allIn = r));
  const rec = await receiver((taskId) => {
    seen.add(taskId);
    if (seen.size === owed) {
      last = performance.now();
      allIn();
    }
  });
  url = rec.url;
  const sender = new HttpWebhookSender({ allowPrivate: true });
  const start = performance.now();
  rt = await TaskRuntime.open({ dataDir: dir, backend, webhooks: { endpoints, sender } });
  await done;
  const seconds = (last - start) / 1000;
  // The worker records each answer after the request arrived: wait for the last records before closing.
  while (rt.pendingWebhooks > 0) await new Promise((r) => setTimeout(r, 10));
  await rt.close();
  sender.close();
  await closeServer(rec.server);
  fs.rmSync(dir, { recursive: true, force: true });
  return { rate_deliveries: owed, rate_per_s: Math.round(owed / seconds), rate_seconds_incl_open: round(seconds, 2), rate_concurrency: 8 };
}

async function sigkills(): Promise<Record<string, unknown>> {
  const byTask = new Map<string, Set<string>>();
  const { url, server } = await receiver((taskId, webhookId) => {
    let ids = byTask.get(taskId);
    if (!ids) byTask.set(taskId, (ids = new Set()));
    ids.add(webhookId);
  });
  const dataDir = tempDir();
  // A bare token (startServe reads the file as one token): its principal is derived from it.
  const token = 'bench-token-0123456789abcdef';
  fs.writeFileSync(path.join(dataDir, 'token'), `${token}\n`, { mode: 0o600 });
  const principal = principalOfToken(token);
  const args = [
    '--webhook',
    `${principal}=${url}`,
    '--webhook-secret-file',
    `${principal}=${path.join(dataDir, 'whsec')}`,
    '--webhook-allow-private',
  ];
  const created: string[] = [];
  for (let k = 0; k < KILLS; k++) {
    const s = await startServe(args, dataDir);
    const model = ((await s.lmspCall('GET', '/models')).json as { data: Array<{ id: string }> }).data[0].id;
    // Ten tasks, then the kill at a moment that moves with k: right after the creates, or after some have finished.
    const batch: Promise<void>[] = [];
    for (let i = 0; i < 10; i++) {
      batch.push(
        s.lmspCall('POST', '/tasks', { type: 'response', input: { model, input: `k${k} t${i}`, max_output_tokens: 4 } }).then((r) => {
          if (r.status === 202) created.push(r.json.id as string);
          else throw new Error(`create answered ${r.status}: ${JSON.stringify(r.json).slice(0, 200)}`);
        }),
      );
    }
    await Promise.all(batch);
    if (k % 2 === 1) await lmspWaitTerminal(s, created[created.length - 1 - (k % 5)]);
    s.child.kill('SIGKILL');
    await new Promise((r) => s.child.once('exit', r));
  }
  // A last start: every task ends (recovery fails the interrupted ones), every ending is delivered.
  const s = await startServe(args, dataDir);
  for (const id of created) await lmspWaitTerminal(s, id);
  const deadline = Date.now() + 60_000;
  while (created.some((id) => !byTask.has(id)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  await s.stop();
  await closeServer(server);
  const lost = created.filter((id) => !byTask.has(id)).length;
  const twoIds = [...byTask.values()].filter((ids) => ids.size > 1).length;
  fs.rmSync(dataDir, { recursive: true, force: true });
  return { kills: KILLS, kill_tasks: created.length, kill_lost: lost, kill_tasks_with_two_webhook_ids: twoIds };
}

export async function webhooksBench(): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = {};
  for (const part of [addedTime, sustainedRate, sigkills]) {
    const start = performance.now();
    Object.assign(out, await part());
    process.stderr.write(`bench webhooks: ${part.name} ${round((performance.now() - start) / 1000, 1)} s\n`);
  }
  return out;
}
