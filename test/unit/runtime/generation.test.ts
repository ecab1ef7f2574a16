// GenerationRun's three steps (start, stream, finish) against a scripted backend: outcomes the tiny model cannot
// be made to produce on demand (a natural end, a failing load, a failing generation, error text with paths).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { GenerateOptions, GenerateRequest, GenerateResult, LoadOptions, ModelBackend, ModelInfo } from '../../../src/runtime/backend';
import { TaskRuntime } from '../../../src/runtime/runtime';
import type { TaskEvent } from '../../../src/runtime/task';
import { taskReaches } from '../../support/wait';
import { tempDir } from './helpers';

type Script = (request: GenerateRequest, options: GenerateOptions) => Promise<GenerateResult>;

class ScriptedBackend implements ModelBackend {
  readonly name = 'scripted';
  supportsResume(): boolean {
    return false;
  }
  loaded = false;
  constructor(
    private readonly script: Script,
    private readonly loader: (options: LoadOptions) => Promise<void> = async () => undefined,
  ) {}
  listModels(): ModelInfo[] {
    return [{ id: 'm', source: 'scripted', state: this.loaded ? 'loaded' : 'unloaded', maxContextLength: null, demo: false }];
  }
  resolveModel(model: string | undefined): string | undefined {
    return model === undefined || model === 'm' ? 'm' : undefined;
  }
  isLoaded(): boolean {
    return this.loaded;
  }
  async load(_id: string, options: LoadOptions = {}): Promise<void> {
    await this.loader(options);
    this.loaded = true;
  }
  generate(request: GenerateRequest, options: GenerateOptions): Promise<GenerateResult> {
    return this.script(request, options);
  }
  async dispose(): Promise<void> {}
}

async function run(backend: ModelBackend) {
  const rt = await TaskRuntime.open({ dataDir: tempDir(), backend, deltaFlushMs: 0 });
  const { task } = rt.createTask({ origin: 'lmsp', principal: 'p', input: { model: 'm', input: 'hi', max_output_tokens: 50 } });
  return { rt, task };
}

const types = (events: TaskEvent[]) => events.map((e) => e.type);
const deltas = (events: TaskEvent[]) =>
  events
    .filter((e) => e.type === 'response.output_text.delta')
    .map((e) => e.data.delta)
    .join('');

test('a generation the backend ends by itself completes the response with all its text', async () => {
  const { rt, task } = await run(
    new ScriptedBackend(async (_req, o) => {
      for (const piece of ['Hel', 'lo', ' world']) o.onText(piece, 1);
      return { finishReason: 'stop', inputTokens: 4, outputTokens: 3 };
    }),
  );
  const done = await rt.waitForTerminal(task.id);
  assert.equal(done.status, 'succeeded');
  assert.equal(done.statusMessage, 'completed: 3 tokens');
  assert.deepEqual(done.usage, { input_tokens: 4, output_tokens: 3, total_tokens: 7 });
  const events = rt.readEvents(task.id);
  assert.equal(deltas(events), 'Hello world');
  assert.deepEqual(types(events).slice(-4), [
    'response.output_text.done',
    'response.content_part.done',
    'response.output_item.done',
    'response.completed',
  ]);
  const response = done.response as { status: string; output: Array<{ content: Array<{ text: string }> }>; completed_at: number };
  assert.equal(response.status, 'completed');
  assert.equal(response.output[0].content[0].text, 'Hello world');
  await rt.close();
});

test('a failing load fails the task with model_load_failed, paths scrubbed, nothing generated', async () => {
  let generated = false;
  const { rt, task } = await run(
    new ScriptedBackend(
      async () => {
        generated = true;
        return { finishReason: 'stop', inputTokens: 1, outputTokens: 0 };
      },
      async () => {
        throw new Error("cannot mmap '/home/alice/models/x.gguf' (see C:\\Users\\alice\\log.txt)");
      },
    ),
  );
  const done = await rt.waitForTerminal(task.id);
  assert.equal(done.status, 'failed');
  assert.equal(done.error?.code, 'model_load_failed');
  assert.equal(done.error?.detail, `The model "m" could not be loaded: cannot mmap '<path>' (see <path>)`);
  assert.equal(generated, false);
  assert.ok(!types(rt.readEvents(task.id)).includes('response.in_progress'), 'never running');
  await rt.close();
});

test('a generation that throws fails the task with model_error, keeping its partial text, paths scrubbed', async () => {
  const { rt, task } = await run(
    new ScriptedBackend(async (_req, o) => {
      o.onText('partial', 2);
      throw new Error('read failed: /var/lib/models/secret-name.gguf');
    }),
  );
  const done = await rt.waitForTerminal(task.id);
  assert.equal(done.status, 'failed');
  assert.equal(done.error?.code, 'model_error');
  assert.equal(done.error?.detail, 'Generation failed: read failed: <path>');
  assert.equal(done.outputTokens, 2);
  const events = rt.readEvents(task.id);
  assert.equal(deltas(events), 'partial', 'the text streamed before the failure was persisted');
  assert.deepEqual(types(events).slice(-2), ['error', 'response.failed']);
  const response = done.response as { output: Array<{ content: Array<{ text: string }> }> };
  assert.equal(response.output[0].content[0].text, 'partial');
  await rt.close();
});

test('a cancel while the model loads ends the task cancelled without it ever running', async () => {
  let loadStarted!: () => void;
  const loading = new Promise<void>((r) => (loadStarted = r));
  const backend = new ScriptedBackend(
    async () => assert.fail('no generation after a cancelled load'),
    (o) =>
      new Promise<void>((_resolve, reject) => {
        loadStarted();
        o.signal?.addEventListener('abort', () => reject(new Error('aborted')), { once: true });
      }),
  );
  const { rt, task } = await run(backend);
  await loading;
  await taskReaches(rt, task.id, (t) => t.status === 'loading', 'loading');
  rt.cancelTask(task.id);
  const done = await rt.waitForTerminal(task.id);
  assert.equal(done.status, 'cancelled');
  assert.ok(!types(rt.readEvents(task.id)).includes('response.in_progress'));
  await rt.close();
});

test('a loaded model skips loading: queued → loading → running in one write, then text', async () => {
  const backend = new ScriptedBackend(async (_req, o) => {
    o.onText('x', 1);
    return { finishReason: 'max_output_tokens', inputTokens: 1, outputTokens: 1 };
  });
  backend.loaded = true;
  const { rt, task } = await run(backend);
  const done = await rt.waitForTerminal(task.id);
  assert.equal(done.status, 'succeeded');
  assert.equal((done.response as { status: string }).status, 'incomplete');
  const events = rt.readEvents(task.id);
  // Both transitions' events sit next to each other (one batch); no model.loading progress.
  const loadingAt = events.findIndex((e) => e.type === 'task_runtime:task.status');
  assert.equal(events[loadingAt + 1].type, 'response.in_progress');
  assert.ok(!types(events).includes('task_runtime:model.loading'));
  await rt.close();
});
