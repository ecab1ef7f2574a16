// The runtime the scheduling benches (fair_share, priority) run on: the tiny model, one task at a time, `capacity`
// tasks allowed in the queue (all and per principal), loaded and warmed by one task of its own (the load is nobody's queue wait).
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { LlamaBackend } from '../src/backends/llama/llamaBackend';
import { TaskRuntime, type RuntimeOptions } from '../src/runtime/runtime';

export interface TinyRuntime {
  runtime: TaskRuntime;
  /** A request of `tokens` greedy tokens for `text`. */
  input(text: string): { model: string; input: string; max_output_tokens: number; temperature: number };
  close(): Promise<void>;
}

export async function openTinyRuntime(o: {
  modelPath: string;
  capacity: number;
  tokens: number;
  prefix: string;
  options?: Partial<RuntimeOptions>;
}): Promise<TinyRuntime> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), o.prefix));
  const backend = new LlamaBackend({ models: [{ id: 'tiny', source: o.modelPath }], suppressEndOfGeneration: true });
  const runtime = await TaskRuntime.open({
    dataDir: dir,
    backend,
    ...o.options,
    limits: { maxConcurrentTasks: 1, maxQueuedTasks: o.capacity, maxQueuedTasksPerPrincipal: o.capacity },
  });
  const input = (text: string) => ({ model: 'tiny', input: text, max_output_tokens: o.tokens, temperature: 0 });
  await runtime.waitForTerminal(runtime.createTask({ origin: 'lmsp', principal: 'warm', input: input('warm') }).task.id);
  return {
    runtime,
    input,
    close: async () => {
      await runtime.close();
      await backend.dispose();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
