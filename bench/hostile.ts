// One principal's power over another's latency and memory (hardening issue, rows 1 and 2), measured side by side in
// one run on the tiny model behind the real endpoint:
//   - bob's request latency (GET /models and a task poll, sequential) idle, then while mallory sends, in a loop,
//     prompts far too large for the context (3.8 MB) and `/responses` creates whose schema has a 100 000-value enum.
//     Goal: bob's p99 under attack ≤ 2× his idle p99.
//   - the server's RSS growth while 48 readers (two principals) replay a finished task's 12 MiB event history and
//     read nothing. Goal: ≤ +64 MB.
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { Worker } from 'node:worker_threads';
import { LlamaBackend } from '../src/backends/llama/llamaBackend';
import { startEndpoint } from '../src/protocols/endpoint';
import { TaskRuntime } from '../src/runtime/runtime';
import { ScriptedBackend, type Script } from '../test/fixtures/scriptedBackend';

const round = (x: number, d = 1) => Math.round(x * 10 ** d) / 10 ** d;
const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((xs.length * p) / 100))]!;

export async function hostileBench(opts: { modelPath: string }): Promise<Record<string, unknown>> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tr-bench-hostile-'));
  const backend = new LlamaBackend({ models: [{ id: 'tiny', source: opts.modelPath }], suppressEndOfGeneration: true, threads: 1 });
  const runtime = await TaskRuntime.open({ dataDir: dir, backend, deltaFlushMs: 0 });
  const tokens = new Map([
    ['tok-bob', 'bob'],
    ['tok-mallory', 'mallory'],
    ['tok-eve', 'eve'],
  ]);
  const endpoint = await startEndpoint(runtime, { port: 0, tokens, lmsp: {} });
  const auth = (t: string) => ({ authorization: `Bearer ${t}`, 'content-type': 'application/json' });
  try {
    // Loaded, and one small task of bob's to poll.
    const first = runtime.createTask({ origin: 'lmsp', principal: 'bob', input: { model: 'tiny', input: 'hi', max_output_tokens: 4 } }).task;
    await runtime.waitForTerminal(first.id);
    const bobOnce = async () => {
      const t0 = performance.now();
      const a = await fetch(`${endpoint.lmspUrl}/models`, { headers: auth('tok-bob') });
      await a.text();
      const b = await fetch(`${endpoint.lmspUrl}/tasks/${first.id}`, { headers: auth('tok-bob') });
      await b.text();
      return performance.now() - t0;
    };
    const measure = async (n: number) => {
      const xs: number[] = [];
      for (let i = 0; i < n; i++) xs.push(await bobOnce());
      return { p50: round(pct(xs, 50), 2), p99: round(pct(xs, 99), 2) };
    };
    await measure(30);
    const idle = await measure(300);

    // The largest shapes the door lets through: four messages of 950 000 characters (its cap is 1 000 000 a text),
    // and a schema near its 256 KiB text cap (1 200 enum values of ~200 characters).
    const oversized = JSON.stringify({
      model: 'tiny',
      input: Array.from({ length: 4 }, () => ({ role: 'user', content: 'ab '.repeat(316_000) })),
      max_output_tokens: 4,
    });
    const enumSchema = {
      type: 'object',
      properties: { a: { type: 'string', enum: Array.from({ length: 1_200 }, (_, i) => `value_number_${i}_${'v'.repeat(190)}`) } },
      required: ['a'],
      additionalProperties: false,
    };
    // Mallory runs in a worker thread: her client's own work (building and sending 4 MB bodies) must not count as
    // the server's, which it would on one event loop.
    const attacker = new Worker(
      `const { parentPort, workerData } = require('node:worker_threads');
         let running = true, attacks = 0, refused = 0;
         parentPort.on('message', () => (running = false));
         (async () => {
           for (let i = 0; running; i++) {
             const body = i % 2 === 0 ? workerData.oversized : workerData.enumBody.replace('"name":"s"', '"name":"s' + i + '"');
             try {
               const res = await fetch(workerData.url, { method: 'POST', headers: workerData.headers, body });
               await res.text();
               attacks++;
               if (res.status >= 400) refused++;
             } catch { attacks++; refused++; }
           }
           parentPort.postMessage({ attacks, refused });
         })();`,
      {
        eval: true,
        workerData: {
          url: `${endpoint.url}/v1/responses`,
          headers: auth('tok-mallory'),
          oversized,
          enumBody: JSON.stringify({
            model: 'tiny',
            input: 'x',
            max_output_tokens: 4,
            background: true,
            text: { format: { type: 'json_schema', name: 's', strict: true, schema: enumSchema } },
          }),
        },
      },
    );
    const attacked = await measure(300);
    const { attacks, refused } = await new Promise<{ attacks: number; refused: number }>((resolve) => {
      attacker.once('message', resolve);
      attacker.postMessage('stop');
    });
    await attacker.terminate();

    // Memory: 48 readers that read nothing, replaying finished tasks' 12.5 MiB event histories (a model that writes
    // 200 pieces of 64 KiB, on a runtime and endpoint of their own).
    const piece = 'x'.repeat(64 * 1024);
    const writesALot: Script = async (_req, o) => {
      for (let i = 0; i < 200; i++) o.onText(piece, 1);
      return { finishReason: 'stop', inputTokens: 1, outputTokens: 200 };
    };
    const bigDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tr-bench-hostile-big-'));
    const big = await TaskRuntime.open({
      dataDir: bigDir,
      backend: new ScriptedBackend(writesALot),
      deltaFlushMs: 0,
      limits: { maxStoredBytesPerPrincipal: 1024 * 1024 * 1024 },
    });
    const bigEndpoint = await startEndpoint(big, { port: 0, tokens, lmsp: {} });
    try {
      const histories: Record<string, string> = {};
      for (const principal of ['bob', 'eve']) {
        const t = big.createTask({ origin: 'lmsp', principal, input: { model: 'm', input: 'go' } }).task;
        await big.waitForTerminal(t.id);
        histories[principal] = t.id;
      }
      const events = (p: string) => new URL(`${bigEndpoint.lmspUrl}/tasks/${histories[p]}/events`);
      const whole = await fetch(events('bob'), { headers: auth('tok-bob') });
      const historyBytes = (await whole.text()).length;
      (global as { gc?: () => void }).gc?.();
      const rssBefore = process.memoryUsage().rss;
      const readers: net.Socket[] = [];
      const heads: string[] = [];
      for (let i = 0; i < 48; i++) {
        const principal = i % 2 === 0 ? 'bob' : 'eve';
        const url = events(principal);
        const s = net.connect(Number(url.port), url.hostname);
        s.on('error', () => {});
        readers.push(s);
        heads.push(
          await new Promise<string>((resolve) => {
            s.once('connect', () => s.write(`GET ${url.pathname} HTTP/1.1\r\nHost: ${url.host}\r\nAuthorization: Bearer tok-${principal}\r\n\r\n`));
            s.once('data', (d: Buffer) => {
              s.pause();
              resolve(String(d).slice(0, 12));
            });
          }),
        );
      }
      // The replays run until the readers' sockets are full; then nothing moves.
      await new Promise((r) => setTimeout(r, 3000));
      const rssStalled = process.memoryUsage().rss;
      for (const s of readers) s.destroy();
      return {
        bob_idle_ms: idle,
        bob_under_attack_ms: attacked,
        p99_ratio: round(attacked.p99 / idle.p99, 2),
        p99_goal: '≤ 2×',
        mallory_requests: attacks,
        mallory_refused: refused,
        replay_history_bytes: historyBytes,
        stalled_readers: readers.length,
        stalled_readers_accepted: heads.filter((h) => h.startsWith('HTTP/1.1 200')).length,
        rss_growth_mb: round((rssStalled - rssBefore) / 1024 / 1024),
        rss_goal: '≤ +64 MB',
      };
    } finally {
      await bigEndpoint.close();
      await big.close();
      fs.rmSync(bigDir, { recursive: true, force: true });
    }
  } finally {
    await endpoint.close();
    await runtime.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
