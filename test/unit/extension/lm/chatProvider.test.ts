// The language-model chat provider over a real runtime and store (scripted generations, the real tiny model for the
// tokenizer): a request is an editor task with the mapped input and tools, its text streams as text parts equal to
// the task's output, a cancelled token cancels the task, and provideTokenCount uses the loaded model's tokenizer.
// VS Code itself is the stub (test/unit/extension/vscodeStub.ts); the editor test drives the real one.
import { vscodeStub } from '../vscodeStub';
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { TaskRuntimeChatProvider } from '../../../../src/extension/lm/chatProvider';
import { LocalTaskSource } from '../../../../src/extension/model/localTaskSource';
import { PendingRequests } from '../../../../src/extension/model/pendingRequests';
import { TaskTreeModel } from '../../../../src/extension/model/treeModel';
import { answerText } from '../../../../src/runtime/responses';
import { TaskRuntime } from '../../../../src/runtime/runtime';
import { Gate, ScriptedBackend, says } from '../../../fixtures/scriptedBackend';
import { openRuntime, tempDir } from '../../runtime/helpers';

void vscodeStub;

interface Part {
  value?: string;
  callId?: string;
  name?: string;
  input?: object;
}

function token() {
  const listeners: Array<() => void> = [];
  const t = {
    isCancellationRequested: false,
    onCancellationRequested: (l: () => void) => {
      listeners.push(l);
      return { dispose() {} };
    },
    cancel() {
      t.isCancellationRequested = true;
      for (const l of listeners) l();
    },
  };
  return t;
}

async function setup(backend: ScriptedBackend) {
  const runtime = await TaskRuntime.open({ dataDir: tempDir(), backend, deltaFlushMs: 0 });
  const source = new LocalTaskSource(runtime, 'editor');
  const logs: string[] = [];
  const provider = new TaskRuntimeChatProvider({ source, onDidChangeState: () => ({ dispose() {} }), log: (m) => logs.push(m) });
  return { runtime, source, provider, logs };
}

const model = (id = 'm') => ({ id }) as never;
const user = (text: string) => ({ role: 1, content: [{ value: text }], name: undefined }) as never;

describe('chat provider over the runtime', () => {
  it('a request is an editor task; its text streams as text parts equal to the task output', async () => {
    const backend = new ScriptedBackend(says('Hel', 'lo', ' there'));
    const { runtime, source, provider } = await setup(backend);
    try {
      const parts: Part[] = [];
      const tools = [{ name: 'read_file', description: 'Reads a file', inputSchema: { type: 'object', properties: { path: { type: 'string' } } } }];
      await provider.provideLanguageModelChatResponse(
        model(),
        [user('Hi model')],
        { tools, toolMode: 1 } as never,
        { report: (p: Part) => parts.push(p) },
        token() as never,
      );
      assert.equal(parts.map((p) => p.value).join(''), 'Hello there');
      const [task] = (await source.list({ limit: 10 })).tasks;
      assert.ok(task);
      assert.equal(task.status, 'succeeded');
      assert.equal(task.origin, 'editor');
      assert.equal(task.title, 'Chat: Hi model');
      assert.equal(answerText(task.response), 'Hello there');
      const stored = runtime.getTask(task.id)!.request;
      assert.deepEqual(stored.input, [{ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Hi model' }] }]);
      assert.deepEqual(
        stored.tools?.map((t) => t.name),
        ['read_file'],
      );
      assert.equal(stored.tool_choice, 'auto');
      // The reserve is an "up to" budget: capped to the room the prompt leaves, never refused (contextFit.ts).
      assert.ok(stored.max_output_tokens! > 0);
      assert.deepEqual(stored.task_runtime, { cap_max_output_tokens: true });
    } finally {
      await runtime.close();
    }
  });

  it('a cancelled token cancels the task and the request ends quietly', async () => {
    const gate = new Gate(['part'], ['never']);
    const { runtime, source, provider } = await setup(new ScriptedBackend(gate.script));
    try {
      const parts: Part[] = [];
      const t = token();
      const done = provider.provideLanguageModelChatResponse(
        model(),
        [user('long one')],
        { toolMode: 1 } as never,
        { report: (p: Part) => parts.push(p) },
        t as never,
      );
      await gate.started(1);
      t.cancel();
      await done;
      const [task] = (await source.list({ limit: 10 })).tasks;
      assert.equal(task?.status, 'cancelled');
      assert.ok(!parts.some((p) => p.value === 'never'));
    } finally {
      await runtime.close();
    }
  });

  it('an unknown model is NotFound', async () => {
    const { runtime, provider } = await setup(new ScriptedBackend(says('x')));
    try {
      await assert.rejects(
        () => provider.provideLanguageModelChatResponse(model('nope'), [user('hi')], { toolMode: 1 } as never, { report() {} }, token() as never),
        (e: { code?: string }) => e.code === 'NotFound',
      );
    } finally {
      await runtime.close();
    }
  });
});

describe('a request waiting for its model to load', () => {
  it('shows in the tree at once, in the running group, until its task replaces it', async () => {
    const backend = new ScriptedBackend(says('ok'));
    const runtime = await TaskRuntime.open({ dataDir: tempDir(), backend, deltaFlushMs: 0 });
    const source = new LocalTaskSource(runtime, 'editor');
    const pending = new PendingRequests();
    const tree = new TaskTreeModel(source, { pending, intervalMs: 0 });
    let loaded!: () => void;
    const loading = new Promise<void>((resolve) => (loaded = resolve));
    let asked!: () => void;
    const askedToLoad = new Promise<void>((resolve) => (asked = resolve));
    const provider = new TaskRuntimeChatProvider({
      source,
      onDidChangeState: () => ({ dispose() {} }),
      loadModel: async () => {
        asked();
        await loading;
      },
      pending,
      log() {},
    });
    try {
      await tree.reload();
      const reply = provider.provideLanguageModelChatResponse(model(), [user('Explain this')], {} as never, { report: () => {} }, token() as never);
      await askedToLoad;
      // No task yet: the model loads first. The tree shows the request anyway.
      assert.equal((await source.list({ limit: 10 })).tasks.length, 0);
      assert.deepEqual(
        tree.rootNodes().map((g) => [g.id, g.count]),
        [['running', 1]],
      );
      const rows = await tree.groupChildren('running');
      assert.deepEqual(
        rows.map((r) => (r.kind === 'pending' ? [r.kind, r.request.title, r.request.model] : [r.kind])),
        [['pending', 'Chat: Explain this', 'm']],
      );
      assert.equal(tree.activeCount, 1);
      loaded();
      await reply;
      assert.equal(pending.size, 0, 'its task replaced it');
      const [task] = (await source.list({ limit: 10 })).tasks;
      assert.equal(task?.status, 'succeeded');
      assert.ok((await tree.groupChildren('running')).every((r) => r.kind !== 'pending'));
    } finally {
      tree.dispose();
      provider.dispose();
      await runtime.close();
    }
  });
});

describe('token counts', () => {
  let runtime: TaskRuntime | undefined;
  after(async () => runtime?.close());

  it("use the loaded model's tokenizer; before the load (or for an unknown model) the caller estimates", async () => {
    runtime = await openRuntime();
    const text = 'The quick brown fox jumps over the lazy dog, twice over.';
    assert.equal(runtime.countTokens('tiny', text), null, 'not loaded: no tokenizer at hand');
    assert.equal(runtime.countTokens('unknown', text), null);
    await runtime.loadModel('tiny');
    const n = runtime.countTokens('tiny', text);
    assert.ok(Number.isInteger(n) && n! > 0, `${n}`);
    assert.ok(runtime.countTokens('tiny', text + text)! > n!);
    const provider = new TaskRuntimeChatProvider({
      source: new LocalTaskSource(runtime, 'editor'),
      onDidChangeState: () => ({ dispose() {} }),
      log() {},
    });
    assert.equal(await provider.provideTokenCount(model('tiny'), text), n);
    // A model the runtime has no tokenizer for gets the estimate.
    assert.equal(await provider.provideTokenCount(model('unknown'), text), Math.ceil(text.length / 4));
  });
  it('a modelOptions value the table refuses is an error naming the option, and no task is made', async () => {
    const backend = new ScriptedBackend(says('x'));
    const { runtime, source, provider } = await setup(backend);
    try {
      await assert.rejects(
        provider.provideLanguageModelChatResponse(
          model(),
          [user('Hi')],
          { modelOptions: { temperature: 3 } } as never,
          { report: () => {} },
          token() as never,
        ),
        /modelOptions\.temperature must be at least 0 and at most 2/,
      );
      assert.equal((await source.list({ limit: 10 })).tasks.length, 0);
      // The editor's local path refuses the same without the provider: the runtime checks at create.
      await assert.rejects(source.create({ prompt: 'hi', sampling: { temperature: 3 } }), /temperature must be at least 0 and at most 2/);
      // An allowed one reaches the backend.
      await provider.provideLanguageModelChatResponse(
        model(),
        [user('Hi')],
        { modelOptions: { temperature: 0.25, seed: 9 } } as never,
        { report: () => {} },
        token() as never,
      );
      assert.equal(backend.requests.at(-1)?.temperature, 0.25);
      assert.equal(backend.requests.at(-1)?.seed, 9);
    } finally {
      await runtime.close();
    }
  });
});
