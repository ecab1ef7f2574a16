// `npm run bench`: every benchmark, measured side by side in one run; prints a table, writes bench/results.json.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { writeTestModel } from '../src/backends/llama/demoModel';
import { createAckBench, recoveryBench, tokenPipelineBench } from './runtimeBench';
import { fairShareBench } from './fairShare';
import { priorityBench } from './priority';
import { scaleBench } from './scaleBench';
import { batchingBench } from './batching';
import { startupBench } from './startup';
import { webhooksBench } from './webhooks';
import { embeddingsBench } from './embeddings';
import { batchesBench } from './batches';

type BenchFn = (opts: { modelPath: string }) => Promise<Record<string, unknown>>;

const DEVICE_SECTIONS = ['hardware_gpu', 'doors_16core'];

function optional(file: string, name: string): BenchFn | undefined {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    return require(file)[name] as BenchFn | undefined;
  } catch {
    return undefined;
  }
}

async function main() {
  const only = process.argv.slice(2);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tr-bench-'));
  const modelPath = path.join(dir, 'tiny.gguf');
  writeTestModel(modelPath, { seed: 1 });
  const suites: Array<[string, () => Promise<Record<string, unknown>>]> = [
    ['create_ack', () => createAckBench(modelPath)],
    ['token_pipeline', () => tokenPipelineBench(modelPath)],
    ['recovery', () => recoveryBench(modelPath)],
    ['scale', () => scaleBench({ modelPath })],
    ['fair_share', () => fairShareBench({ modelPath })],
    ['priority', () => priorityBench({ modelPath })],
    ['startup', () => startupBench()],
  ];
  const lmsp = optional('./lmsp', 'lmspBench');
  if (lmsp) suites.push(['lmsp', () => lmsp({ modelPath })]);
  const mcp = optional('./mcp', 'mcpBench');
  if (mcp) suites.push(['mcp', () => mcp({ modelPath })]);
  const remote = optional('./remote', 'remoteBench');
  if (remote) suites.push(['remote', () => remote({ modelPath })]);
  const structured = optional('./structured', 'structuredBench');
  if (structured) suites.push(['structured', () => structured({ modelPath })]);
  // Each real family's file (its own generated models) and llama-server on the same GGUF.
  const families = optional('./families', 'familiesBench');
  if (families) suites.push(['families', () => families({ modelPath })]);
  // Its own generated model of the size: the tiny one decodes too cheaply to show what batching saves.
  suites.push(['batching', () => batchingBench()]);
  const agents = optional('./agents', 'agentsBench');
  if (agents) suites.push(['agents', () => agents({ modelPath })]);
  const hostile = optional('./hostile', 'hostileBench');
  if (hostile) suites.push(['hostile', () => hostile({ modelPath })]);
  suites.push(['webhooks', () => webhooksBench()]);
  // Its own generated embedding model (pooling mean) and llama-server beside our serve.
  suites.push(['embeddings', () => embeddingsBench()]);
  // The Batch API through serve: a batch against the same requests sent directly, interactive latency beside it, a SIGKILL.
  suites.push(['batches', () => batchesBench()]);
  const speculative = optional('./speculative', 'speculativeBench');
  if (speculative) suites.push(['speculative', () => speculative({ modelPath })]);
  // Prebuilt binary vs this machine's native build (task-runtime build-engine), child processes, one run.
  const nativeBuild = optional('./nativeBuild', 'nativeBuildBench');
  if (nativeBuild) suites.push(['native_build', () => nativeBuild({ modelPath })]);
  // The GPU check's streams and doors (scripts/gpu-check.sh); here its CPU half, on a small model.
  const gpuStreams = optional('./gpuStreams', 'gpuStreamsCpuHalf');
  if (gpuStreams) suites.push(['gpu_streams', () => gpuStreams({ modelPath })]);
  const hardware = optional('./hardware', 'hardwareBench');
  if (hardware) suites.push(['hardware', () => hardware({ modelPath })]);

  const results: Record<string, unknown> = {
    machine: { cpus: os.cpus().length, node: process.version, date: new Date().toISOString() },
  };
  for (const [name, run] of suites) {
    if (only.length && !only.includes(name)) continue;
    process.stderr.write(`bench: ${name} …\n`);
    try {
      results[name] = await run();
    } catch (e) {
      results[name] = { error: (e as Error).message };
    }
    console.log(`\n## ${name}`);
    for (const [k, v] of Object.entries(results[name] as Record<string, unknown>)) {
      console.log(`  ${k.padEnd(40)} ${typeof v === 'object' ? JSON.stringify(v) : v}`);
    }
  }
  const out = path.join(__dirname, '../../bench/results.json');
  // A run of some sections (`npm run bench -- hardware`) replaces those sections and keeps the others' last figures.
  // Sections measured on the lent 16-core GPU machine (scripts/gpu-check.sh: `hardware_gpu`, docs/hardware.md; the lmsp
  // and remote sections run there on the CPU: `doors_16core`, docs/runtime.md) are kept by every run here.
  let previous: Record<string, unknown> = {};
  try {
    previous = JSON.parse(fs.readFileSync(out, 'utf8')) as Record<string, unknown>;
  } catch {
    previous = {};
  }
  if (!only.length) previous = Object.fromEntries(Object.entries(previous).filter(([k]) => DEVICE_SECTIONS.includes(k)));
  fs.writeFileSync(out, `${JSON.stringify({ ...previous, ...results }, null, 2)}\n`);
  console.log(`\nwritten ${path.relative(process.cwd(), out)}`);
  fs.rmSync(dir, { recursive: true, force: true });
  process.exit(0);
}

void main();
