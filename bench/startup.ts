// Start-up of the editor's runtime (issue #21 item 4: no event-loop block over 20 ms while the runtime opens the
// store and starts listening). Each run is a fresh process (startupChild.ts) doing what the owning window does after
// activate(), under the extension's own probe; measured on an empty store (a first start, demo model already
// generated) and on a used one (2 000 finished tasks, 20 000 events). In the editor the same probe also counts
// whatever else the extension host runs meanwhile (other extensions, the test runner), so the editor test reports
// its figure and this bench holds the goal.
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ensureDemoModel } from '../src/backends/llama/demoModel';
import type { StartupFigures } from '../src/extension/startupProbe';
import { seedScaleStore } from './seedScaleStore';

const RUNS = 7;
const GOAL_BLOCK_MS = 20;
const round = (n: number) => Number(n.toFixed(1));
const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)]!;

function startOnce(dataDir: string): Promise<StartupFigures> {
  const child = spawn(process.execPath, [path.join(__dirname, 'startupChild.js'), dataDir], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  return new Promise((resolve, reject) => {
    child.once('exit', (code) => {
      if (code !== 0) reject(new Error(`startupChild exited with ${code}`));
      else resolve(JSON.parse(out.trim().split('\n').pop() ?? '{}') as StartupFigures);
    });
  });
}

export async function startupBench(): Promise<Record<string, unknown>> {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'tr-startup-'));
  try {
    const t0 = performance.now();
    const demo = ensureDemoModel(path.join(root, 'demo'));
    const demoMs = performance.now() - t0;
    const used = path.join(root, 'used');
    await seedScaleStore(path.join(used, 'store'), 2_000, 10);
    fs.mkdirSync(path.join(used, 'models'));
    fs.copyFileSync(demo, path.join(used, 'models', path.basename(demo)));
    const out: Record<string, unknown> = { runs_each: RUNS, goal_longest_block_ms: GOAL_BLOCK_MS, demo_model_generation_ms: round(demoMs) };
    const empty: StartupFigures[] = [];
    const usedRuns: StartupFigures[] = [];
    // Alternating, so that the machine's noise falls on both alike.
    for (let i = 0; i < RUNS; i++) {
      const fresh = path.join(root, `empty-${i}`);
      fs.mkdirSync(path.join(fresh, 'models'), { recursive: true });
      fs.copyFileSync(demo, path.join(fresh, 'models', path.basename(demo)));
      empty.push(await startOnce(fresh));
      usedRuns.push(await startOnce(used));
    }
    for (const [name, runs] of [
      ['empty_store', empty],
      ['used_store', usedRuns],
    ] as const) {
      const blocks = runs.map((r) => r.longestBlockMs);
      out[`${name}_startup_ms_median`] = round(median(runs.map((r) => r.startupMs)));
      out[`${name}_longest_block_ms_median`] = round(median(blocks));
      out[`${name}_longest_block_ms_max`] = round(Math.max(...blocks));
      out[`${name}_goal_met_median`] = median(blocks) <= GOAL_BLOCK_MS;
    }
    out['load_avg_1m'] = round(os.loadavg()[0]!);
    return out;
  } finally {
    fs.rmSync(root, { recursive: true, force: true });
  }
}
