// Shared setup for runtime tests: a temp data dir, the real tiny model, a real runtime.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { LlamaBackend } from '../../../src/backends/llama/llamaBackend';
import { TaskRuntime, type RuntimeOptions } from '../../../src/runtime/runtime';
import type { TaskEvent } from '../../../src/runtime/task';
import { testModelPath } from '../../fixtures/testModel';

export function tempDir(prefix = 'tr-test-'): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  process.once('exit', () => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

let sharedBackend: LlamaBackend | undefined;
/** One backend per test process: loading the model once keeps tests fast. */
export function backend(): LlamaBackend {
  sharedBackend ??= new LlamaBackend({ models: [{ id: 'tiny', source: testModelPath() }] });
  return sharedBackend;
}

export async function openRuntime(dataDir = tempDir(), extra: Partial<RuntimeOptions> = {}): Promise<TaskRuntime> {
  return TaskRuntime.open({ dataDir, backend: backend(), ...extra });
}

export function prompt(text: string, maxOutputTokens = 8) {
  return { model: 'tiny', input: text, max_output_tokens: maxOutputTokens };
}

/** Greedy decoding on the tiny model never meets end-of-sequence: it runs until stopped or the context is full. */
export function longPrompt(text: string) {
  return { model: 'tiny', input: text, max_output_tokens: 100_000, temperature: 0 };
}

export function collect(runtime: TaskRuntime, id: string, after?: number): { events: TaskEvent[]; close(): void } {
  const events: TaskEvent[] = [];
  const sub = runtime.subscribe(id, after, (e) => events.push(e));
  return { events, close: () => sub.close() };
}

export async function waitFor(pred: () => boolean, what: string, timeoutMs = 60_000): Promise<void> {
  const start = Date.now();
  while (!pred()) {
    if (Date.now() - start > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}
