// Child of the scale benchmark: opens the runtime on a store in a fresh process and prints open time and RSS.
import * as path from 'node:path';
import { LlamaBackend } from '../src/backends/llama/llamaBackend';
import { TaskRuntime } from '../src/runtime/runtime';

async function main() {
  const storeDir = process.argv[2];
  const backend = new LlamaBackend({ models: [] });
  const t0 = performance.now();
  const cpu0 = process.cpuUsage();
  const runtime = await TaskRuntime.open({ dataDir: path.dirname(storeDir), backend });
  const openMs = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  // CPU time spent opening (all threads): on a loaded machine the wall time also counts waiting for a core.
  const openCpuMs = (cpu.user + cpu.system) / 1000;
  await new Promise((r) => setTimeout(r, 500));
  const rssMb = process.memoryUsage().rss / 1048576;
  process.stdout.write(`${JSON.stringify({ openMs, openCpuMs, rssMb, tasks: runtime.countTasks().total })}\n`);
  await runtime.close();
  await backend.dispose();
  process.exit(0);
}

void main();
