// Shared setup for runtime tests: a temp data dir, the real tiny model, a real runtime. Waiting: test/support/wait.
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
/**
 * One backend per test process: loading the model once keeps tests fast. End-of-generation is suppressed, so every
 * generation here runs to its max_output_tokens (or a full context, or a stop): the tiny model otherwise ends on
 * its own now and then (a 12-token prompt ended early in 1 of 7 runs), and lengths are what these tests check.
 */
export function backend(): LlamaBackend {
  sharedBackend ??= new LlamaBackend({ models: [{ id: 'tiny', source: testModelPath() }], suppressEndOfGeneration: true });
  return sharedBackend;
}

export async function openRuntime(dataDir = tempDir(), extra: Partial<RuntimeOptions> = {}): Promise<TaskRuntime> {
  return TaskRuntime.open({ dataDir, backend: backend(), ...extra });
}

export function prompt(text: string, maxOutputTokens = 8) {
  return { model: 'tiny', input: text, max_output_tokens: maxOutputTokens };
}

/** Runs until stopped or the context is full (end-of-generation is suppressed, see backend()): no budget. */
export function longPrompt(text: string) {
  return { model: 'tiny', input: text, temperature: 0 };
}

export function collect(runtime: TaskRuntime, id: string, after?: number): { events: TaskEvent[]; close(): void } {
  const events: TaskEvent[] = [];
  const sub = runtime.subscribe(id, after, (e) => events.push(e));
  return { events, close: () => sub.close() };
}
