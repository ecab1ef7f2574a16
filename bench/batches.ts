// The `batches` section (issue 41 item 2; docs/batches.md): what the Batch API costs and what it buys, through the
// product's `serve` process and the tiny model, side by side in one run.
//   - throughput: ITEMS short /v1/responses requests as one batch (upload, create, poll to the end) against the same requests
//     sent directly with CONCURRENT in flight (what a client script would do). The batch runs its lines at the lowest
//     priority with at most two per slot of the model unfinished, so it should lose little to the direct client (the
//     issue's goal: ≥ 0.9× the direct items/s) while holding no connection.
//   - interactive latency: one short response at a time, idle and while the batch runs (the batch keeps one
//     line beyond the slots, so an interactive request waits for at most one line to end).
//   - a SIGKILL: the same batch killed once half its lines are done and `serve` started again on its data directory;
//     the time it takes in all against an uninterrupted run (what the kill cost: the lines in flight run again, the
//     restart, the model's load).
// Run directly: node out/bench/batches.js   (or npm run bench -- batches)
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { writeTestModel } from '../src/backends/llama/demoModel';
import { startServe, type Serve } from '../test/fixtures/serveProcess';

const round = (n: number, d = 1) => Math.round(n * 10 ** d) / 10 ** d;
const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)];
const p90 = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length * 0.9)];

const body = (model: string, i: number, maxTokens: number) => ({
  model,
  input: `note ${i}: summarise the item`,
  temperature: 0,
  max_output_tokens: maxTokens,
});

function inputFile(model: string, items: number, maxTokens: number): Buffer {
  const lines = Array.from({ length: items }, (_, i) =>
    JSON.stringify({ custom_id: `r${i}`, method: 'POST', url: '/v1/responses', body: body(model, i, maxTokens) }),
  );
  return Buffer.from(lines.join('\n') + '\n');
}

async function call(s: Serve, method: string, p: string, json?: unknown): Promise<any> {
  const res = await fetch(`${s.lmsp}${p}`, {
    method,
    headers: { authorization: `Bearer ${s.token}`, ...(json !== undefined ? { 'content-type': 'application/json' } : {}) },
    body: json === undefined ? undefined : JSON.stringify(json),
  });
  const text = await res.text();
  if (res.status >= 400) throw new Error(`${method} ${p}: ${res.status} ${text.slice(0, 300)}`);
  return JSON.parse(text);
}

async function uploadAndCreate(s: Serve, bytes: Buffer): Promise<string> {
  const form = new FormData();
  form.set('purpose', 'batch');
  form.set('file', new Blob([bytes]), 'bench.jsonl');
  const res = await fetch(`${s.lmsp}/files`, { method: 'POST', headers: { authorization: `Bearer ${s.token}` }, body: form });
  const file = (await res.json()) as { id: string };
  const batch = await call(s, 'POST', '/batches', { input_file_id: file.id, endpoint: '/v1/responses', completion_window: '24h' });
  return batch.id as string;
}

async function poll(s: Serve, id: string, until: (b: any) => boolean): Promise<any> {
  for (;;) {
    const b = await call(s, 'GET', `/batches/${id}`);
    if (until(b)) return b;
    if (['failed', 'expired', 'cancelled'].includes(b.status)) throw new Error(`batch ${id} ${b.status}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** The same requests sent directly, `concurrent` in flight: the run's seconds and each request's. */
async function direct(s: Serve, model: string, items: number, maxTokens: number, concurrent: number): Promise<{ s: number; each: number[] }> {
  let next = 0;
  const each: number[] = [];
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: concurrent }, async () => {
      while (next < items) {
        const i = next++;
        const r0 = performance.now();
        await call(s, 'POST', '/responses', body(model, i, maxTokens));
        each.push((performance.now() - r0) / 1000);
      }
    }),
  );
  return { s: (performance.now() - t0) / 1000, each };
}

async function interactive(s: Serve, model: string, n: number, running?: () => boolean): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n && (running?.() ?? true); i++) {
    const t0 = performance.now();
    await call(s, 'POST', '/responses', body(model, 100_000 + i, 4));
    out.push(performance.now() - t0);
  }
  return out;
}

export async function batchesBench(opts: { items?: number; maxTokens?: number; concurrent?: number } = {}): Promise<Record<string, unknown>> {
  const items = opts.items ?? 1000;
  const maxTokens = opts.maxTokens ?? 16;
  const concurrent = opts.concurrent ?? 8;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tr-bench-batches-'));
  const modelPath = path.join(dir, 'tiny.gguf');
  writeTestModel(modelPath, { seed: 1 });
  const file = (name: string) => fs.mkdtempSync(path.join(dir, name));
  // Each side on a fresh serve and data directory: the direct requests leave `items` stored tasks behind, and a
  // store holding them makes every later task slower (measured 0.5-0.6x for the batch run after them on one server).
  const fresh = async () => {
    const server = await startServe(['--model', modelPath], file('data-'));
    const id = ((await call(server, 'GET', '/models')).data as Array<{ id: string }>)[0].id;
    await call(server, 'POST', '/responses', body(id, -1, 4)); // the model's load, outside every timing
    return { server, id };
  };
  const first = await fresh();
  let directS: number;
  let each: number[];
  try {
    ({ s: directS, each } = await direct(first.server, first.id, items, maxTokens, concurrent));
  } finally {
    await first.server.stop();
  }
  const second = await fresh();
  let s = second.server;
  try {
    const model = second.id;
    const idle = await interactive(s, model, 10);

    const bytes = inputFile(model, items, maxTokens);
    const t0 = performance.now();
    const id = await uploadAndCreate(s, bytes);
    let done = false;
    const during: Promise<number[]> = (async () => {
      // Start measuring once lines are running.
      await poll(s, id, (b) => b.request_counts.completed > 0 || b.status === 'completed');
      return interactive(s, model, 10, () => !done);
    })();
    const finished = await poll(s, id, (b) => b.status === 'completed');
    const batchS = (performance.now() - t0) / 1000;
    done = true;
    const busy = await during;
    if (finished.request_counts.completed !== items) throw new Error(`batch: ${JSON.stringify(finished.request_counts)}`);

    // The same batch again, killed once half its lines are done, then served again on the same data directory.
    const dataDir = s.dataDir;
    const k0 = performance.now();
    const killed = await uploadAndCreate(s, bytes);
    const atKill = await poll(s, killed, (b) => b.request_counts.completed >= items / 2);
    s.child.kill('SIGKILL');
    await new Promise((r) => s.child.once('exit', r));
    const r0 = performance.now();
    s = await startServe(['--model', modelPath], dataDir);
    const restartS = (performance.now() - r0) / 1000;
    const afterRestart = await call(s, 'GET', `/batches/${killed}`);
    const end = await poll(s, killed, (b) => b.status === 'completed');
    const killedS = (performance.now() - k0) / 1000;
    if (end.request_counts.completed !== items) throw new Error(`killed batch: ${JSON.stringify(end.request_counts)}`);

    return {
      items,
      max_tokens: maxTokens,
      direct_concurrent: concurrent,
      direct_items_per_s: round(items / directS),
      batch_items_per_s: round(items / batchS),
      batch_vs_direct: round(directS / batchS, 2),
      interactive_idle_ms_p50: round(median(idle)),
      interactive_during_batch_ms_p50: busy.length ? round(median(busy)) : null,
      interactive_during_batch_ms_p90: busy.length ? round(p90(busy)) : null,
      interactive_during_batch_samples: busy.length,
      sigkill_done_at_kill: atKill.request_counts.completed,
      sigkill_done_after_restart: afterRestart.request_counts.completed,
      sigkill_restart_s: round(restartS, 2),
      sigkill_total_s: round(killedS, 2),
      uninterrupted_s: round(batchS, 2),
      sigkill_cost_s: round(killedS - batchS, 2),
      // The goal: a kill costs at most one item's time per concurrent item (each in-flight line runs again).
      item_s_p50: round(median(each), 3),
    };
  } finally {
    await s.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

if (require.main === module) {
  void batchesBench().then((r) => {
    console.log(JSON.stringify(r, null, 2));
    process.exit(0);
  });
}
