// Child of the scale benchmark (scaleBench.ts): the first write and checkpoint right after an open, in a process of
// its own, as a window start opens the store: `node out/bench/firstCheckpointChild.js STORE TAG` prints one JSON
// sample. In the benchmark's own process the rounds ran after it had seeded 100 k tasks, and that heap's major
// collection (30 ms) fell into the window: a cost of the benchmark, not of a window start.
import * as fs from 'node:fs';
import { PerformanceObserver, type PerformanceEntry } from 'node:perf_hooks';
import { DurableDatabase } from '../src/runtime/store/database';
import { TaskStore } from '../src/runtime/taskStore';
import { benchTask } from './runtimeBench';

/** CPU time of this process's main thread so far, in ms (Linux; NaN elsewhere). */
function mainThreadCpuMs(): number {
  try {
    return Number(fs.readFileSync(`/proc/self/task/${process.pid}/schedstat`, 'utf8').split(' ')[0]) / 1e6;
  } catch {
    return NaN;
  }
}

/**
 * CPU time the hypervisor gave to others while this machine's CPUs wanted to run, all CPUs, in ms so far (Linux
 * /proc/stat `steal`, 10 ms ticks; NaN elsewhere). In a VM a thread's schedstat time includes it: "on a CPU" there
 * may be a vCPU that was not running.
 */
function stealMs(): number {
  try {
    const fields = fs.readFileSync('/proc/stat', 'utf8').split('\n', 1)[0].trim().split(/\s+/);
    return Number(fields[8]) * 10;
  } catch {
    return NaN;
  }
}

export interface FirstCheckpointSample {
  /** The longest event-loop block from the open's return to after the next generation's first write. */
  maxBlockMs: number;
  /** Of the longest block, the time the main thread was on a CPU (the rest: waiting for a core). */
  maxBlockOnCpuMs: number;
  /** Steal time (all CPUs) during the longest block: the hypervisor ran something else (stealMs). */
  maxBlockStealMs: number;
  /** The longest time the main thread was on a CPU within any one block. */
  maxOnCpuMs: number;
  firstWriteMs: number;
  writeAfterRotateMs: number;
  checkpointMs: number;
  hostMs: number;
  /** The longest garbage-collection pause of the main thread within the window (perf_hooks 'gc' entries). */
  longestGcMs: number;
  /** The longest one while the open ran (the 250 MB image read is external memory: V8 answers with a full GC). */
  openLongestGcMs: number;
}

/**
 * Opens the store and at once writes one task, checkpoints and writes again, as the editor does in the first minute
 * after a window starts; the longest block is read by a 1 ms timer chain (a block that begins at once is seen too,
 * which monitorEventLoopDelay misses before its first tick). A referenced handle stands for the host's own (see the
 * header).
 */
export async function firstCheckpointRound(storeDir: string, tag: string): Promise<FirstCheckpointSample> {
  const hostHandle = setInterval(() => {}, 2 ** 30);
  const gcs: PerformanceEntry[] = [];
  const gcObserver = new PerformanceObserver((list) => gcs.push(...list.getEntries()));
  gcObserver.observe({ entryTypes: ['gc'] });
  const openedFrom = performance.now();
  const db = await DurableDatabase.open(storeDir, { inlineCheckpointBytes: 0, checkpointBytes: 2 ** 40, checkpointIntervalMs: 2 ** 30 });
  const store = new TaskStore(db);
  let longest = 0;
  let longestOnCpu = 0;
  let maxOnCpu = 0;
  let last = performance.now();
  const windowFrom = last;
  let lastCpu = mainThreadCpuMs();
  let longestSteal = 0;
  let lastSteal = stealMs();
  let timer: NodeJS.Timeout | undefined;
  const observe = () => {
    const now = performance.now();
    const cpu = mainThreadCpuMs();
    const steal = stealMs();
    const block = now - last - 1;
    if (block > longest) {
      longest = block;
      longestOnCpu = cpu - lastCpu;
      longestSteal = steal - lastSteal;
    }
    if (block > 1) maxOnCpu = Math.max(maxOnCpu, cpu - lastCpu);
    last = now;
    lastCpu = cpu;
    lastSteal = steal;
  };
  const tick = () => {
    observe();
    timer = setTimeout(tick, 1);
  };
  timer = setTimeout(tick, 1);
  try {
    const w0 = performance.now();
    db.write(store.insertTaskOps(benchTask(`task_first_${tag}`, 'queued'), 3_000_000));
    const firstWriteMs = performance.now() - w0;
    const c0 = performance.now();
    await db.checkpoint();
    const checkpointMs = performance.now() - c0;
    const a0 = performance.now();
    db.write(store.insertTaskOps(benchTask(`task_after_${tag}`, 'queued'), 3_000_001));
    const writeAfterRotateMs = performance.now() - a0;
    await new Promise((r) => setTimeout(r, 200));
    observe();
    gcs.push(...gcObserver.takeRecords());
    const longestGc = (from: number, to: number) => Math.max(0, ...gcs.filter((e) => e.startTime >= from && e.startTime < to).map((e) => e.duration));
    return {
      longestGcMs: longestGc(windowFrom, Number.POSITIVE_INFINITY),
      openLongestGcMs: longestGc(openedFrom, windowFrom),
      maxBlockMs: longest,
      maxBlockOnCpuMs: longestOnCpu,
      maxBlockStealMs: longestSteal,
      maxOnCpuMs: maxOnCpu,
      firstWriteMs,
      writeAfterRotateMs,
      checkpointMs,
      hostMs: db.lastCheckpoint?.hostMs ?? 0,
    };
  } finally {
    clearTimeout(timer);
    clearInterval(hostHandle);
    gcObserver.disconnect();
    await db.close();
  }
}

if (require.main === module) {
  void firstCheckpointRound(process.argv[2], process.argv[3] ?? '0').then(
    (sample) => {
      process.stdout.write(`${JSON.stringify(sample)}\n`);
      process.exit(0);
    },
    (e: unknown) => {
      process.stderr.write(`${String(e)}\n`);
      process.exit(1);
    },
  );
}
